package gemini

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/genai"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// request is a completion request mapped to generateContent arguments,
// with the settings that were not sent (warnings).
type request struct {
	model    string
	contents []*genai.Content
	config   *genai.GenerateContentConfig
	warnings []events.Warning
}

// invalid returns an invalid-request error of Stream: it matches
// ErrInvalidRequest and classifies as llm.KindInvalidRequest.
func invalid(format string, args ...any) error {
	return &llm.APIError{ErrKind: llm.KindInvalidRequest, Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)}
}

// buildRequest maps a completion request to generateContent arguments.
func buildRequest(req *llm.Request) (*request, error) {
	if req == nil {
		return nil, invalid("nil request")
	}
	_, model := events.SplitModel(req.Model)
	r := &request{model: model}
	cfg := &genai.GenerateContentConfig{
		// Continuation re-sends the request on its own (also after a clean
		// empty close); the adapter's retry and failure rules must stay the
		// only ones.
		AutomaticContinuation: genai.Ptr(false),
	}
	r.config = cfg
	if req.System != "" {
		cfg.SystemInstruction = &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{Text: req.System}}}
	}
	if req.MaxTokens > 0 {
		cfg.MaxOutputTokens = int32(req.MaxTokens)
	}
	if req.Temperature != nil {
		cfg.Temperature = genai.Ptr(float32(*req.Temperature))
	}
	if req.Thinking != nil {
		cfg.ThinkingConfig = &genai.ThinkingConfig{
			ThinkingBudget:  genai.Ptr(int32(req.Thinking.BudgetTokens)),
			IncludeThoughts: true,
		}
		if req.ReasoningEffort != "" {
			r.warn("reasoning_effort", "not sent: thinking.budget_tokens is set and takes precedence")
		}
	} else if req.ReasoningEffort != "" {
		cfg.ThinkingConfig = thinkingFor(model, req.ReasoningEffort)
	}
	if len(req.Tools) > 0 {
		decls := make([]*genai.FunctionDeclaration, 0, len(req.Tools))
		for i, t := range req.Tools {
			d := &genai.FunctionDeclaration{Name: t.Name, Description: t.Description}
			if raw := bytes.TrimSpace(t.InputSchema); len(raw) > 0 {
				var schema any
				if err := json.Unmarshal(raw, &schema); err != nil {
					return nil, invalid("tools[%d].input_schema: %w", i, err)
				}
				d.ParametersJsonSchema = schema
			}
			decls = append(decls, d)
		}
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
	}
	if err := r.options(req); err != nil {
		return nil, err
	}
	contents, err := buildContents(req.Messages, functionResponseMedia(model))
	if err != nil {
		return nil, err
	}
	r.contents = contents
	return r, nil
}

func (r *request) warn(setting, why string) {
	r.warnings = append(r.warnings, events.Warning{Setting: setting, Message: "gemini: " + setting + " " + why})
}

// Thinking budgets of reasoning_effort on models that think with a budget.
const (
	BudgetLow    = 1024
	BudgetMedium = 4096
	BudgetHigh   = 16384
)

// thinkingFor maps reasoning_effort: thinkingLevel LOW, MEDIUM or HIGH on
// the models that take a level (Gemini 3 and later), a thinking budget on
// the others. Thoughts are included, as with an explicit budget.
func thinkingFor(model string, e events.ReasoningEffort) *genai.ThinkingConfig {
	tc := &genai.ThinkingConfig{IncludeThoughts: true}
	if major, _, ok := geminiVersion(model); ok && major >= 3 {
		switch e {
		case events.EffortLow:
			tc.ThinkingLevel = genai.ThinkingLevelLow
		case events.EffortHigh:
			tc.ThinkingLevel = genai.ThinkingLevelHigh
		default:
			tc.ThinkingLevel = genai.ThinkingLevelMedium
		}
		return tc
	}
	budget := int32(BudgetMedium)
	switch e {
	case events.EffortLow:
		budget = BudgetLow
	case events.EffortHigh:
		budget = BudgetHigh
	}
	tc.ThinkingBudget = genai.Ptr(budget)
	return tc
}

