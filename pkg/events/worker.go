package events

import "encoding/json"

// CloudEvent types of the worker events for UIs (docs/protocol.md §5).
const (
	TypeTurnSubmit    = "llmw.turn.submit"
	TypeTurnResume    = "llmw.turn.resume"
	TypeTurnCancel    = "llmw.turn.cancel"
	TypeTurnStarted   = "llmw.turn.started"
	TypeTurnStep      = "llmw.turn.step"
	TypeTurnPaused    = "llmw.turn.paused"
	TypeTurnResumed   = "llmw.turn.resumed"
	TypeTurnCompleted = "llmw.turn.completed"
	TypeTurnFailed    = "llmw.turn.failed"
	TypeTurnAborted   = "llmw.turn.aborted"
	TypeTurnWarning   = "llmw.turn.warning"
	TypeTurnQueued    = "llmw.turn.queued"
	TypeTurnCompacted = "llmw.turn.compacted"

	TypeBlockStart       = "llmw.block.start"
	TypeBlockDelta       = "llmw.block.delta"
	TypeBlockStop        = "llmw.block.stop"
	TypeBlockAbort       = "llmw.block.abort"
	TypeTextComplete     = "llmw.text.complete"
	TypeToolCallComplete = "llmw.toolcall.complete"
	TypeToolCall         = "llmw.tool.call"
	TypeToolStarted      = "llmw.tool.started"
	TypeToolProgress     = "llmw.tool.progress"
	TypeToolResult       = "llmw.tool.result"
	TypeToolSkipped      = "llmw.tool.skipped"
	TypeToolCancelled    = "llmw.tool.cancelled"
	TypeHookDecision     = "llmw.hook.decision"
	TypeHookMessage      = "llmw.hook.message"
	TypeUsage            = "llmw.usage"
)

// Channel is the last token of a worker event subject.
type Channel string

const (
	ChannelTurn     Channel = "turn"
	ChannelText     Channel = "text"
	ChannelThinking Channel = "thinking"
	ChannelTool     Channel = "tool"
	ChannelHook     Channel = "hook"
	ChannelUsage    Channel = "usage"
)

// BlockChannel is the channel of the block events of a block type
// (tool_result blocks travel with text, as the Timeline routes them).
func BlockChannel(t BlockType) Channel {
	switch t {
	case BlockThinking:
		return ChannelThinking
	case BlockToolUse:
		return ChannelTool
	}
	return ChannelText
}

// TurnStarted is the data of llmw.turn.started.
type TurnStarted struct {
	TurnID    string `json:"turn_id"`
	SessionID string `json:"session_id,omitempty"`
	Model     string `json:"model,omitempty"`
	// Resumed is true when a replica picked the turn up from a checkpoint
	// after the turn's events began (docs/protocol.md §8).
	Resumed bool `json:"resumed,omitempty"`
	// Input is what the turn request's messages added to the
	// conversation (for a turn of a session, the messages after the
	// session's transcript), so that a UI shows the question with the
	// answer from the turn's events alone. The turn service sets it on
	// a turn's first start; it is left out when it would make the event
	// larger than the NATS max payload.
	Input []Message `json:"input,omitempty"`
	// ParentTurnID, ParentCallID, RootTurnID and Depth are set on a
	// sub-agent's child turn: the turn and call that started it, the
	// turn at the top of its tree, and its depth (1 for a child of a
	// root turn). A root turn leaves them out.
	ParentTurnID string `json:"parent_turn_id,omitempty"`
	ParentCallID string `json:"parent_call_id,omitempty"`
	RootTurnID   string `json:"root_turn_id,omitempty"`
	Depth        int    `json:"depth,omitempty"`
}

// TurnStep is the data of llmw.turn.step: one LLM request.
type TurnStep struct {
	Step int `json:"step"`
	// Attempt counts the model calls of the same step from 1 (retries and
	// fallbacks).
	Attempt int `json:"attempt,omitempty"`
	// Model is the model this call asks (provider:model): the turn's model
	// or, after a fallback, the fallback model in use.
	Model string `json:"model,omitempty"`
}

// TurnPaused is the data of llmw.turn.paused.
type TurnPaused struct {
	Reason  string     `json:"reason"`
	Hook    string     `json:"hook,omitempty"`
	Pending []ToolCall `json:"pending"`
}

