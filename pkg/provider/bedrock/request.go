package bedrock

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// RedactedSignaturePrefix marks the signature of a thinking block that
// Bedrock sent as redacted reasoning (reasoningContent.redactedContent):
// the stop signature is this prefix followed by the standard base64 of the
// opaque bytes. A thinking part whose signature carries it is sent back as
// redactedContent with those bytes.
const RedactedSignaturePrefix = "bedrock-redacted:"

// DefaultMaxTokens is sent as maxTokens when thinking is on and the request
// has no max_tokens: Anthropic models need the budget below it.
const DefaultMaxTokens = 4096

// isAnthropic reports whether a model id (a foundation model, an inference
// profile such as "us.anthropic.claude-…" or an ARN naming one) is a
// Claude model, which reads the Anthropic request fields (thinking,
// top_k) in additionalModelRequestFields.
func isAnthropic(model string) bool { return strings.Contains(model, "anthropic.") }

// cachesPrompts reports whether a model takes cachePoint blocks: Claude and
// Amazon Nova models. Others refuse requests that hold them.
func cachesPrompts(model string) bool {
	return isAnthropic(model) || strings.Contains(model, "amazon.nova")
}

func warn(ws *[]events.Warning, setting, msg string) {
	*ws = append(*ws, events.Warning{Setting: setting, Message: "bedrock: " + msg})
}

// buildInput maps a completion request to ConverseStream's input, with the
// warnings of the settings it did not send.
func buildInput(req *llm.Request) (*bedrockruntime.ConverseStreamInput, []events.Warning, error) {
	if req == nil {
		return nil, nil, fmt.Errorf("%w: nil request", ErrInvalidRequest)
	}
	var ws []events.Warning
	_, model := events.SplitModel(req.Model)
	in := &bedrockruntime.ConverseStreamInput{ModelId: aws.String(model)}
	cache := req.CacheEnabled() && cachesPrompts(model)
	if req.Cache != nil && *req.Cache && !cachesPrompts(model) {
		warn(&ws, "cache", "model "+model+" takes no cache points; none were sent")
	}
	extra := map[string]any{}

	var ic types.InferenceConfiguration
	set := false
	if req.MaxTokens > 0 {
		ic.MaxTokens = aws.Int32(int32(req.MaxTokens))
		set = true
	}
	if req.Temperature != nil {
		ic.Temperature = aws.Float32(float32(*req.Temperature))
		set = true
	}
	if req.TopP != nil {
		ic.TopP = aws.Float32(float32(*req.TopP))
		set = true
	}
	if len(req.Stop) > 0 {
		ic.StopSequences = req.Stop
		set = true
	}
	if req.TopK != nil {
		extra["top_k"] = *req.TopK
	}
	if req.Thinking != nil && req.Thinking.BudgetTokens > 0 {
		if isAnthropic(model) {
			extra["thinking"] = map[string]any{"type": "enabled", "budget_tokens": req.Thinking.BudgetTokens}
			// budget_tokens must be below max_tokens; only a default chosen
			// here makes room, an explicit one is the caller's.
			if req.MaxTokens == 0 {
				ic.MaxTokens = aws.Int32(int32(req.Thinking.BudgetTokens + DefaultMaxTokens))
				set = true
			}
		} else {
			warn(&ws, "thinking", "a thinking budget is sent to Anthropic models only, not to "+model)
		}
	}
	if set {
		in.InferenceConfig = &ic
	}
	if req.Seed != nil {
		warn(&ws, "seed", "ConverseStream has no seed; not sent")
	}
	if req.PresencePenalty != nil {
		warn(&ws, "presence_penalty", "ConverseStream has no presence penalty; not sent")
	}
	if req.FrequencyPenalty != nil {
		warn(&ws, "frequency_penalty", "ConverseStream has no frequency penalty; not sent")
	}
	if req.ReasoningEffort != "" {
		warn(&ws, "reasoning_effort", "ConverseStream has no reasoning effort (use thinking.budget_tokens); not sent")
	}
	if req.ParallelToolCalls != nil {
		warn(&ws, "parallel_tool_calls", "ConverseStream has no parallel tool call setting; not sent")
	}
	if req.ResponseFormat != nil {
		warn(&ws, "response_format", "ConverseStream's structured output is not mapped; not sent")
	}

	if req.System != "" {
		in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: req.System}}
		if cache {
			in.System = append(in.System, &types.SystemContentBlockMemberCachePoint{Value: cachePoint()})
		}
	}
	tc, err := toolConfig(req, cache, &ws)
	if err != nil {
		return nil, nil, err
	}
	in.ToolConfig = tc
	msgs, err := messages(req.Messages)
	if err != nil {
		return nil, nil, err
	}
	if cache && len(msgs) > 0 {
		last := &msgs[len(msgs)-1]
		last.Content = append(last.Content, &types.ContentBlockMemberCachePoint{Value: cachePoint()})
	}
	in.Messages = msgs

	if raw, ok := req.ProviderOptions[Name]; ok {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil || m == nil {
			return nil, nil, fmt.Errorf("%w: provider_options.bedrock: must be a JSON object", ErrInvalidRequest)
		}
		for k, v := range m {
			extra[k] = v
		}
	}
	if len(extra) > 0 {
		in.AdditionalModelRequestFields = document.NewLazyDocument(extra)
	}
	return in, ws, nil
}