// options maps response_format, tool_choice, stop and sampling and the
// provider options.
func (r *request) options(req *llm.Request) error {
	cfg := r.config
	if f := req.ResponseFormat; f != nil {
		cfg.ResponseMIMEType = "application/json"
		if f.Type == events.FormatJSONSchema {
			var schema any
			if err := json.Unmarshal(f.Schema, &schema); err != nil {
				return invalid("response_format.schema: %w", err)
			}
			cfg.ResponseJsonSchema = schema
		}
	}
	if c := req.ToolChoice; c != nil {
		fc := &genai.FunctionCallingConfig{}
		switch c.Mode {
		case events.ToolAuto:
			fc.Mode = genai.FunctionCallingConfigModeAuto
		case events.ToolNone:
			fc.Mode = genai.FunctionCallingConfigModeNone
		case events.ToolRequired:
			fc.Mode = genai.FunctionCallingConfigModeAny
		case events.ToolNamed:
			fc.Mode = genai.FunctionCallingConfigModeAny
			fc.AllowedFunctionNames = []string{c.Name}
		}
		cfg.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: fc}
	}
	if req.ParallelToolCalls != nil && !*req.ParallelToolCalls {
		r.warn("parallel_tool_calls", "not sent: the Gemini API has no setting to limit a step to one function call")
	}
	if len(req.Stop) > 0 {
		cfg.StopSequences = append([]string(nil), req.Stop...)
	}
	if req.TopP != nil {
		cfg.TopP = genai.Ptr(float32(*req.TopP))
	}
	if req.TopK != nil {
		cfg.TopK = genai.Ptr(float32(*req.TopK))
	}
	if req.Seed != nil {
		if *req.Seed < math.MinInt32 || *req.Seed > math.MaxInt32 {
			r.warn("seed", fmt.Sprintf("not sent: %d does not fit the API's 32-bit seed", *req.Seed))
		} else {
			cfg.Seed = genai.Ptr(int32(*req.Seed))
		}
	}
	if req.PresencePenalty != nil {
		cfg.PresencePenalty = genai.Ptr(float32(*req.PresencePenalty))
	}
	if req.FrequencyPenalty != nil {
		cfg.FrequencyPenalty = genai.Ptr(float32(*req.FrequencyPenalty))
	}
	prefix, _ := events.SplitModel(req.Model)
	key := "gemini"
	if _, ok := req.ProviderOptions[key]; !ok && prefix != "" {
		key = prefix
	}
	if raw, ok := req.ProviderOptions[key]; ok {
		var patch map[string]any
		if err := json.Unmarshal(raw, &patch); err != nil {
			return invalid("provider_options.%s: must be a JSON object: %w", key, err)
		}
		if f := emptyKey(patch, "provider_options."+key); f != "" {
			return invalid("%s: a key must not be empty", f)
		}
		// genai hands the request body to ExtrasRequestProvider last,
		// just before it is encoded.
		cfg.HTTPOptions = &genai.HTTPOptions{ExtrasRequestProvider: func(body map[string]any) map[string]any {
			return mergePatch(body, patch)
		}}
	}
	return nil
}

// mergePatch applies patch to body as a JSON Merge Patch (RFC 7396): an
// object merges key by key, null removes a field, anything else replaces
// it.
func mergePatch(body, patch map[string]any) map[string]any {
	if body == nil {
		body = map[string]any{}
	}
	for k, v := range patch {
		switch v := v.(type) {
		case nil:
			delete(body, k)
		case map[string]any:
			target, _ := body[k].(map[string]any)
			body[k] = mergePatch(target, v)
		default:
			body[k] = v
		}
	}
	return body
}