// TurnResumed is the data of llmw.turn.resumed.
type TurnResumed struct {
	Decisions map[string]Decision `json:"decisions,omitempty"`
}

// TurnCompleted is the data of llmw.turn.completed. It carries what the
// turn added to its transcript, not the whole transcript, so that it does
// not grow with the session: the whole transcript is the session's
// (turn.LoadSession), or the concatenation of the Messages of the
// session's turns in order.
type TurnCompleted struct {
	// Messages are the turn's own messages: its input and what it
	// produced (the answers, tool calls and tool results of its steps),
	// in transcript order. A turn without a session has no others, so
	// they are its whole transcript.
	Messages []Message `json:"messages"`
	// TranscriptLength is the transcript's length after the turn: the
	// session's messages before it plus Messages. Messages begin at
	// position TranscriptLength - len(Messages) (From). An event without
	// it (a turn service that predates it, or a worker run in process)
	// carries the whole transcript in Messages.
	TranscriptLength int `json:"transcript_length,omitempty"`
	// MessagesTruncated says that the turn's own messages did not fit one
	// NATS message: Messages holds only the last of them (the answer),
	// or none when that alone does not fit; the others are in the
	// transcript (docs/protocol.md §8 "Transcripts").
	MessagesTruncated bool `json:"messages_truncated,omitempty"`
	// SessionID is the turn's session ("" for none), as in the event's
	// ce-sessionid.
	SessionID  string     `json:"session_id,omitempty"`
	StopReason StopReason `json:"stop_reason"`
	Usage      UsageEvent `json:"usage"`
	// Output is the final answer parsed as JSON, for a turn with a
	// response_format; it fits the format's schema.
	Output json.RawMessage `json:"output,omitempty"`
	// Cost is what the turn's model calls cost, in the price table's
	// currency, when the turn service has a price of the model.
	// Usage and Cost of a turn that called sub-agents include what its
	// child turns used (theirs included theirs).
	Cost *float64 `json:"cost,omitempty"`
	// Children is the share of each sub-agent call of the turn in Usage
	// and Cost.
	Children []ChildUsage `json:"children,omitempty"`
}

// From is the transcript position of Messages[0]: 0 when the event
// carries the whole transcript.
func (c TurnCompleted) From() int {
	if c.TranscriptLength <= len(c.Messages) {
		return 0
	}
	return c.TranscriptLength - len(c.Messages)
}

// TurnWarning is the data of llmw.turn.warning: settings of the model
// call that answered the step (Model) that its provider does not have, so
// they were not sent.
type TurnWarning struct {
	Step     int       `json:"step"`
	Model    string    `json:"model,omitempty"`
	Warnings []Warning `json:"warnings"`
}

// TurnQueued is the data of llmw.turn.queued: a step's model call waits
// for provider limits that ingest replicas share (docs/protocol.md §3,
// "Queued"). It comes after the step's llmw.turn.step and before the
// call's first block; the call starts when a limit lets it through.
type TurnQueued struct {
	Step int `json:"step"`
	// Attempt counts retries of the same step from 1.
	Attempt int    `json:"attempt,omitempty"`
	Model   string `json:"model,omitempty"`
	// Position is the call's place in the queue of the ingest replica
	// that holds it (1 = next) when it began to wait; 0 when unknown.
	Position int `json:"position,omitempty"`
}

// TurnEnded is the data of llmw.turn.failed and llmw.turn.aborted: a reason
// a person can act on.
type TurnEnded struct {
	Reason string `json:"reason"`
	// Code is a short machine-readable code, one of TurnEndCodes.
	Code string `json:"code,omitempty" jsonschema:"enum=cancelled,enum=hook_abort,enum=hook_cancel,enum=hook_failed,enum=max_steps,enum=max_turn_end_retries,enum=budget_exceeded,enum=checkpoint,enum=invalid_output,enum=invalid_request,enum=unknown_tool,enum=unknown_agent,enum=too_large,enum=internal,enum=no_a2a_client,enum=provider_error,enum=missing_api_key,enum=provider_auth,enum=unknown_provider,enum=unknown_model,enum=duplicate_request,enum=payload_too_large,enum=provider_setup,enum=shutting_down,enum=rate_limited,enum=provider_unavailable,enum=unsupported_content,enum=refusal,enum=content_filter,enum=prompt_blocked,enum=context_overflow"`
}

