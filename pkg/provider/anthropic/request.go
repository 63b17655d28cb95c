package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// RedactedSignaturePrefix marks the signature of a thinking block that the
// provider sent as redacted_thinking: the stop signature is this prefix
// followed by the opaque data. The event model has no "redacted" flag on
// block stops, so the mark travels in the signature; a thinking part whose
// signature carries it (or whose Redacted flag is set) is sent back as a
// redacted_thinking block. Anthropic signatures are base64, so the prefix
// cannot occur in a real one.
const RedactedSignaturePrefix = "redacted_thinking:"

// serverToolIDPrefix is the id prefix of Anthropic's server tool calls
// (server_tool_use blocks); tool_use parts with it are sent back as
// server_tool_use, not as client tool calls.
const serverToolIDPrefix = "srvtoolu_"

// RedactedData reports whether a thinking signature marks redacted thinking
// and returns the opaque data.
func RedactedData(signature string) (string, bool) {
	return strings.CutPrefix(signature, RedactedSignaturePrefix)
}

// buildParams maps a completion request to Messages API parameters.
func buildParams(req *llm.Request) (sdk.MessageNewParams, error) {
	var p sdk.MessageNewParams
	if req == nil {
		return p, fmt.Errorf("%w: nil request", ErrInvalidRequest)
	}
	_, model := events.SplitModel(req.Model)
	p.Model = sdk.Model(model)
	p.MaxTokens = int64(req.MaxTokens)
	if p.MaxTokens == 0 {
		p.MaxTokens = DefaultMaxTokens
		// budget_tokens must be below max_tokens; only a default we chose
		// ourselves is raised to make room, an explicit one is the caller's.
		if req.Thinking != nil && int64(req.Thinking.BudgetTokens) >= p.MaxTokens {
			p.MaxTokens = int64(req.Thinking.BudgetTokens) + DefaultMaxTokens
		}
	}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	if req.Temperature != nil {
		p.Temperature = sdk.Float(*req.Temperature)
	}
	if req.Thinking != nil && req.Thinking.BudgetTokens > 0 {
		p.Thinking = sdk.ThinkingConfigParamOfEnabled(int64(req.Thinking.BudgetTokens))
	}
	for i, t := range req.Tools {
		tp, err := toolParam(t)
		if err != nil {
			return p, fmt.Errorf("%w: tools[%d]: %w", ErrInvalidRequest, i, err)
		}
		p.Tools = append(p.Tools, tp)
	}
	msgs, err := messageParams(req.Messages)
	if err != nil {
		return p, err
	}
	p.Messages = msgs
	return p, nil
}

func toolParam(t events.ToolDefinition) (sdk.ToolUnionParam, error) {
	var schema sdk.ToolInputSchemaParam
	raw := bytes.TrimSpace(t.InputSchema)
	if len(raw) > 0 {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return sdk.ToolUnionParam{}, fmt.Errorf("input_schema: %w", err)
		}
		// properties and required have their own fields; every other key
		// ($defs, additionalProperties, ...) is kept verbatim.
		if v, ok := m["properties"]; ok {
			schema.Properties = v
			delete(m, "properties")
		}
		if v, ok := m["required"].([]any); ok {
			for _, r := range v {
				if s, ok := r.(string); ok {
					schema.Required = append(schema.Required, s)
				}
			}
			delete(m, "required")
		}
		delete(m, "type")
		if len(m) > 0 {
			schema.ExtraFields = m
		}
	}
	u := sdk.ToolUnionParamOfTool(schema, t.Name)
	if t.Description != "" {
		u.OfTool.Description = sdk.String(t.Description)
	}
	return u, nil
}

// messageParams maps the transcript. Tool messages become user messages
// (the API carries tool results in user turns), and consecutive messages of
// the same role are merged because the API expects alternating turns.
func messageParams(msgs []events.Message) ([]sdk.MessageParam, error) {
	out := make([]sdk.MessageParam, 0, len(msgs))
	for i, m := range msgs {
		role := sdk.MessageParamRoleUser
		if m.Role == events.RoleAssistant {
			role = sdk.MessageParamRoleAssistant
		}
		blocks := make([]sdk.ContentBlockParamUnion, 0, len(m.Content))
		for j, part := range m.Content {
			b, ok, err := blockParam(part, role)
			if err != nil {
				return nil, fmt.Errorf("%w: messages[%d].content[%d]: %w", ErrInvalidRequest, i, j, err)
			}
			if ok {
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
		out = append(out, sdk.MessageParam{Role: role, Content: blocks})
	}
	return out, nil
}

func blockParam(part events.Part, role sdk.MessageParamRole) (sdk.ContentBlockParamUnion, bool, error) {
	switch part.Type {
	case events.PartText:
		if part.Text == "" {
			// The API rejects empty text blocks.
			return sdk.ContentBlockParamUnion{}, false, nil
		}
		return sdk.NewTextBlock(part.Text), true, nil
	case events.PartThinking:
		if data, ok := RedactedData(part.Signature); ok {
			return sdk.NewRedactedThinkingBlock(data), true, nil
		}
		if part.Redacted {
			return sdk.NewRedactedThinkingBlock(part.Signature), true, nil
		}
		if role != sdk.MessageParamRoleAssistant {
			return sdk.ContentBlockParamUnion{}, false, nil
		}
		return sdk.NewThinkingBlock(part.Signature, part.Thinking), true, nil
	case events.PartToolUse:
		input := json.RawMessage(bytes.TrimSpace(part.Input))
		if len(input) == 0 {
			input = json.RawMessage("{}")
		} else if !json.Valid(input) {
			return sdk.ContentBlockParamUnion{}, false, fmt.Errorf("tool_use %q: input is not valid JSON", part.ID)
		}
		if strings.HasPrefix(part.ID, serverToolIDPrefix) {
			return sdk.NewServerToolUseBlock(part.ID, input, sdk.ServerToolUseBlockParamName(part.Name)), true, nil
		}
		return sdk.NewToolUseBlock(part.ID, input, part.Name), true, nil
	case events.PartToolResult:
		if role == sdk.MessageParamRoleAssistant || strings.HasPrefix(part.ToolUseID, serverToolIDPrefix) {
			// A server tool's result is part of the assistant turn; its
			// content is the raw result block this adapter streamed.
			var b sdk.ContentBlockParamUnion
			if err := json.Unmarshal([]byte(part.Content), &b); err != nil {
				return b, false, fmt.Errorf("server tool result %q: content is not a result block: %w", part.ToolUseID, err)
			}
			return b, true, nil
		}
		return sdk.NewToolResultBlock(part.ToolUseID, part.Content, part.IsError), true, nil
	}
	return sdk.ContentBlockParamUnion{}, false, nil
}