// emptyKey returns the field of the first object in patch with an empty
// key, "" when there is none.
func emptyKey(patch map[string]any, field string) string {
	for k, v := range patch {
		if k == "" {
			return field
		}
		if m, ok := v.(map[string]any); ok {
			if f := emptyKey(m, field+"."+k); f != "" {
				return f
			}
		}
	}
	return ""
}

// geminiVersion reads the generation of a Gemini model name: 2.5 of
// "gemini-2.5-flash", 3 of "gemini-3-pro-preview". ok is false for a name
// without one.
func geminiVersion(model string) (major, minor int, ok bool) {
	i := strings.Index(model, "gemini-")
	if i < 0 {
		return 0, 0, false
	}
	v, _, _ := strings.Cut(model[i+len("gemini-"):], "-")
	ma, mi, hasMinor := strings.Cut(v, ".")
	major, err := strconv.Atoi(ma)
	if err != nil {
		return 0, 0, false
	}
	if hasMinor {
		minor, _ = strconv.Atoi(mi)
	}
	return major, minor, true
}

// functionResponseMedia reports whether the model reads media inside a
// functionResponse (its parts): Gemini 3 and later. Earlier models get
// them as parts of the same user turn, after the functionResponse.
func functionResponseMedia(model string) bool {
	major, _, ok := geminiVersion(model)
	return ok && major >= 3
}

// inFunctionResponse reports whether a media type may ride in a
// functionResponse's parts.
func inFunctionResponse(mediaType string) bool {
	switch mediaType {
	case "image/png", "image/jpeg", "image/webp", "application/pdf", "text/plain":
		return true
	}
	return false
}

func buildContents(msgs []events.Message, frMedia bool) ([]*genai.Content, error) {
	names := map[string]string{} // tool-use id → function name
	out := make([]*genai.Content, 0, len(msgs))
	for i, m := range msgs {
		role := genai.RoleUser
		if m.Role == events.RoleAssistant {
			role = genai.RoleModel
		}
		parts := make([]*genai.Part, 0, len(m.Content))
		for j, p := range m.Content {
			gp, err := buildPart(p, names, fmt.Sprintf("messages[%d].content[%d]", i, j), frMedia)
			if err != nil {
				return nil, err
			}
			parts = append(parts, gp...)
		}
		if len(parts) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Parts = append(out[n-1].Parts, parts...)
			continue
		}
		out = append(out, &genai.Content{Role: role, Parts: parts})
	}
	return out, nil
}

// wireID returns the id to send for a tool-use id: none for ids this
// adapter synthesized, since the API never issued them.
func wireID(id string) string {
	if strings.HasPrefix(id, SynthesizedIDPrefix) {
		return ""
	}
	return id
}

func buildPart(p events.Part, names map[string]string, field string, frMedia bool) ([]*genai.Part, error) {
	switch p.Type {
	case events.PartText:
		sig := decodeSignature(p.Signature)
		if p.Text == "" && sig == nil {
			return nil, nil
		}
		return []*genai.Part{{Text: p.Text, ThoughtSignature: sig}}, nil
	case events.PartImage, events.PartFile:
		gp, err := mediaPart(&p, field)
		if err != nil {
			return nil, err
		}
		return []*genai.Part{gp}, nil
	case events.PartThinking:
		if p.Redacted {
			return nil, nil // another provider's opaque reasoning
		}
		sig := decodeSignature(p.Signature)
		if p.Thinking == "" && sig == nil {
			return nil, nil
		}
		return []*genai.Part{{Text: p.Thinking, Thought: true, ThoughtSignature: sig}}, nil
	case events.PartToolUse:
		names[p.ID] = p.Name
		args := map[string]any{}
		if in := bytes.TrimSpace(p.Input); len(in) > 0 {
			if err := json.Unmarshal(in, &args); err != nil {
				return nil, invalid("%s: tool_use %q: input must be a JSON object: %v", field, p.ID, err)
			}
		}
		return []*genai.Part{{
			FunctionCall:     &genai.FunctionCall{ID: wireID(p.ID), Name: p.Name, Args: args},
			ThoughtSignature: decodeSignature(p.Signature),
		}}, nil
	case events.PartToolResult:
		return functionResponse(&p, names, field, frMedia)
	}
	return nil, nil
}

