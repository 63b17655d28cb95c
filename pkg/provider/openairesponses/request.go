package openairesponses

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
)

// buildParams maps a completion request to Responses API parameters,
// with the warnings of the settings this API does not have. The request
// is stateless (store false): the whole transcript is sent as input items,
// reasoning included, as the API documents for stateless use.
func buildParams(req *llm.Request) (responses.ResponseNewParams, []events.Warning, error) {
	var p responses.ResponseNewParams
	model := openai.ModelName(req.Model, Prefix)
	if model == "" {
		return p, nil, fmt.Errorf("%w: model is required", ErrInvalidRequest)
	}
	p.Model = shared.ResponsesModel(model)
	p.Store = param.NewOpt(false)
	if req.System != "" {
		p.Instructions = param.NewOpt(req.System)
	}
	var items responses.ResponseInputParam
	// An assistant message holds output text only: its images and files
	// join the user turn after it.
	msgs, fields := llm.MoveAssistantMedia(req.Messages)
	for i, m := range msgs {
		var err error
		if items, err = appendMessage(items, m, fields, i); err != nil {
			return p, nil, err
		}
	}
	p.Input.OfInputItemList = items
	for _, t := range req.Tools {
		params, err := openai.ToolParameters(t)
		if err != nil {
			return p, nil, err
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
	var effort shared.ReasoningEffort
	if req.Thinking != nil && req.Thinking.BudgetTokens > 0 {
		effort = openai.EffortForBudget(req.Thinking.BudgetTokens)
	}
	if req.ReasoningEffort != "" {
		effort = shared.ReasoningEffort(req.ReasoningEffort)
	}
	if effort != "" {
		p.Reasoning = shared.ReasoningParam{Effort: effort, Summary: shared.ReasoningSummaryAuto}
		// Encrypted reasoning is what lets a stateless request carry the
		// model's reasoning into the next step.
		p.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
	}
	if c := req.Compaction; c != nil {
		// Server-side compaction: the compaction item comes back in the
		// output (stream.go) and goes back as an input item (appendMessage).
		cm := responses.ResponseNewParamsContextManagement{Type: "compaction"}
		if c.Trigger > 0 {
			cm.CompactThreshold = param.NewOpt(c.Trigger)
		}
		p.ContextManagement = []responses.ResponseNewParamsContextManagement{cm}
	}
	warnings, err := mapOptions(&p, &req.ModelOptions, len(req.Tools) > 0)
	if err != nil {
		return p, nil, err
	}
	return p, warnings, nil
}

// mapOptions maps the model options other than reasoning_effort;
// provider_options["openai-responses"] last, so that it is merged over
// everything else.
func mapOptions(p *responses.ResponseNewParams, o *events.ModelOptions, tools bool) ([]events.Warning, error) {
	var warnings []events.Warning
	if f := o.ResponseFormat; f != nil {
		switch f.Type {
		case events.FormatJSONSchema:
			// Raw values: the schema goes out as it came, numbers included.
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(f.Schema, &raw); err != nil || raw == nil {
				return nil, fmt.Errorf("%w: response_format.schema: must be a JSON Schema object", ErrInvalidRequest)
			}
			schema := make(map[string]any, len(raw))
			for k, v := range raw {
				schema[k] = v
			}
			js := &responses.ResponseFormatTextJSONSchemaConfigParam{Name: f.SchemaName(), Schema: schema, Strict: param.NewOpt(f.IsStrict())}
			if f.Description != "" {
				js.Description = param.NewOpt(f.Description)
			}
			p.Text.Format.OfJSONSchema = js
		case events.FormatJSON:
			p.Text.Format.OfJSONObject = &shared.ResponseFormatJSONObjectParam{}
		default:
			return nil, fmt.Errorf("%w: response_format.type: must be json_schema or json, got %q", ErrInvalidRequest, f.Type)
		}
	}
	// auto and none say nothing without tools: left out, as in Chat
	// Completions, which refuses them then.
	if c := o.ToolChoice; c != nil && (tools || c.Forces()) {
		switch c.Mode {
		case events.ToolAuto, events.ToolNone, events.ToolRequired:
			p.ToolChoice.OfToolChoiceMode = param.NewOpt(responses.ToolChoiceOptions(c.Mode))
		case events.ToolNamed:
			p.ToolChoice.OfFunctionTool = &responses.ToolChoiceFunctionParam{Name: c.Name}
		default:
			return nil, fmt.Errorf("%w: tool_choice: unknown mode %q", ErrInvalidRequest, c.Mode)
		}
	}
	if o.ParallelToolCalls != nil && tools {
		p.ParallelToolCalls = param.NewOpt(*o.ParallelToolCalls)
	}
	if o.TopP != nil {
		p.TopP = param.NewOpt(*o.TopP)
	}
	// The Responses API has no stop sequences, sampling seed, penalties or
	// top_k.
	for _, s := range []struct {
		name string
		set  bool
	}{
		{"stop", len(o.Stop) > 0},
		{"top_k", o.TopK != nil},
		{"seed", o.Seed != nil},
		{"presence_penalty", o.PresencePenalty != nil},
		{"frequency_penalty", o.FrequencyPenalty != nil},
	} {
		if s.set {
			warnings = append(warnings, openai.Unsent(Prefix, s.name))
		}
	}
	if o.CacheEnabled() && o.CacheKey != "" {
		p.PromptCacheKey = param.NewOpt(o.CacheKey)
	}
	if raw, ok := o.ProviderOptions[Prefix]; ok {
		extra, err := openai.ExtraFields(*p, raw)
		if err != nil {
			return nil, err
		}
		if extra != nil {
			p.SetExtraFields(extra)
		}
	}
	return warnings, nil
}

func textMessage(role responses.EasyInputMessageRole, text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
		Role: role, Content: responses.EasyInputMessageContentUnionParam{OfString: param.NewOpt(text)},
	}}
}

