package telemetry

import (
	"encoding/json"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"

	"github.com/llmworker/llmworker/pkg/events"
)

// EnvCaptureContent is the opt-in to recording message content on spans,
// the variable the OpenTelemetry GenAI instrumentations read: "true"
// records it. Off by default, as the conventions ask: prompts, answers
// and tool arguments and results may hold personal or secret data, and
// whoever runs the trace backend sees them.
const EnvCaptureContent = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// Content attributes of the GenAI semantic conventions, recorded only
// when CaptureContent is on: JSON in the conventions' message format
// (InputMessages).
const (
	GenAISystemInstructions = attribute.Key("gen_ai.system_instructions")
	GenAIInputMessages      = attribute.Key("gen_ai.input.messages")
	GenAIOutputMessages     = attribute.Key("gen_ai.output.messages")
	GenAIToolCallArguments  = attribute.Key("gen_ai.tool.call.arguments")
	GenAIToolCallResult     = attribute.Key("gen_ai.tool.call.result")
)

var captureContent atomic.Bool

// SetCaptureContent turns the recording of message content on spans on
// or off for the process. Setup sets it from EnvCaptureContent; a library
// user who installs a tracer provider without Setup calls it.
func SetCaptureContent(on bool) { captureContent.Store(on) }

// CaptureContent reports whether spans record message content.
func CaptureContent() bool { return captureContent.Load() }

// captureFromEnv reads EnvCaptureContent.
func captureFromEnv(getenv func(string) string) bool {
	return strings.EqualFold(strings.TrimSpace(getenv(EnvCaptureContent)), "true")
}

// convMessage and convPart are a message in the GenAI conventions'
// format: {"role", "parts": [{"type": "text"|"reasoning"|"tool_call"|
// "tool_call_response", ...}], "finish_reason"}.
type convMessage struct {
	Role         string     `json:"role"`
	Parts        []convPart `json:"parts"`
	FinishReason string     `json:"finish_reason,omitempty"`
}

type convPart struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  *string         `json:"response,omitempty"`
}

func convParts(ps []events.Part) []convPart {
	out := make([]convPart, 0, len(ps))
	for _, p := range ps {
		switch p.Type {
		case events.PartText:
			out = append(out, convPart{Type: "text", Content: p.Text})
		case events.PartThinking:
			if p.Thinking != "" { // a redacted block has nothing to show
				out = append(out, convPart{Type: "reasoning", Content: p.Thinking})
			}
		case events.PartToolUse:
			args := p.Input
			if !json.Valid(args) {
				args = nil
			}
			out = append(out, convPart{Type: "tool_call", ID: p.ID, Name: p.Name, Arguments: args})
		case events.PartToolResult:
			resp := p.Content
			out = append(out, convPart{Type: "tool_call_response", ID: p.ToolUseID, Response: &resp})
		}
	}
	return out
}

// InputMessages returns msgs as the value of gen_ai.input.messages.
func InputMessages(msgs []events.Message) string {
	conv := make([]convMessage, len(msgs))
	for i, m := range msgs {
		conv[i] = convMessage{Role: string(m.Role), Parts: convParts(m.Content)}
	}
	return marshal(conv)
}

// OutputMessages returns the model's answer and its finish reason as the
// value of gen_ai.output.messages.
func OutputMessages(msg events.Message, finishReason string) string {
	return marshal([]convMessage{{Role: string(msg.Role), Parts: convParts(msg.Content), FinishReason: finishReason}})
}

// SystemInstructions returns a system prompt as the value of
// gen_ai.system_instructions.
func SystemInstructions(system string) string {
	return marshal([]convPart{{Type: "text", Content: system}})
}

func marshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil { // only plain strings and valid raw JSON go in
		return ""
	}
	return string(b)
}