func cachePoint() types.CachePointBlock {
	return types.CachePointBlock{Type: types.CachePointTypeDefault}
}

func toolConfig(req *llm.Request, cache bool, ws *[]events.Warning) (*types.ToolConfiguration, error) {
	if len(req.Tools) == 0 {
		if req.ToolChoice != nil {
			warn(ws, "tool_choice", "no tools, so no tool choice was sent")
		}
		return nil, nil
	}
	tc := &types.ToolConfiguration{}
	for i, t := range req.Tools {
		schema := map[string]any{"type": "object", "properties": map[string]any{}}
		if raw := bytes.TrimSpace(t.InputSchema); len(raw) > 0 {
			schema = nil
			if err := json.Unmarshal(raw, &schema); err != nil || schema == nil {
				return nil, fmt.Errorf("%w: tools[%d].input_schema: must be a JSON object", ErrInvalidRequest, i)
			}
		}
		spec := types.ToolSpecification{
			Name:        aws.String(t.Name),
			InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(schema)},
		}
		if t.Description != "" {
			spec.Description = aws.String(t.Description)
		}
		tc.Tools = append(tc.Tools, &types.ToolMemberToolSpec{Value: spec})
	}
	if cache {
		tc.Tools = append(tc.Tools, &types.ToolMemberCachePoint{Value: cachePoint()})
	}
	if c := req.ToolChoice; c != nil {
		switch c.Mode {
		case events.ToolAuto:
			tc.ToolChoice = &types.ToolChoiceMemberAuto{}
		case events.ToolRequired:
			tc.ToolChoice = &types.ToolChoiceMemberAny{}
		case events.ToolNamed:
			tc.ToolChoice = &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: aws.String(c.Name)}}
		case events.ToolNone:
			// The tools stay: a transcript with tool calls needs them.
			warn(ws, "tool_choice", `ConverseStream has no tool choice "none"; the model may call tools`)
		}
	}
	return tc, nil
}

// messages maps the transcript. Tool messages become user messages (the
// API carries tool results in user turns), and consecutive messages of one
// role are merged because the API wants alternating turns. Only a user
// turn may hold images and documents, so an assistant message's images
// and files join the user turn after it (llm.MoveAssistantMedia).
func messages(req []events.Message) ([]types.Message, error) {
	msgs, fields := llm.MoveAssistantMedia(req)
	out := make([]types.Message, 0, len(msgs))
	for i, m := range msgs {
		role := types.ConversationRoleUser
		if m.Role == events.RoleAssistant {
			role = types.ConversationRoleAssistant
		}
		blocks := make([]types.ContentBlock, 0, len(m.Content))
		for j := range m.Content {
			b, err := block(&m.Content[j], role, fields.Part(i, j))
			if err != nil {
				return nil, err
			}
			if b != nil {
				blocks = append(blocks, b)
			}
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, types.Message{Role: role, Content: blocks})
	}
	return out, nil
}

func block(p *events.Part, role types.ConversationRole, field string) (types.ContentBlock, error) {
	switch p.Type {
	case events.PartText:
		if p.Text == "" {
			// The API rejects empty text blocks.
			return nil, nil
		}
		return &types.ContentBlockMemberText{Value: p.Text}, nil
	case events.PartThinking:
		if role != types.ConversationRoleAssistant {
			return nil, nil
		}
		if data, ok := strings.CutPrefix(p.Signature, RedactedSignaturePrefix); ok {
			b, err := base64.StdEncoding.DecodeString(data)
			if err != nil {
				return nil, fmt.Errorf("%w: %s.signature: redacted reasoning is not base64: %v", ErrInvalidRequest, field, err)
			}
			return &types.ContentBlockMemberReasoningContent{Value: &types.ReasoningContentBlockMemberRedactedContent{Value: b}}, nil
		}
		if p.Thinking == "" && p.Signature == "" {
			return nil, nil
		}
		rt := types.ReasoningTextBlock{Text: aws.String(p.Thinking)}
		if p.Signature != "" {
			rt.Signature = aws.String(p.Signature)
		}
		return &types.ContentBlockMemberReasoningContent{Value: &types.ReasoningContentBlockMemberReasoningText{Value: rt}}, nil
	case events.PartToolUse:
		var input any = map[string]any{}
		if raw := bytes.TrimSpace(p.Input); len(raw) > 0 {
			if err := json.Unmarshal(raw, &input); err != nil {
				return nil, fmt.Errorf("%w: %s: tool_use %q: input is not valid JSON", ErrInvalidRequest, field, p.ID)
			}
		}
		return &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
			ToolUseId: aws.String(p.ID), Name: aws.String(p.Name), Input: document.NewLazyDocument(input),
		}}, nil
	case events.PartToolResult:
		tr := types.ToolResultBlock{ToolUseId: aws.String(p.ToolUseID)}
		if p.IsError {
			tr.Status = types.ToolResultStatusError
		}
		if len(p.Parts) > 0 {
			for k := range p.Parts {
				c, err := resultContent(&p.Parts[k], fmt.Sprintf("%s.parts[%d]", field, k))
				if err != nil {
					return nil, err
				}
				if c != nil {
					tr.Content = append(tr.Content, c)
				}
			}
		}
		if len(tr.Content) == 0 {
			// The API wants content; an empty result is an empty text.
			tr.Content = []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: p.Content}}
		}
		return &types.ContentBlockMemberToolResult{Value: tr}, nil
	case events.PartImage:
		img, err := image(p, field)
		if err != nil {
			return nil, err
		}
		return &types.ContentBlockMemberImage{Value: img}, nil
	case events.PartFile:
		doc, err := documentBlock(p, field)
		if err != nil {
			return nil, err
		}
		return &types.ContentBlockMemberDocument{Value: doc}, nil
	}
	return nil, nil
}