// appendMessage appends the input items of a message: for a user or tool
// message, a function_call_output per tool_result (an array output when
// the result has images or files) and a user message with the rest.
// fields names message i in the request.
func appendMessage(items responses.ResponseInputParam, m events.Message, fields llm.Fields, i int) (responses.ResponseInputParam, error) {
	switch m.Role {
	case events.RoleUser, events.RoleTool:
		var content responses.ResponseInputMessageContentListParam
		media := false
		for j, part := range m.Content {
			f := fields.Part(i, j)
			switch part.Type {
			case events.PartText:
				content = append(content, responses.ResponseInputContentUnionParam{OfInputText: &responses.ResponseInputTextParam{Text: part.Text}})
			case events.PartImage, events.PartFile:
				c, err := inputContent(part, f)
				if err != nil {
					return nil, err
				}
				content = append(content, c)
				media = true
			case events.PartToolResult:
				out, err := functionOutput(part, f)
				if err != nil {
					return nil, err
				}
				items = append(items, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
					CallID: param.NewOpt(part.ToolUseID), Output: out,
				}})
			}
		}
		switch {
		case media:
			items = append(items, responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
				Role: responses.EasyInputMessageRoleUser, Content: responses.EasyInputMessageContentUnionParam{OfInputItemContentList: content},
			}})
		case len(content) > 0:
			// Text only: the plain string form.
			var text strings.Builder
			for _, c := range content {
				text.WriteString(c.OfInputText.Text)
			}
			if text.Len() > 0 {
				items = append(items, textMessage(responses.EasyInputMessageRoleUser, text.String()))
			}
		}
	case events.RoleAssistant:
		var text strings.Builder
		// Parts keep their order: reasoning, text and calls interleave in
		// the output of a reasoning model and must go back the same way.
		flush := func() {
			if text.Len() > 0 {
				items = append(items, textMessage(responses.EasyInputMessageRoleAssistant, text.String()))
				text.Reset()
			}
		}
		// It holds no media: buildParams moved them.
		for _, part := range m.Content {
			switch part.Type {
			case events.PartText:
				text.WriteString(part.Text)
			case events.PartThinking:
				if data, ok := llm.NativeCompactionData(&part); ok {
					// A compaction item this API produced goes back as
					// one; another provider's compaction is not sent.
					if c, ok := parseCompactionSig(data); ok {
						flush()
						ci := &responses.ResponseCompactionItemParam{EncryptedContent: c.EncryptedContent}
						if c.ID != "" {
							ci.ID = param.NewOpt(c.ID)
						}
						items = append(items, responses.ResponseInputItemUnionParam{OfCompaction: ci})
					}
					continue
				}
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
		return nil, fmt.Errorf("%w: %s: unknown role %q", ErrInvalidRequest, fields.Message(i), m.Role)
	}
	return items, nil
}

