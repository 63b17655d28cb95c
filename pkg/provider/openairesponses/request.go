package openairesponses

import (
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
)

// buildParams maps a completion request to Responses API parameters. The
// request is stateless (store false): the whole transcript is sent as
// input items, reasoning included, as the API documents for stateless use.
func buildParams(req *llm.Request) (responses.ResponseNewParams, error) {
	var p responses.ResponseNewParams
	model := openai.ModelName(req.Model, Prefix)
	if model == "" {
		return p, fmt.Errorf("%w: model is required", ErrInvalidRequest)
	}
	p.Model = shared.ResponsesModel(model)
	p.Store = param.NewOpt(false)
	if req.System != "" {
		p.Instructions = param.NewOpt(req.System)
	}
	var items responses.ResponseInputParam
	for i, m := range req.Messages {
		var err error
		if items, err = appendMessage(items, m); err != nil {
			return p, fmt.Errorf("messages[%d]: %w", i, err)
		}
	}
	p.Input.OfInputItemList = items
	for _, t := range req.Tools {
		params, err := openai.ToolParameters(t)
		if err != nil {
			return p, err
		}
		// strict defaults to true on the Responses API, which would reject
		// ordinary schemas (optional properties): ask for it explicitly off.
		ft := &responses.FunctionToolParam{Name: t.Name, Parameters: params, Strict: param.NewOpt(false)}
		if t.Description != "" {
			ft.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: ft})
	}
	if req.MaxTokens > 0 {
		p.MaxOutputTokens = param.NewOpt(int64(req.MaxTokens))
	}
	if req.Temperature != nil {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	if req.Thinking != nil && req.Thinking.BudgetTokens > 0 {
		p.Reasoning = shared.ReasoningParam{
			Effort:  openai.EffortForBudget(req.Thinking.BudgetTokens),
			Summary: shared.ReasoningSummaryAuto,
		}
		// Encrypted reasoning is what lets a stateless request carry the
		// model's reasoning into the next step.
		p.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
	}
	return p, nil
}

func textMessage(role responses.EasyInputMessageRole, text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
		Role: role, Content: responses.EasyInputMessageContentUnionParam{OfString: param.NewOpt(text)},
	}}
}

func appendMessage(items responses.ResponseInputParam, m events.Message) (responses.ResponseInputParam, error) {
	var text strings.Builder
	switch m.Role {
	case events.RoleUser, events.RoleTool:
		for _, part := range m.Content {
			switch part.Type {
			case events.PartText:
				text.WriteString(part.Text)
			case events.PartToolResult:
				items = append(items, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
					CallID: param.NewOpt(part.ToolUseID),
					Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: param.NewOpt(part.Content)},
				}})
			}
		}
		if text.Len() > 0 {
			items = append(items, textMessage(responses.EasyInputMessageRoleUser, text.String()))
		}
	case events.RoleAssistant:
		// Parts keep their order: reasoning, text and calls interleave in
		// the output of a reasoning model and must go back the same way.
		flush := func() {
			if text.Len() > 0 {
				items = append(items, textMessage(responses.EasyInputMessageRoleAssistant, text.String()))
				text.Reset()
			}
		}
		for _, part := range m.Content {
			switch part.Type {
			case events.PartText:
				text.WriteString(part.Text)
			case events.PartThinking:
				// Only reasoning this API produced can go back (it needs the
				// item id); thinking of other providers is dropped.
				sig, ok := parseReasoningSig(part.Signature)
				if !ok {
					continue
				}
				flush()
				r := &responses.ResponseReasoningItemParam{ID: sig.ID, Summary: []responses.ResponseReasoningItemSummaryParam{}}
				for _, s := range sig.Summary {
					r.Summary = append(r.Summary, responses.ResponseReasoningItemSummaryParam{Text: s})
				}
				if sig.EncryptedContent != "" {
					r.EncryptedContent = param.NewOpt(sig.EncryptedContent)
				}
				items = append(items, responses.ResponseInputItemUnionParam{OfReasoning: r})
			case events.PartToolUse:
				flush()
				args, err := openai.ToolArguments(part)
				if err != nil {
					return nil, err
				}
				fc := &responses.ResponseFunctionToolCallParam{CallID: part.ID, Name: part.Name, Arguments: args}
				if sig, ok := parseCallSig(part.Signature); ok {
					fc.ID = param.NewOpt(sig.ID)
				}
				items = append(items, responses.ResponseInputItemUnionParam{OfFunctionCall: fc})
			}
		}
		flush()
	default:
		return nil, fmt.Errorf("%w: unknown role %q", ErrInvalidRequest, m.Role)
	}
	return items, nil
}