// TurnEndCodes are the codes of llmw.turn.failed and llmw.turn.aborted
// (TurnEnded.Code), the enum of its schema; docs/protocol.md §10 says when
// each is used. A code a turn can end with is added here and there.
var TurnEndCodes = []string{
	// the turn loop (worker.Code*)
	"cancelled", "hook_abort", "hook_cancel", "hook_failed", "max_steps", "max_turn_end_retries", "budget_exceeded", "checkpoint", "invalid_output",
	// the turn service (turn.Code*)
	"invalid_request", "unknown_tool", "unknown_agent", "too_large", "internal", "no_a2a_client",
	// a model call that failed: provider_error, or the kind its error
	// names (llm.ErrorKind, ingest.Kind)
	"provider_error", "missing_api_key", "provider_auth", "unknown_provider", "unknown_model", "duplicate_request", "payload_too_large", "provider_setup", "shutting_down", "rate_limited", "provider_unavailable", "unsupported_content",
	// a model that declined (worker.StreamFailureCodes)
	"refusal", "content_filter", "prompt_blocked",
	// a context that does not fit the model's window: the provider refused
	// it, after a compaction too, or no compaction could make it fit
	// (worker.CodeContextOverflow)
	"context_overflow",
}

// WorkerBlockStart, WorkerBlockDelta, WorkerBlockStop and WorkerBlockAbort
// are the §3 block data plus the step.
type WorkerBlockStart struct {
	BlockStart
	Step int `json:"step"`
}

type WorkerBlockStop struct {
	BlockStop
	Step int `json:"step"`
}

type WorkerBlockAbort struct {
	BlockAbort
	Step int `json:"step"`
}

// WorkerBlockDelta is llmw.block.delta: {"index", "text"|"thinking"|"input_json", "step"}.
type WorkerBlockDelta struct {
	BlockDelta
	Step int
}

// AppendJSON appends the wire form without reflection.
func (d WorkerBlockDelta) AppendJSON(b []byte) []byte {
	b = d.BlockDelta.AppendJSON(b)
	b = b[:len(b)-1]
	b = append(b, `,"step":`...)
	b = appendInt(b, d.Step)
	return append(b, '}')
}

// MarshalJSON writes the wire form.
func (d WorkerBlockDelta) MarshalJSON() ([]byte, error) { return d.AppendJSON(nil), nil }

// UnmarshalJSON reads the wire form.
func (d *WorkerBlockDelta) UnmarshalJSON(b []byte) error {
	var w wireDelta
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	d.Step = w.Step
	return d.BlockDelta.fromWire(&w)
}

// TextComplete is the data of llmw.text.complete.
type TextComplete struct {
	Step  int    `json:"step"`
	Index int    `json:"index"`
	Text  string `json:"text"`
}

// ToolCallComplete is the data of llmw.toolcall.complete. Error is set when
// the streamed input was not valid JSON (the call is then answered with an
// error result and never run).
type ToolCallComplete struct {
	Step  int             `json:"step"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	Error string          `json:"error,omitempty"`
}

// ToolStarted is the data of llmw.tool.started.
type ToolStarted struct {
	CallID string          `json:"call_id"`
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input,omitempty"`
}

// ToolProgress is the data of llmw.tool.progress: a running tool's
// progress report (an MCP server's notifications/progress, a Go tool's
// tool.ReportProgress), at most five a second per call, each before the
// call's llmw.tool.result.
type ToolProgress struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	// Progress grows with every report of the call.
	Progress float64 `json:"progress"`
	// Total is what Progress reaches at the end, when the tool knows it.
	Total   float64 `json:"total,omitempty"`
	Message string  `json:"message,omitempty"`
}

// ToolSkipped is the data of llmw.tool.skipped.
type ToolSkipped struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	Hook   string `json:"hook,omitempty"`
	Reason string `json:"reason"`
}