// inputContent maps an image or file part of a user message: an image to
// input_image (image_url: a data URL or the https URL; detail auto), a
// PDF to input_file (file_data as a data URL and filename, or file_url),
// a text file with inline data to input_text naming the file, one by URL
// to input_file (file_url). Audio is unsupported_content: the Responses
// API takes no audio input.
func inputContent(part events.Part, field string) (responses.ResponseInputContentUnionParam, error) {
	var none responses.ResponseInputContentUnionParam
	if err := openai.CheckSource(field, part); err != nil {
		return none, err
	}
	mt := openai.MediaType(part)
	switch {
	case part.Type == events.PartImage:
		return responses.ResponseInputContentUnionParam{OfInputImage: &responses.ResponseInputImageParam{
			ImageURL: param.NewOpt(mediaURL(part)), Detail: responses.ResponseInputImageDetailAuto,
		}}, nil
	case openai.IsTextMedia(mt) && part.Data != "":
		text, err := openai.TextFile(field, part)
		if err != nil {
			return none, err
		}
		return responses.ResponseInputContentUnionParam{OfInputText: &responses.ResponseInputTextParam{Text: text}}, nil
	case mt == "application/pdf" || openai.IsTextMedia(mt):
		f := &responses.ResponseInputFileParam{}
		if part.URL != "" {
			f.FileURL = param.NewOpt(part.URL)
		} else {
			f.FileData = param.NewOpt(openai.DataURL(part))
		}
		if name := fileName(part); name != "" {
			f.Filename = param.NewOpt(name)
		}
		return responses.ResponseInputContentUnionParam{OfInputFile: f}, nil
	}
	return none, openai.Unsupported(Prefix, field, part)
}

// functionOutput maps a tool result's content: its text, or, when it has
// images or files, the array of input_text, input_image and input_file
// items the API takes as a function_call_output's output.
func functionOutput(part events.Part, field string) (responses.ResponseInputItemFunctionCallOutputOutputUnionParam, error) {
	var out responses.ResponseInputItemFunctionCallOutputOutputUnionParam
	media := false
	for _, rp := range part.Parts {
		media = media || rp.IsMedia()
	}
	if !media {
		out.OfString = param.NewOpt(part.Content)
		return out, nil
	}
	list := responses.ResponseFunctionCallOutputItemListParam{}
	for k, rp := range part.Parts {
		var item responses.ResponseFunctionCallOutputItemUnionParam
		switch {
		case rp.Type == events.PartText:
			item.OfInputText = &responses.ResponseInputTextContentParam{Text: rp.Text}
		case rp.IsMedia():
			c, err := inputContent(rp, field+".content["+strconv.Itoa(k)+"]")
			if err != nil {
				return out, err
			}
			switch {
			case c.OfInputText != nil:
				item.OfInputText = &responses.ResponseInputTextContentParam{Text: c.OfInputText.Text}
			case c.OfInputImage != nil:
				item.OfInputImage = &responses.ResponseInputImageContentParam{ImageURL: c.OfInputImage.ImageURL, Detail: responses.ResponseInputImageContentDetailAuto}
			case c.OfInputFile != nil:
				item.OfInputFile = &responses.ResponseInputFileContentParam{FileData: c.OfInputFile.FileData, FileURL: c.OfInputFile.FileURL, Filename: c.OfInputFile.Filename}
			}
		default:
			continue
		}
		list = append(list, item)
	}
	out.OfResponseFunctionCallOutputItemArray = list
	return out, nil
}

// mediaURL is the URL of a part, or the data URL of its inline bytes.
func mediaURL(p events.Part) string {
	if p.URL != "" {
		return p.URL
	}
	return openai.DataURL(p)
}

// fileName is the filename of a file part; the API wants one with inline
// file data, so a PDF without a name is "document.pdf".
func fileName(p events.Part) string {
	if p.Filename != "" || p.URL != "" {
		return p.Filename
	}
	if openai.MediaType(p) == "application/pdf" {
		return "document.pdf"
	}
	return ""
}
