package worker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/llmworker/llmworker/pkg/events"
)

// CheckpointVersion is the version of the Checkpoint format written by this
// package. RunFrom refuses checkpoints of another version.
const CheckpointVersion = 1

// Phase is where a checkpointed turn stands.
type Phase string

const (
	// PhaseModel: the next thing to do is model call number Step+1
	// (on_message_send first).
	PhaseModel Phase = "model"
	// PhaseTools: the tool calls of step Step are being handled; Pending
	// says how far each one got.
	PhaseTools Phase = "tools"
	// PhasePaused: the turn waits for Resume; Pause says why.
	PhasePaused Phase = "paused"
)

// CallState is how far a pending tool call got.
type CallState string

const (
	// CallNew: before_tool_call has not been asked yet.
	CallNew CallState = "new"
	// CallAllowed: the call runs (or ran: see Output) with Call.Input.
	CallAllowed CallState = "allowed"
	// CallPaused: the call waits for a decision (Resume).
	CallPaused CallState = "paused"
	// CallDone: Result is what the model reads; nothing more happens to the
	// call.
	CallDone CallState = "done"
)

// Checkpoint is the durable state of a turn at a step boundary: everything
// RunFrom needs to go on in another process. It is JSON-serialisable; a
// worker hands a fresh copy to Config.Checkpoint each time, so the callee
// may keep it.
type Checkpoint struct {
	Version   int    `json:"version"`
	TurnID    string `json:"turn_id"`
	SessionID string `json:"session_id,omitempty"`
	Phase     Phase  `json:"phase"`
	// Step is the number of model calls made so far.
	Step int `json:"step"`
	// Model is the fallback model (Config.FallbackModels) in use since a
	// step fell back to it: the turn's later steps start on it. "" is
	// Config.Model.
	Model string `json:"model,omitempty"`
	// Messages is the transcript so far (input included), from position
	// Base on.
	Messages []events.Message `json:"messages"`
	// Base is the transcript position of Messages[0]: 0 when Messages
	// start at the beginning. A turn service that stores the transcript
	// hands a run only the originals from the active compaction's To on
	// (Config.Originals reads those before). Base is 0 when Compaction is
	// nil, and at most Compaction.To otherwise.
	Base int `json:"base,omitempty"`
	// Compaction is the active compaction (pkg/compact): the model reads
	// Compaction.Messages ++ the originals from Compaction.To on. It is
	// recorded here before the model call that uses it, so a turn
	// continued from this checkpoint reads the same projection and does
	// not compact again.
	Compaction *events.Compaction `json:"compaction,omitempty"`
	// Pending are the local tool calls of step Step, in the order the model
	// made them (PhaseTools, and PhasePaused at before_tool_call).
	Pending []PendingCall `json:"pending,omitempty"`
	// Eager are the calls of model call Step+1 whose before_tool_call hooks
	// decided, and which may have started, while its stream was still
	// under way (PhaseModel; see Config.NoEagerStart), in the order their
	// blocks stopped: a run that continues the checkpoint makes the model
	// call again and takes over each call its new response asks for again
	// (same id, tool and input) without asking the hooks again, and stops
	// the others (llmw.tool.cancelled).
	Eager []EagerCall `json:"eager,omitempty"`
	// Append are messages to add after the tool results of Pending (the
	// extra messages of a resume).
	Append []events.Message `json:"append,omitempty"`
	// Vars are the hook variables of the turn.
	Vars map[string]string `json:"vars,omitempty"`
	// TurnEndRetries counts the continue_with_messages answers so far.
	TurnEndRetries int `json:"turn_end_retries,omitempty"`
	// OutputRepairs counts the repair steps of the final answer so far
	// (Config.OutputRepairs).
	OutputRepairs int `json:"output_repairs,omitempty"`
	// Usage is the usage total so far.
	Usage events.UsageEvent `json:"usage"`
	// Tokens and Cost are what the turn's model calls counted against
	// Config.MaxTotalTokens (price.Tokens.Total) and cost so far (nil
	// while no call was priced); LastInput and LastInputCost are the
	// input tokens, cached or not, of the last call that reported usage
	// and their cost: the estimate of the next call's input (budget.go).
	Tokens        int64    `json:"tokens,omitempty"`
	Cost          *float64 `json:"cost,omitempty"`
	LastInput     int64    `json:"last_input,omitempty"`
	LastInputCost float64  `json:"last_input_cost,omitempty"`
	// StopReason is the stop reason of the last model response.
	StopReason events.StopReason `json:"stop_reason"`
	// Pause says why the turn is paused (PhasePaused).
	Pause *Pause `json:"pause,omitempty"`
	// Restarts counts how often the turn was continued by RunFrom or
	// Resume; it keeps the request ids of repeated model calls unique.
	Restarts int `json:"restarts,omitempty"`
	// TraceParent and TraceState are the W3C trace context the turn's
	// spans continue in (pkg/telemetry): a run continued from this
	// checkpoint, anywhere, parents its invoke_agent span here.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// Pause says where and why a turn paused.
type Pause struct {
	// Event is before_tool_call or on_turn_end.
	Event  events.HookEvent `json:"event"`
	Hook   string           `json:"hook,omitempty"`
	Reason string           `json:"reason,omitempty"`
}

// PendingCall is one tool call of the current step and how far it got.
type PendingCall struct {
	// Call is the call as the model made it, or as before_tool_call hooks
	// or an edit decision rewrote it. Call.ID never changes.
	Call  events.ToolCall `json:"call"`
	State CallState       `json:"state"`
	// Hook and Reason name the hook that paused or skipped the call.
	Hook   string `json:"hook,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Output is the tool's own result once it ran (before after_tool_call):
	// a turn continued from the checkpoint does not run the call again. A
	// turn service may also fill it from a durable result store before
	// RunFrom.
	Output *ToolOutput `json:"output,omitempty"`
	// Result is the final result (CallDone).
	Result *events.ToolResult `json:"result,omitempty"`
}

// EagerCall is a call started while the model still streamed
// (Checkpoint.Eager): the pending call as its hooks left it (allowed:
// started; paused or done: not started) and the input the model streamed.
type EagerCall struct {
	PendingCall
	// Asked is the input as the model streamed it (Call.Input may be a
	// hook's rewrite): a response made again takes the call over when it
	// asks for the same id and tool with the same input.
	Asked json.RawMessage `json:"asked"`
	// Announced: llmw.tool.started went out for the call (before a later
	// checkpoint was written), so a run that takes the call over does not
	// send it again.
	Announced bool `json:"announced,omitempty"`
}

// ToolOutput is what a tool execution returned: text (Content), or parts
// with images and files (Parts; Content then holds the text of their text
// parts).
type ToolOutput struct {
	Content    string        `json:"content"`
	Parts      []events.Part `json:"parts,omitempty"`
	IsError    bool          `json:"is_error"`
	DurationMS int64         `json:"duration_ms"`
}

// Awaiting returns the calls that wait for a decision (CallPaused), in call
// order: what a person approves, denies or edits.
func (c *Checkpoint) Awaiting() []events.ToolCall {
	if c == nil {
		return nil
	}
	var out []events.ToolCall
	for _, p := range c.Pending {
		if p.State == CallPaused {
			out = append(out, p.Call)
		}
	}
	return out
}

// Clone returns a deep copy (message parts and raw JSON included).
func (c *Checkpoint) Clone() *Checkpoint {
	if c == nil {
		return nil
	}
	d := *c
	d.Messages = cloneMessages(c.Messages)
	d.Append = cloneMessages(c.Append)
	d.Compaction = cloneCompaction(c.Compaction)
	if c.Vars != nil {
		d.Vars = maps.Clone(c.Vars)
	}
	d.Usage = cloneUsage(c.Usage)
	d.Cost = clonePtr(c.Cost)
	if c.Pause != nil {
		p := *c.Pause
		d.Pause = &p
	}
	if c.Pending != nil {
		d.Pending = make([]PendingCall, len(c.Pending))
		for i, p := range c.Pending {
			d.Pending[i] = p.clone()
		}
	}
	if c.Eager != nil {
		d.Eager = make([]EagerCall, len(c.Eager))
		for i, e := range c.Eager {
			d.Eager[i] = EagerCall{PendingCall: e.PendingCall.clone(), Asked: bytes.Clone(e.Asked), Announced: e.Announced}
		}
	}
	return &d
}

// clone returns a deep copy of p.
func (p PendingCall) clone() PendingCall {
	p.Call.Input = bytes.Clone(p.Call.Input)
	if p.Output != nil {
		o := *p.Output
		o.Parts = slices.Clone(o.Parts)
		p.Output = &o
	}
	if p.Result != nil {
		r := *p.Result
		r.Parts = slices.Clone(r.Parts)
		p.Result = &r
	}
	return p
}

// Validate checks that the checkpoint can be continued. Errors match
// ErrInvalidCheckpoint.
func (c *Checkpoint) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidCheckpoint, fmt.Sprintf(format, args...))
	}
	if c == nil {
		return bad("nil checkpoint")
	}
	if c.Version != CheckpointVersion {
		return bad("version %d, want %d", c.Version, CheckpointVersion)
	}
	if c.TurnID == "" {
		return bad("turn_id is required")
	}
	if c.Step < 0 || c.TurnEndRetries < 0 || c.OutputRepairs < 0 {
		return bad("negative step, turn_end_retries or output_repairs")
	}
	if c.Tokens < 0 || c.LastInput < 0 || c.LastInputCost < 0 || c.Cost != nil && *c.Cost < 0 {
		return bad("negative tokens, cost, last_input or last_input_cost")
	}
	if err := events.ValidateMessages("messages", c.Messages); err != nil {
		return bad("%v", err)
	}
	if err := events.ValidateMessages("append", c.Append); err != nil {
		return bad("%v", err)
	}
	switch k := c.Compaction; {
	case c.Base < 0:
		return bad("negative base")
	case k == nil && c.Base > 0:
		return bad("base %d without a compaction", c.Base)
	case k == nil:
	case k.To < c.Base || k.To > c.Base+len(c.Messages):
		return bad("compaction.to %d outside the messages held, positions [%d, %d]", k.To, c.Base, c.Base+len(c.Messages))
	default:
		if err := events.ValidateMessages("compaction.messages", k.Messages); err != nil {
			return bad("%v", err)
		}
	}
	seen := map[string]bool{}
	paused := 0
	for i, p := range c.Pending {
		if p.Call.ID == "" || p.Call.Name == "" {
			return bad("pending[%d]: call id and name are required", i)
		}
		if seen[p.Call.ID] {
			return bad("pending[%d]: duplicate call id %q", i, p.Call.ID)
		}
		seen[p.Call.ID] = true
		if len(p.Call.Input) > 0 && !json.Valid(p.Call.Input) {
			return bad("pending[%d]: input is not valid JSON", i)
		}
		switch p.State {
		case CallNew, CallAllowed:
		case CallPaused:
			paused++
		case CallDone:
			if p.Result == nil {
				return bad("pending[%d]: a done call needs a result", i)
			}
		default:
			return bad("pending[%d]: unknown state %q", i, p.State)
		}
	}
	eager := map[string]bool{}
	for i, e := range c.Eager {
		if e.Call.ID == "" || e.Call.Name == "" {
			return bad("eager[%d]: call id and name are required", i)
		}
		if eager[e.Call.ID] {
			return bad("eager[%d]: duplicate call id %q", i, e.Call.ID)
		}
		eager[e.Call.ID] = true
		if len(e.Call.Input) > 0 && !json.Valid(e.Call.Input) || len(e.Asked) > 0 && !json.Valid(e.Asked) {
			return bad("eager[%d]: input is not valid JSON", i)
		}
		switch e.State {
		case CallAllowed, CallPaused:
		case CallDone:
			if e.Result == nil {
				return bad("eager[%d]: a done call needs a result", i)
			}
		default:
			return bad("eager[%d]: state %q (allowed, paused or done)", i, e.State)
		}
	}
	if len(c.Eager) > 0 && c.Phase != PhaseModel {
		return bad("eager calls in phase %q (only phase model has them)", c.Phase)
	}
	switch c.Phase {
	case PhaseModel:
		if len(c.Pending) > 0 || c.Pause != nil {
			return bad("phase model with pending calls or a pause")
		}
	case PhaseTools:
		if c.Pause != nil || paused > 0 {
			return bad("phase tools with paused calls")
		}
	case PhasePaused:
		if c.Pause == nil {
			return bad("phase paused needs a pause")
		}
		switch c.Pause.Event {
		case events.HookBeforeToolCall:
			if len(c.Pending) == 0 {
				return bad("paused at before_tool_call without pending calls")
			}
		case events.HookOnTurnEnd:
			if len(c.Pending) > 0 {
				return bad("paused at on_turn_end with pending calls")
			}
		default:
			return bad("pause event %q", c.Pause.Event)
		}
	default:
		return bad("unknown phase %q", c.Phase)
	}
	return nil
}

func cloneMessages(msgs []events.Message) []events.Message {
	if msgs == nil {
		return nil
	}
	out := make([]events.Message, len(msgs))
	for i, m := range msgs {
		c := slices.Clone(m.Content)
		for j := range c {
			if c[j].Parts != nil { // a tool result's content parts
				c[j].Parts = slices.Clone(c[j].Parts)
			}
		}
		out[i] = events.Message{Role: m.Role, Content: c, Pinned: m.Pinned}
	}
	return out
}

func cloneCompaction(c *events.Compaction) *events.Compaction {
	if c == nil {
		return nil
	}
	d := *c
	d.Messages = cloneMessages(c.Messages)
	d.Fallback = cloneCompaction(c.Fallback)
	if c.Usage != nil {
		u := cloneUsage(*c.Usage)
		d.Usage = &u
	}
	return &d
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneUsage(u events.UsageEvent) events.UsageEvent {
	cp := clonePtr[int64]
	return events.UsageEvent{
		InputTokens:              cp(u.InputTokens),
		OutputTokens:             cp(u.OutputTokens),
		TotalTokens:              cp(u.TotalTokens),
		CacheReadInputTokens:     cp(u.CacheReadInputTokens),
		CacheCreationInputTokens: cp(u.CacheCreationInputTokens),
		ReasoningTokens:          cp(u.ReasoningTokens),
	}
}