// ToolCancelled is the data of llmw.tool.cancelled: a call that started
// (or whose before_tool_call hooks decided) while the model still
// streamed step Step's response, and that the response it came from no
// longer asks for: the stream failed, the model call was made again
// without asking for the call, or the turn ended before the response was
// complete. The call is stopped and its result goes into no transcript.
type ToolCancelled struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	Step   int    `json:"step"`
	Reason string `json:"reason"`
}

// HookDecision is the data of llmw.hook.decision.
type HookDecision struct {
	Hook   string         `json:"hook"`
	Event  HookEvent      `json:"event"`
	Result HookResultKind `json:"result"`
	Reason string         `json:"reason,omitempty"`
	MS     float64        `json:"ms"`
	// CallID names the tool call for before/after_tool_call.
	CallID string `json:"call_id,omitempty"`
	// Failed is true when the decision comes from the hook's failure policy
	// (timeout, no responder, invalid reply, error).
	Failed bool `json:"failed,omitempty"`
}

// HookMessage is the data of llmw.hook.message: messages a hook emits for
// the UI (they are not added to the transcript).
type HookMessage struct {
	Hook     string    `json:"hook"`
	Event    HookEvent `json:"event"`
	Messages []Message `json:"messages"`
}

// UsageReport is the data of llmw.usage.
type UsageReport struct {
	Step int `json:"step"`
	// Model is the model that answered the step (provider:model).
	Model string     `json:"model,omitempty"`
	Usage UsageEvent `json:"usage"`
	Total UsageEvent `json:"total"`
	// Cost and TotalCost are what the step's model call (its attempts)
	// and the turn's model calls so far cost, in the price table's
	// currency, when the turn service has a price of the model.
	Cost      *float64 `json:"cost,omitempty"`
	TotalCost *float64 `json:"total_cost,omitempty"`
	// Children is, for a turn that called sub-agents, each call's child
	// turn's usage so far; Total and TotalCost include them.
	Children []ChildUsage `json:"children,omitempty"`
	// Compaction is the id of the compaction (llmw.turn.compacted) whose
	// summarizer calls Usage counts, "" for the step's model call: a
	// summary's usage is reported once per compaction, as the compaction
	// is.
	Compaction string `json:"compaction,omitempty"`
}

func appendInt(b []byte, i int) []byte {
	if i >= 0 && i < 10 {
		return append(b, byte('0'+i))
	}
	return append(b, itoa(i)...)
}

// Add returns the field-wise sum of u and v; a field is unknown (nil) only
// when unknown in both.
func (u UsageEvent) Add(v UsageEvent) UsageEvent {
	add := func(a, b *int64) *int64 {
		if a == nil && b == nil {
			return nil
		}
		var s int64
		if a != nil {
			s += *a
		}
		if b != nil {
			s += *b
		}
		return &s
	}
	return UsageEvent{
		InputTokens:              add(u.InputTokens, v.InputTokens),
		OutputTokens:             add(u.OutputTokens, v.OutputTokens),
		TotalTokens:              add(u.TotalTokens, v.TotalTokens),
		CacheReadInputTokens:     add(u.CacheReadInputTokens, v.CacheReadInputTokens),
		CacheCreationInputTokens: add(u.CacheCreationInputTokens, v.CacheCreationInputTokens),
		ReasoningTokens:          add(u.ReasoningTokens, v.ReasoningTokens),
	}
}

// Merge returns u with every field that v knows replaced by v's value:
// providers report usage cumulatively within one response.
func (u UsageEvent) Merge(v UsageEvent) UsageEvent {
	pick := func(a, b *int64) *int64 {
		if b != nil {
			return b
		}
		return a
	}
	return UsageEvent{
		InputTokens:              pick(u.InputTokens, v.InputTokens),
		OutputTokens:             pick(u.OutputTokens, v.OutputTokens),
		TotalTokens:              pick(u.TotalTokens, v.TotalTokens),
		CacheReadInputTokens:     pick(u.CacheReadInputTokens, v.CacheReadInputTokens),
		CacheCreationInputTokens: pick(u.CacheCreationInputTokens, v.CacheCreationInputTokens),
		ReasoningTokens:          pick(u.ReasoningTokens, v.ReasoningTokens),
	}
}

// Int64 returns a pointer to v, for building UsageEvents.
func Int64(v int64) *int64 { return &v }