// functionResponse maps a tool result: a functionResponse with the text
// ({"output": text} or {"error": text}) and, for a result with media, the
// media in the functionResponse's parts where the model reads them there,
// else as parts of the same user turn right after it, introduced by a text
// part naming the call.
func functionResponse(p *events.Part, names map[string]string, field string, frMedia bool) ([]*genai.Part, error) {
	name, ok := names[p.ToolUseID]
	if !ok {
		return nil, invalid("%s: tool_result %q: no tool_use with that id earlier in the transcript (Gemini needs the function name)", field, p.ToolUseID)
	}
	key := "output"
	if p.IsError {
		key = "error"
	}
	text := p.Content
	if p.Parts != nil {
		text = events.PartsText(p.Parts)
	}
	fr := &genai.FunctionResponse{ID: wireID(p.ToolUseID), Name: name, Response: map[string]any{key: text}}
	out := []*genai.Part{{FunctionResponse: fr}}
	var after []*genai.Part
	for k, sub := range p.Parts {
		f := fmt.Sprintf("%s.content[%d]", field, k)
		switch sub.Type {
		case events.PartText:
		case events.PartImage, events.PartFile:
			gp, err := mediaPart(&sub, f)
			if err != nil {
				return nil, err
			}
			switch {
			case frMedia && gp.InlineData != nil && inFunctionResponse(gp.InlineData.MIMEType):
				fr.Parts = append(fr.Parts, &genai.FunctionResponsePart{InlineData: &genai.FunctionResponseBlob{MIMEType: gp.InlineData.MIMEType, Data: gp.InlineData.Data}})
			case frMedia && gp.FileData != nil && inFunctionResponse(gp.FileData.MIMEType):
				fr.Parts = append(fr.Parts, &genai.FunctionResponsePart{FileData: &genai.FunctionResponseFileData{MIMEType: gp.FileData.MIMEType, FileURI: gp.FileData.FileURI}})
			default:
				after = append(after, gp)
			}
		default:
			return nil, invalid("%s: a tool result holds text, image and file parts, not %q", f, sub.Type)
		}
	}
	if len(after) > 0 {
		out = append(out, &genai.Part{Text: fmt.Sprintf("Media returned by the %s call %s:", name, p.ToolUseID)})
		out = append(out, after...)
	}
	return out, nil
}

// mediaPart maps an image or file part: inlineData for data, fileData for
// a URL. A part whose bytes are only a media ref, which ingest resolves
// before the adapter sees the request, is invalid.
func mediaPart(p *events.Part, field string) (*genai.Part, error) {
	mt := strings.ToLower(strings.TrimSpace(p.MediaType))
	switch {
	case p.Data != "":
		b, err := p.Bytes()
		if err != nil {
			return nil, invalid("%s.data: %w", field, err)
		}
		return &genai.Part{InlineData: &genai.Blob{MIMEType: mt, Data: b}}, nil
	case p.URL != "":
		return &genai.Part{FileData: &genai.FileData{MIMEType: mt, FileURI: p.URL}}, nil
	case p.Ref != "":
		return nil, invalid("%s.ref: unresolved media ref %q (ingest resolves refs before the provider call)", field, p.Ref)
	}
	return nil, invalid("%s: a %s part needs data or url", field, p.Type)
}

// decodeSignature turns a signature string back into the bytes genai
// sends as base64. A signature that is not base64 came from another
// provider and is dropped.
func decodeSignature(s string) []byte {
	if s == "" {
		return nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b
		}
	}
	return nil
}
