package openai

import (
	"fmt"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// buildParams maps a completion request to Chat Completions parameters.
//
// Chat Completions has no way to send reasoning back, so thinking parts are
// dropped; tool results become "tool" role messages (one per result, in
// order, before any text of the same message, because the API requires
// them right after the assistant message that called the tools).
func buildParams(req *llm.Request) (sdk.ChatCompletionNewParams, error) {
	var p sdk.ChatCompletionNewParams
	model := ModelName(req.Model, Prefix)
	if model == "" {
		return p, fmt.Errorf("%w: model is required", ErrInvalidRequest)
	}
	p.Model = shared.ChatModel(model)
	p.StreamOptions.IncludeUsage = param.NewOpt(true)
	if req.System != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(req.System))
	}
	for i, m := range req.Messages {
		msgs, err := mapMessage(m)
		if err != nil {
			return p, fmt.Errorf("messages[%d]: %w", i, err)
		}
		p.Messages = append(p.Messages, msgs...)
	}
	for _, t := range req.Tools {
		params, err := ToolParameters(t)
		if err != nil {
			return p, err
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			fd.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(fd))
	}
	if req.MaxTokens > 0 {
		// max_tokens is deprecated and rejected by reasoning models.
		p.MaxCompletionTokens = param.NewOpt(int64(req.MaxTokens))
	}
	if req.Temperature != nil {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	if req.Thinking != nil && req.Thinking.BudgetTokens > 0 {
		p.ReasoningEffort = EffortForBudget(req.Thinking.BudgetTokens)
	}
	return p, nil
}

func mapMessage(m events.Message) ([]sdk.ChatCompletionMessageParamUnion, error) {
	var out []sdk.ChatCompletionMessageParamUnion
	var text strings.Builder
	switch m.Role {
	case events.RoleUser, events.RoleTool:
		for _, part := range m.Content {
			switch part.Type {
			case events.PartText:
				text.WriteString(part.Text)
			case events.PartToolResult:
				out = append(out, sdk.ToolMessage(part.Content, part.ToolUseID))
			}
		}
		if text.Len() > 0 || (len(out) == 0 && m.Role == events.RoleUser) {
			out = append(out, sdk.UserMessage(text.String()))
		}
	case events.RoleAssistant:
		var a sdk.ChatCompletionAssistantMessageParam
		for _, part := range m.Content {
			switch part.Type {
			case events.PartText:
				text.WriteString(part.Text)
			case events.PartToolUse:
				args, err := ToolArguments(part)
				if err != nil {
					return nil, err
				}
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID: part.ID,
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name: part.Name, Arguments: args,
						},
					},
				})
			}
			// thinking: Chat Completions cannot take reasoning back; dropped.
		}
		if text.Len() == 0 && len(a.ToolCalls) == 0 {
			return nil, nil // an assistant message of thinking only
		}
		if text.Len() > 0 {
			a.Content.OfString = param.NewOpt(text.String())
		}
		out = append(out, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
	default:
		return nil, fmt.Errorf("%w: unknown role %q", ErrInvalidRequest, m.Role)
	}
	return out, nil
}
