package openai

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// buildParams maps a completion request to Chat Completions parameters,
// with the warnings of the settings this API does not have.
//
// Chat Completions has no way to send reasoning back, so thinking parts are
// dropped; tool results become "tool" role messages (one per result, in
// order, before any text of the same message, because the API requires
// them right after the assistant message that called the tools). A tool
// message holds text only: the images and files of the results of a step
// go in one user message right after that step's tool messages. An
// assistant message holds none either: its images and files join the user
// turn after it (llm.MoveAssistantMedia). The
// output limit is max_completion_tokens, or max_tokens for an
// OpenAI-compatible server (compatible).
func buildParams(req *llm.Request, compatible bool) (sdk.ChatCompletionNewParams, []events.Warning, error) {
	var p sdk.ChatCompletionNewParams
	model := ModelName(req.Model, Prefix)
	if model == "" {
		return p, nil, fmt.Errorf("%w: model is required", ErrInvalidRequest)
	}
	p.Model = shared.ChatModel(model)
	p.StreamOptions.IncludeUsage = param.NewOpt(true)
	if req.System != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(req.System))
	}
	// carried holds the content parts of the tool results of the tool
	// messages just sent, for the user message that follows them.
	var carried []sdk.ChatCompletionContentPartUnionParam
	flush := func() {
		if len(carried) > 0 {
			p.Messages = append(p.Messages, sdk.UserMessage(carried))
			carried = nil
		}
	}
	msgs, fields := llm.MoveAssistantMedia(req.Messages)
	for i, m := range msgs {
		switch m.Role {
		case events.RoleUser, events.RoleTool:
			var err error
			if carried, err = mapUserMessage(&p, carried, m, func(j int) string { return fields.Part(i, j) }); err != nil {
				return p, nil, err
			}
		case events.RoleAssistant:
			flush()
			msg, err := mapAssistant(m)
			if err != nil {
				return p, nil, err
			}
			if msg != nil {
				p.Messages = append(p.Messages, *msg)
			}
		default:
			return p, nil, fmt.Errorf("%w: %s: unknown role %q", ErrInvalidRequest, fields.Message(i), m.Role)
		}
	}
	flush()
	for _, t := range req.Tools {
		params, err := ToolParameters(t)
		if err != nil {
			return p, nil, err
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			fd.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(fd))
	}
	switch {
	case req.MaxTokens <= 0:
	case compatible:
		// Ollama, llama.cpp and vLLM read max_tokens only (OpenAI
		// deprecated it, and its reasoning models reject it): sent as
		// max_completion_tokens, the limit would be ignored there.
		p.MaxTokens = param.NewOpt(int64(req.MaxTokens))
	default:
		p.MaxCompletionTokens = param.NewOpt(int64(req.MaxTokens))
	}
	if req.Temperature != nil {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	if req.Thinking != nil && req.Thinking.BudgetTokens > 0 {
		p.ReasoningEffort = EffortForBudget(req.Thinking.BudgetTokens)
	}
	warnings, err := mapOptions(&p, &req.ModelOptions, len(req.Tools) > 0)
	if err != nil {
		return p, nil, err
	}
	return p, warnings, nil
}

// mapOptions maps the model options; provider_options["openai"] last, so
// that it is merged over everything else.
func mapOptions(p *sdk.ChatCompletionNewParams, o *events.ModelOptions, tools bool) ([]events.Warning, error) {
	var warnings []events.Warning
	if f := o.ResponseFormat; f != nil {
		switch f.Type {
		case events.FormatJSONSchema:
			js := shared.ResponseFormatJSONSchemaJSONSchemaParam{
				Name: f.SchemaName(), Schema: json.RawMessage(f.Schema), Strict: param.NewOpt(f.IsStrict()),
			}
			if f.Description != "" {
				js.Description = param.NewOpt(f.Description)
			}
			p.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}
		case events.FormatJSON:
			p.ResponseFormat.OfJSONObject = &shared.ResponseFormatJSONObjectParam{}
		default:
			return nil, fmt.Errorf("%w: response_format.type: must be json_schema or json, got %q", ErrInvalidRequest, f.Type)
		}
	}
	// The API refuses tool_choice and parallel_tool_calls without tools;
	// auto and none say nothing then, so they are left out.
	if c := o.ToolChoice; c != nil && (tools || c.Forces()) {
		switch c.Mode {
		case events.ToolAuto, events.ToolNone, events.ToolRequired:
			p.ToolChoice.OfAuto = param.NewOpt(string(c.Mode))
		case events.ToolNamed:
			p.ToolChoice.OfFunctionToolChoice = &sdk.ChatCompletionNamedToolChoiceParam{
				Function: sdk.ChatCompletionNamedToolChoiceFunctionParam{Name: c.Name},
			}
		default:
			return nil, fmt.Errorf("%w: tool_choice: unknown mode %q", ErrInvalidRequest, c.Mode)
		}
	}
	if o.ParallelToolCalls != nil && tools {
		p.ParallelToolCalls = param.NewOpt(*o.ParallelToolCalls)
	}
	if len(o.Stop) > 0 {
		p.Stop.OfStringArray = o.Stop
	}
	if o.TopP != nil {
		p.TopP = param.NewOpt(*o.TopP)
	}
	if o.TopK != nil {
		warnings = append(warnings, Unsent(Prefix, "top_k"))
	}
	if o.Seed != nil {
		p.Seed = param.NewOpt(*o.Seed)
	}
	if o.PresencePenalty != nil {
		p.PresencePenalty = param.NewOpt(*o.PresencePenalty)
	}
	if o.FrequencyPenalty != nil {
		p.FrequencyPenalty = param.NewOpt(*o.FrequencyPenalty)
	}
	if o.ReasoningEffort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(o.ReasoningEffort)
	}
	if o.CacheEnabled() && o.CacheKey != "" {
		p.PromptCacheKey = param.NewOpt(o.CacheKey)
	}
	if raw, ok := o.ProviderOptions[Prefix]; ok {
		extra, err := ExtraFields(*p, raw)
		if err != nil {
			return nil, err
		}
		if extra != nil {
			p.SetExtraFields(extra)
		}
	}
	return warnings, nil
}