func resultContent(p *events.Part, field string) (types.ToolResultContentBlock, error) {
	switch p.Type {
	case events.PartText:
		if p.Text == "" {
			return nil, nil
		}
		return &types.ToolResultContentBlockMemberText{Value: p.Text}, nil
	case events.PartImage:
		img, err := image(p, field)
		if err != nil {
			return nil, err
		}
		return &types.ToolResultContentBlockMemberImage{Value: img}, nil
	case events.PartFile:
		doc, err := documentBlock(p, field)
		if err != nil {
			return nil, err
		}
		return &types.ToolResultContentBlockMemberDocument{Value: doc}, nil
	}
	return nil, nil
}

// mediaBytes returns an inline part's bytes. Bedrock reads media from the
// request body (or S3), not from https URLs.
func mediaBytes(p *events.Part, field, what string) ([]byte, error) {
	switch {
	case p.Data != "":
		b, err := p.Bytes()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidRequest, field, err)
		}
		return b, nil
	case p.URL != "":
		return nil, llm.UnsupportedContent(Name, field, what+" by URL (ConverseStream takes the bytes)")
	case p.Ref != "":
		return nil, fmt.Errorf("%w: %s: unresolved media ref %s", ErrInvalidRequest, field, p.Ref)
	}
	return nil, fmt.Errorf("%w: %s: media part without data", ErrInvalidRequest, field)
}

var imageFormats = map[string]types.ImageFormat{
	"image/png":  types.ImageFormatPng,
	"image/jpeg": types.ImageFormatJpeg,
	"image/gif":  types.ImageFormatGif,
	"image/webp": types.ImageFormatWebp,
}

func image(p *events.Part, field string) (types.ImageBlock, error) {
	f, ok := imageFormats[p.MediaType]
	if !ok {
		return types.ImageBlock{}, llm.UnsupportedContent(Name, field, p.MediaType+" image")
	}
	b, err := mediaBytes(p, field, p.MediaType+" image")
	if err != nil {
		return types.ImageBlock{}, err
	}
	return types.ImageBlock{Format: f, Source: &types.ImageSourceMemberBytes{Value: b}}, nil
}

// documentFormats are the media types of ConverseStream's document formats.
// JSON goes as text, the nearest format Bedrock reads.
var documentFormats = map[string]types.DocumentFormat{
	"application/pdf":          types.DocumentFormatPdf,
	"text/csv":                 types.DocumentFormatCsv,
	"application/msword":       types.DocumentFormatDoc,
	"application/vnd.ms-excel": types.DocumentFormatXls,
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document": types.DocumentFormatDocx,
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":       types.DocumentFormatXlsx,
	"text/html":        types.DocumentFormatHtml,
	"text/plain":       types.DocumentFormatTxt,
	"application/json": types.DocumentFormatTxt,
	"text/markdown":    types.DocumentFormatMd,
}

func documentBlock(p *events.Part, field string) (types.DocumentBlock, error) {
	f, ok := documentFormats[p.MediaType]
	if !ok {
		return types.DocumentBlock{}, llm.UnsupportedContent(Name, field, p.MediaType+" file")
	}
	b, err := mediaBytes(p, field, p.MediaType+" file")
	if err != nil {
		return types.DocumentBlock{}, err
	}
	return types.DocumentBlock{Format: f, Name: aws.String(documentName(p.Filename)), Source: &types.DocumentSourceMemberBytes{Value: b}}, nil
}

// documentName makes a filename a valid document name: Bedrock allows
// letters, digits, single spaces, hyphens, parentheses and square
// brackets. The extension goes (the format says it), every other
// character becomes a hyphen.
func documentName(filename string) string {
	if i := strings.LastIndexByte(filename, '.'); i > 0 {
		filename = filename[:i]
	}
	var b strings.Builder
	space := false
	for _, r := range filename {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '(', r == ')', r == '[', r == ']':
			b.WriteRune(r)
			space = false
		case r == ' ' || r == '\t':
			if !space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = true
		default:
			b.WriteByte('-')
			space = false
		}
	}
	name := strings.TrimSpace(b.String())
	if name == "" {
		return "document"
	}
	return name
}
