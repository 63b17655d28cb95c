package gateway

import (
	"encoding/json"
	"strconv"

	"github.com/llmworker/llmworker/pkg/events"
)

// Part types of the AI SDK UI message stream protocol (version v1, the
// uiMessageChunkSchema of vercel/ai
// packages/ai/src/ui-message-stream/ui-message-chunks.ts) that the
// gateway writes. docs/protocol.md ("Gateway") maps worker events to them.
const (
	PartStart               = "start"
	PartFinish              = "finish"
	PartAbort               = "abort"
	PartError               = "error"
	PartStartStep           = "start-step"
	PartFinishStep          = "finish-step"
	PartTextStart           = "text-start"
	PartTextDelta           = "text-delta"
	PartTextEnd             = "text-end"
	PartReasoningStart      = "reasoning-start"
	PartReasoningDelta      = "reasoning-delta"
	PartReasoningEnd        = "reasoning-end"
	PartToolInputStart      = "tool-input-start"
	PartToolInputDelta      = "tool-input-delta"
	PartToolInputAvailable  = "tool-input-available"
	PartToolInputError      = "tool-input-error"
	PartToolApprovalRequest = "tool-approval-request"
	PartToolOutputAvailable = "tool-output-available"
	PartToolOutputError     = "tool-output-error"
	PartToolOutputDenied    = "tool-output-denied"
)

// The custom data parts (type "data-<name>") the gateway writes; their
// data is documented in docs/protocol.md ("Gateway", "Data parts").
const (
	DataTurn         = "data-llmw-turn"
	DataUsage        = "data-llmw-usage"
	DataToolStarted  = "data-llmw-tool-started"
	DataToolProgress = "data-llmw-tool-progress"
	DataHookDecision = "data-llmw-hook-decision"
	DataHookMessage  = "data-llmw-hook-message"
	DataPaused       = "data-llmw-paused"
	DataResumed      = "data-llmw-resumed"
	DataBlockAbort   = "data-llmw-block-abort"
	DataWarning      = "data-llmw-warning"
	DataQueued       = "data-llmw-queued"
	DataCompacted    = "data-llmw-compacted"
	DataOutput       = "data-llmw-output"
	// DataChild is a sub-agent call's child turn as its parent's
	// llmw.tool.child names it (id "child-<toolCallId>").
	DataChild = "data-llmw-child"
)

// HeaderStream is the response header that marks a UI message stream;
// StreamVersion its value.
const (
	HeaderStream  = "X-Vercel-Ai-Ui-Message-Stream"
	StreamVersion = "v1"
)

// Chunk is one part of a UI message stream. Which fields are written
// depends on Type: exactly the keys the protocol's schema has for that
// type (its objects are strict), empty optional ones left out.
type Chunk struct {
	Type string
	// ID of text-*, reasoning-* and (optional) data parts.
	ID string
	// Delta of text-delta and reasoning-delta; inputTextDelta of
	// tool-input-delta.
	Delta      string
	ToolCallID string
	ToolName   string
	// ProviderExecuted marks a tool the model's provider ran.
	ProviderExecuted bool
	// Input of tool-input-available and tool-input-error; Output of
	// tool-output-available (JSON).
	Input, Output json.RawMessage
	// ErrorText of error, tool-input-error and tool-output-error.
	ErrorText    string
	ApprovalID   string
	MessageID    string
	FinishReason string
	// Reason of abort.
	Reason string
	// Data of a data-* part (JSON).
	Data      json.RawMessage
	Transient bool
	// ProviderMetadata of text-start, reasoning-start and the tool-input
	// parts (a JSON object): on the parts of a sub-agent's child turn,
	// {"llmw": ChildOwner}.
	ProviderMetadata json.RawMessage
}

// AppendJSON appends the chunk's JSON object, without reflection: a
// stream writes one per token.
func (c *Chunk) AppendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = events.AppendJSONString(b, c.Type)
	str := func(k, v string) {
		b = append(b, ',', '"')
		b = append(b, k...)
		b = append(b, '"', ':')
		b = events.AppendJSONString(b, v)
	}
	opt := func(k, v string) {
		if v != "" {
			str(k, v)
		}
	}
	raw := func(k string, v json.RawMessage) {
		b = append(b, ',', '"')
		b = append(b, k...)
		b = append(b, '"', ':')
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		b = append(b, v...)
	}
	optRaw := func(k string, v json.RawMessage) {
		if len(v) > 0 {
			raw(k, v)
		}
	}
	flag := func(k string, v bool) {
		if v {
			b = append(b, ',', '"')
			b = append(b, k...)
			b = append(b, `":true`...)
		}
	}
	switch c.Type {
	case PartStart:
		opt("messageId", c.MessageID)
	case PartFinish:
		opt("finishReason", c.FinishReason)
	case PartAbort:
		opt("reason", c.Reason)
	case PartError:
		str("errorText", c.ErrorText)
	case PartTextStart, PartReasoningStart:
		str("id", c.ID)
		optRaw("providerMetadata", c.ProviderMetadata)
	case PartTextEnd, PartReasoningEnd:
		str("id", c.ID)
	case PartTextDelta, PartReasoningDelta:
		str("id", c.ID)
		str("delta", c.Delta)
	case PartToolInputStart:
		str("toolCallId", c.ToolCallID)
		str("toolName", c.ToolName)
		flag("providerExecuted", c.ProviderExecuted)
		optRaw("providerMetadata", c.ProviderMetadata)
	case PartToolInputDelta:
		str("toolCallId", c.ToolCallID)
		str("inputTextDelta", c.Delta)
	case PartToolInputAvailable:
		str("toolCallId", c.ToolCallID)
		str("toolName", c.ToolName)
		raw("input", c.Input)
		flag("providerExecuted", c.ProviderExecuted)
		optRaw("providerMetadata", c.ProviderMetadata)
	case PartToolInputError:
		str("toolCallId", c.ToolCallID)
		str("toolName", c.ToolName)
		raw("input", c.Input)
		str("errorText", c.ErrorText)
		optRaw("providerMetadata", c.ProviderMetadata)
	case PartToolApprovalRequest:
		str("approvalId", c.ApprovalID)
		str("toolCallId", c.ToolCallID)
	case PartToolOutputAvailable:
		str("toolCallId", c.ToolCallID)
		raw("output", c.Output)
		flag("providerExecuted", c.ProviderExecuted)
	case PartToolOutputError:
		str("toolCallId", c.ToolCallID)
		str("errorText", c.ErrorText)
	case PartToolOutputDenied:
		str("toolCallId", c.ToolCallID)
	case PartStartStep, PartFinishStep:
	default: // data-*
		opt("id", c.ID)
		raw("data", c.Data)
		flag("transient", c.Transient)
	}
	return append(b, '}')
}

// MarshalJSON writes the chunk's JSON object.
func (c Chunk) MarshalJSON() ([]byte, error) { return c.AppendJSON(nil), nil }

// AppendSSE appends the chunk as one server-sent event: "data: <json>\n\n".
func (c *Chunk) AppendSSE(b []byte) []byte {
	b = append(b, "data: "...)
	b = c.AppendJSON(b)
	return append(b, '\n', '\n')
}

// Done is the server-sent event that ends a UI message stream.
const Done = "data: [DONE]\n\n"

func itoa(i int) string { return strconv.Itoa(i) }