// mapUserMessage appends the messages of a user or tool message: one tool
// message per tool_result, then a user message with the message's own
// content. The media of the tool results are returned in carried (after
// those of earlier tool messages of the same step), so that they follow
// every tool message of the step; the message's own content joins them.
// field names part j of m in the request.
func mapUserMessage(p *sdk.ChatCompletionNewParams, carried []sdk.ChatCompletionContentPartUnionParam, m events.Message, field func(j int) string) ([]sdk.ChatCompletionContentPartUnionParam, error) {
	var own []sdk.ChatCompletionContentPartUnionParam
	media, results := false, 0
	for j, part := range m.Content {
		f := field(j)
		switch part.Type {
		case events.PartText:
			own = append(own, sdk.TextContentPart(part.Text))
		case events.PartImage, events.PartFile:
			cp, err := contentPart(part, f)
			if err != nil {
				return nil, err
			}
			own = append(own, cp)
			media = true
		case events.PartToolResult:
			results++
			text := part.Content
			var parts []sdk.ChatCompletionContentPartUnionParam
			for k, rp := range part.Parts {
				if !rp.IsMedia() {
					continue
				}
				cp, err := contentPart(rp, f+".content["+strconv.Itoa(k)+"]")
				if err != nil {
					return nil, err
				}
				parts = append(parts, cp)
			}
			if len(parts) > 0 {
				if text == "" {
					text = "[the images and files of this result follow in a user message]"
				}
				carried = append(carried, sdk.TextContentPart("[images and files of the result of tool call "+part.ToolUseID+"]"))
				carried = append(carried, parts...)
			}
			p.Messages = append(p.Messages, sdk.ToolMessage(text, part.ToolUseID))
		}
	}
	if len(own) == 0 && (results > 0 || m.Role != events.RoleUser) {
		return carried, nil
	}
	if len(carried) == 0 && !media {
		// Text only: the plain string form.
		var text strings.Builder
		for _, cp := range own {
			text.WriteString(cp.OfText.Text)
		}
		p.Messages = append(p.Messages, sdk.UserMessage(text.String()))
		return nil, nil
	}
	p.Messages = append(p.Messages, sdk.UserMessage(append(carried, own...)))
	return nil, nil
}

// contentPart maps an image or file part to a user message content part:
// an image to image_url (a data URL or the https URL), a PDF to file
// (file_data as a data URL, filename), a text file to text naming the
// file (the API has no text file input), wav and mp3 audio to
// input_audio. Anything else is unsupported_content.
func contentPart(part events.Part, field string) (sdk.ChatCompletionContentPartUnionParam, error) {
	var none sdk.ChatCompletionContentPartUnionParam
	if err := CheckSource(field, part); err != nil {
		return none, err
	}
	mt := MediaType(part)
	switch {
	case part.Type == events.PartImage:
		url := part.URL
		if url == "" {
			url = DataURL(part)
		}
		return sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: url}), nil
	case part.URL != "":
		// file parts: Chat Completions takes file bytes only, no URL.
	case mt == "application/pdf":
		name := part.Filename
		if name == "" {
			name = "document.pdf"
		}
		return sdk.FileContentPart(sdk.ChatCompletionContentPartFileFileParam{
			FileData: param.NewOpt(DataURL(part)), Filename: param.NewOpt(name),
		}), nil
	case IsTextMedia(mt):
		text, err := TextFile(field, part)
		if err != nil {
			return none, err
		}
		return sdk.TextContentPart(text), nil
	case mt == "audio/wav" || mt == "audio/mpeg":
		format := "wav"
		if mt == "audio/mpeg" {
			format = "mp3"
		}
		return sdk.InputAudioContentPart(sdk.ChatCompletionContentPartInputAudioInputAudioParam{Data: part.Data, Format: format}), nil
	}
	return none, Unsupported(Prefix, field, part)
}

// mapAssistant maps an assistant message (nil when nothing of it can be
// sent: a message of thinking only). It holds no media: buildParams moved
// them to the user turn after it.
func mapAssistant(m events.Message) (*sdk.ChatCompletionMessageParamUnion, error) {
	var a sdk.ChatCompletionAssistantMessageParam
	var text strings.Builder
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
		return nil, nil
	}
	if text.Len() > 0 {
		a.Content.OfString = param.NewOpt(text.String())
	}
	return &sdk.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
}
