package gemini

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/genai"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// buildRequest maps a completion request to generateContent arguments.
func buildRequest(req *llm.Request) (string, []*genai.Content, *genai.GenerateContentConfig, error) {
	if req == nil {
		return "", nil, nil, fmt.Errorf("%w: nil request", ErrInvalidRequest)
	}
	_, model := events.SplitModel(req.Model)
	cfg := &genai.GenerateContentConfig{
		// Continuation re-sends the request on its own (also after a clean
		// empty close); the adapter's retry and failure rules must stay the
		// only ones.
		AutomaticContinuation: genai.Ptr(false),
	}
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
	}
	if len(req.Tools) > 0 {
		decls := make([]*genai.FunctionDeclaration, 0, len(req.Tools))
		for i, t := range req.Tools {
			d := &genai.FunctionDeclaration{Name: t.Name, Description: t.Description}
			if raw := bytes.TrimSpace(t.InputSchema); len(raw) > 0 {
				var schema any
				if err := json.Unmarshal(raw, &schema); err != nil {
					return "", nil, nil, fmt.Errorf("%w: tools[%d].input_schema: %w", ErrInvalidRequest, i, err)
				}
				d.ParametersJsonSchema = schema
			}
			decls = append(decls, d)
		}
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
	}
	contents, err := buildContents(req.Messages)
	if err != nil {
		return "", nil, nil, err
	}
	return model, contents, cfg, nil
}

func buildContents(msgs []events.Message) ([]*genai.Content, error) {
	names := map[string]string{} // tool-use id → function name
	out := make([]*genai.Content, 0, len(msgs))
	for i, m := range msgs {
		role := genai.RoleUser
		if m.Role == events.RoleAssistant {
			role = genai.RoleModel
		}
		parts := make([]*genai.Part, 0, len(m.Content))
		for j, p := range m.Content {
			gp, err := buildPart(p, names)
			if err != nil {
				return nil, fmt.Errorf("%w: messages[%d].content[%d]: %w", ErrInvalidRequest, i, j, err)
			}
			if gp != nil {
				parts = append(parts, gp)
			}
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

func buildPart(p events.Part, names map[string]string) (*genai.Part, error) {
	switch p.Type {
	case events.PartText:
		sig := decodeSignature(p.Signature)
		if p.Text == "" && sig == nil {
			return nil, nil
		}
		return &genai.Part{Text: p.Text, ThoughtSignature: sig}, nil
	case events.PartThinking:
		if p.Redacted {
			return nil, nil // another provider's opaque reasoning
		}
		sig := decodeSignature(p.Signature)
		if p.Thinking == "" && sig == nil {
			return nil, nil
		}
		return &genai.Part{Text: p.Thinking, Thought: true, ThoughtSignature: sig}, nil
	case events.PartToolUse:
		names[p.ID] = p.Name
		args := map[string]any{}
		if in := bytes.TrimSpace(p.Input); len(in) > 0 {
			if err := json.Unmarshal(in, &args); err != nil {
				return nil, fmt.Errorf("tool_use %q: input must be a JSON object: %w", p.ID, err)
			}
		}
		return &genai.Part{
			FunctionCall:     &genai.FunctionCall{ID: wireID(p.ID), Name: p.Name, Args: args},
			ThoughtSignature: decodeSignature(p.Signature),
		}, nil
	case events.PartToolResult:
		name, ok := names[p.ToolUseID]
		if !ok {
			return nil, fmt.Errorf("tool_result %q: no tool_use with that id earlier in the transcript (Gemini needs the function name)", p.ToolUseID)
		}
		key := "output"
		if p.IsError {
			key = "error"
		}
		return &genai.Part{FunctionResponse: &genai.FunctionResponse{
			ID: wireID(p.ToolUseID), Name: name, Response: map[string]any{key: p.Content},
		}}, nil
	}
	return nil, nil
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
