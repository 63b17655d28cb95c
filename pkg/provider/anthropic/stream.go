package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// errIdle is the cancel cause set by the idle timer.
var errIdle = errors.New("anthropic: idle timeout")

// sdkStream is what the translator reads; *ssestream.Stream satisfies it.
type sdkStream interface {
	Next() bool
	Current() sdk.MessageStreamEventUnion
	Err() error
	Close() error
}

var _ sdkStream = (*ssestream.Stream[sdk.MessageStreamEventUnion])(nil)

// openBlock is a content block the provider started and has not stopped.
type openBlock struct {
	pidx   int64 // the provider's index
	idx    int   // our index, unique in the stream
	typ    events.BlockType
	sig    strings.Builder
	signed bool
	skip   bool // a block type we do not map (e.g. container_upload)
	// answer marks the call of the structured-output tool, streamed as
	// the text it carries; input holds a wrapped answer until the call
	// ends, and wrote says whether any text was sent.
	answer bool
	input  strings.Builder
	wrote  bool
}

// stream translates the Messages API event stream into docs/protocol.md §3 events.
// It is a pull iterator with no goroutine: each Next reads SDK events until
// at least one of ours is queued.
type stream struct {
	// model and responseID are message_start's, for the completed status.
	model, responseID string

	ctx    context.Context // the caller's: its cancel means "cancelled"
	rctx   context.Context // the request's: cancelled by the idle timer too
	cancel context.CancelCauseFunc
	src    sdkStream
	timer  *time.Timer
	idle   time.Duration

	// mu serializes reading src with closing it: llm.Normalize may call
	// Close from another goroutine while Next waits for the provider.
	mu       sync.Mutex
	released bool // src closed (guarded by mu)
	closed   atomic.Bool

	q   []events.Event
	qi  int
	cur events.Event

	started, done bool
	sawStop       bool // message_stop arrived
	next          int
	open          []*openBlock
	// held is the last stopped block, kept back so that its stop can carry
	// the message's stop reason, which Anthropic sends after the blocks.
	held     events.BlockStop
	haveHeld bool
	usage    events.UsageEvent

	// output is the structured-output tool of the request, whose call is
	// the answer, not a tool call; calls counts the other tool calls.
	output   outputTool
	calls    int
	warnings []events.Warning
}

var _ llm.Warner = (*stream)(nil)

// Warnings implements llm.Warner: the request's settings that were not
// sent.
func (s *stream) Warnings() []events.Warning { return s.warnings }

var _ llm.SelfBounded = (*stream)(nil)

// SelfBounded implements llm.SelfBounded: the caller's cancel and the idle
// timer both cancel the request, which ends a read in progress, and Close
// may be called concurrently with Next. llm.Normalize then reads the stream
// inline, without a goroutine and read-ahead buffer per call.
func (s *stream) SelfBounded() {}

func newStream(ctx, rctx context.Context, cancel context.CancelCauseFunc, src sdkStream, idle time.Duration) *stream {
	s := &stream{ctx: ctx, rctx: rctx, cancel: cancel, src: src, idle: idle, q: make([]events.Event, 0, 8)}
	if idle > 0 {
		s.timer = time.AfterFunc(idle, func() { cancel(errIdle) })
	}
	return s
}

func (s *stream) emit(e events.Event) { s.q = append(s.q, e) }

// Next implements llm.Stream.
func (s *stream) Next() bool {
	for {
		if s.closed.Load() {
			s.cur = nil
			return false
		}
		if s.qi < len(s.q) {
			s.cur = s.q[s.qi]
			s.q[s.qi] = nil
			s.qi++
			return true
		}
		s.q, s.qi = s.q[:0], 0
		if s.done {
			return false
		}
		if !s.started {
			s.started = true
			s.emit(events.StatusEvent{Status: events.StatusStarted})
			continue
		}
		s.pull()
	}
}

// pull reads the next SDK event and handles it, or handles the end of the
// source. The event is a union of every event type, about 5 KB: it is
// copied once, out of the SDK's Current, and read in place after that
// (returning it through one more call would copy it again, a tenth of the
// adapter's instructions on a stream of small deltas).
func (s *stream) pull() {
	s.mu.Lock()
	ok, err := s.advance()
	if !ok {
		s.mu.Unlock()
		s.end(err)
		return
	}
	ev := s.src.Current()
	s.mu.Unlock()
	if s.timer != nil {
		s.timer.Reset(s.idle)
	}
	s.handle(&ev)
}

// advance moves src to its next event, with mu held; ok is false at the
// end of the source.
func (s *stream) advance() (ok bool, err error) {
	// The SDK decodes into typed values and is not known to panic; a stream
	// must fail rather than crash its process if it ever does.
	defer func() {
		if p := recover(); p != nil {
			ok, err = false, fmt.Errorf("anthropic: malformed event: %v", p)
		}
	}()
	if s.released {
		return false, context.Canceled
	}
	if s.src.Next() {
		return true, nil
	}
	return false, s.src.Err()
}

// Current implements llm.Stream.
func (s *stream) Current() events.Event { return s.cur }

// Err implements llm.Stream: every failure is reported in the stream.
func (s *stream) Err() error { return nil }

// Close implements llm.Stream. It may be called from any goroutine, also
// while Next waits for the provider, and more than once.
func (s *stream) Close() error {
	s.closed.Store(true)
	// Cancel first: it ends a read in progress, which holds mu.
	s.cancel(context.Canceled)
	return s.release()
}

func (s *stream) release() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil
	}
	s.released = true
	if s.timer != nil {
		s.timer.Stop()
	}
	err := s.src.Close()
	s.cancel(context.Canceled)
	return err
}

func (s *stream) handle(ev *sdk.MessageStreamEventUnion) {
	if s.sawStop {
		return
	}
	switch ev.Type {
	case "message_start":
		s.model, s.responseID = string(ev.Message.Model), ev.Message.ID
		s.mergeStartUsage(&ev.Message.Usage)
	case "content_block_start":
		s.blockStart(ev)
	case "content_block_delta":
		s.blockDelta(ev)
	case "content_block_stop":
		b := s.take(ev.Index)
		if b == nil || b.skip {
			return
		}
		if b.answer {
			s.finishAnswer(b)
		}
		s.flushHeld("")
		s.held = events.BlockStop{Index: b.idx, BlockType: b.typ}
		if b.signed {
			s.held.Signature = b.sig.String()
		}
		s.haveHeld = true
	case "message_delta":
		reason := mapStopReason(ev.Delta.StopReason)
		if reason == events.StopToolUse && s.calls == 0 && s.output.name != "" {
			// The model called only the structured-output tool: it
			// answered.
			reason = events.StopEndTurn
		}
		s.mergeDeltaUsage(&ev.Usage)
		if s.haveHeld {
			s.flushHeld(reason)
		} else if reason != "" && reason != events.StopEndTurn && reason != events.StopToolUse {
			// No block to carry the reason (a refusal before any
			// content): an empty text block says it, so it is never lost.
			i := s.newIndex()
			s.emit(events.BlockStart{Index: i, BlockType: events.BlockText})
			s.emit(events.BlockStop{Index: i, BlockType: events.BlockText, StopReason: reason})
		}
		s.emit(s.usage)
		if reason == events.StopRefusal {
			msg := ev.Delta.StopDetails.Explanation
			if msg == "" {
				msg = "the model refused to answer"
			}
			s.emit(events.ErrorEvent{Code: "refusal", Message: msg})
		}
	case "message_stop":
		s.sawStop = true
		s.flushHeld("")
		s.abortOpen("block not stopped before message_stop")
		s.terminal(events.StatusCompleted)
	}
}

func (s *stream) newIndex() int {
	i := s.next
	s.next++
	return i
}

func (s *stream) find(pidx int64) *openBlock {
	for _, b := range s.open {
		if b.pidx == pidx {
			return b
		}
	}
	return nil
}

func (s *stream) take(pidx int64) *openBlock {
	for i, b := range s.open {
		if b.pidx == pidx {
			s.open = append(s.open[:i], s.open[i+1:]...)
			return b
		}
	}
	return nil
}

func (s *stream) start(pidx int64, st events.BlockStart) *openBlock {
	s.flushHeld("")
	st.Index = s.newIndex()
	b := &openBlock{pidx: pidx, idx: st.Index, typ: st.BlockType}
	s.open = append(s.open, b)
	s.emit(st)
	return b
}

func (s *stream) blockStart(ev *sdk.MessageStreamEventUnion) {
	if old := s.take(ev.Index); old != nil && !old.skip {
		s.emit(events.BlockAbort{Index: old.idx, BlockType: old.typ, Reason: "block restarted"})
	}
	cb := &ev.ContentBlock
	switch t := cb.Type; {
	case t == "text":
		b := s.start(ev.Index, events.BlockStart{BlockType: events.BlockText})
		if cb.Text != "" {
			s.emit(events.TextDelta(b.idx, cb.Text))
		}
	case t == "thinking":
		b := s.start(ev.Index, events.BlockStart{BlockType: events.BlockThinking})
		if cb.Thinking != "" {
			s.emit(events.ThinkingDelta(b.idx, cb.Thinking))
		}
		if cb.Signature != "" {
			b.sig.WriteString(cb.Signature)
			b.signed = true
		}
	case t == "redacted_thinking":
		b := s.start(ev.Index, events.BlockStart{BlockType: events.BlockThinking})
		b.sig.WriteString(RedactedSignaturePrefix)
		b.sig.WriteString(cb.Data)
		b.signed = true
	case t == "tool_use" && s.output.name != "" && cb.Name == s.output.name:
		b := s.start(ev.Index, events.BlockStart{BlockType: events.BlockText})
		b.answer = true
		if in := strings.TrimSpace(cb.JSON.Input.Raw()); in != "" && in != "{}" && in != "null" {
			s.answerDelta(b, in)
		}
	case t == "tool_use" || t == "server_tool_use":
		if cb.Name == "" {
			s.open = append(s.open, &openBlock{pidx: ev.Index, skip: true})
			return
		}
		if t == "tool_use" {
			s.calls++
		}
		id := cb.ID
		if id == "" {
			id = synthID()
		}
		b := s.start(ev.Index, events.BlockStart{BlockType: events.BlockToolUse, ID: id, Name: cb.Name, Server: t == "server_tool_use"})
		// Streamed calls start with "input":{} and send the input as
		// deltas; a call that arrives whole has it here.
		if in := strings.TrimSpace(cb.JSON.Input.Raw()); in != "" && in != "{}" && in != "null" {
			s.emit(events.InputJSONDelta(b.idx, in))
		}
	case strings.HasSuffix(t, "_tool_result"):
		// A server tool's result (web_search_tool_result, ...). The text is
		// the raw result block, so it can be sent back as it came.
		b := s.start(ev.Index, events.BlockStart{BlockType: events.BlockToolResult, ToolUseID: cb.ToolUseID})
		if raw := cb.RawJSON(); raw != "" {
			s.emit(events.TextDelta(b.idx, raw))
		}
	default:
		s.open = append(s.open, &openBlock{pidx: ev.Index, skip: true})
	}
}

func (s *stream) blockDelta(ev *sdk.MessageStreamEventUnion) {
	d := &ev.Delta
	b := s.find(ev.Index)
	if b == nil {
		// A delta without a start: text and thinking can be shown; input
		// JSON without a tool name cannot, and is dropped.
		switch d.Type {
		case "text_delta":
			b = s.start(ev.Index, events.BlockStart{BlockType: events.BlockText})
		case "thinking_delta":
			b = s.start(ev.Index, events.BlockStart{BlockType: events.BlockThinking})
		default:
			return
		}
	}
	if b.skip {
		return
	}
	switch d.Type {
	case "text_delta":
		if d.Text != "" && (b.typ == events.BlockText || b.typ == events.BlockToolResult) {
			s.emit(events.TextDelta(b.idx, d.Text))
		}
	case "thinking_delta":
		if d.Thinking != "" && b.typ == events.BlockThinking {
			s.emit(events.ThinkingDelta(b.idx, d.Thinking))
		}
	case "signature_delta":
		if b.typ == events.BlockThinking {
			b.sig.WriteString(d.Signature)
			b.signed = true
		}
	case "input_json_delta":
		if d.PartialJSON != "" && b.answer {
			s.answerDelta(b, d.PartialJSON)
		} else if d.PartialJSON != "" && b.typ == events.BlockToolUse {
			s.emit(events.InputJSONDelta(b.idx, d.PartialJSON))
		}
	}
}

// answerDelta passes on a piece of the structured-output tool's input as
// answer text; a wrapped answer is kept until the call ends.
func (s *stream) answerDelta(b *openBlock, in string) {
	if s.output.wrapped {
		b.input.WriteString(in)
		return
	}
	s.emit(events.TextDelta(b.idx, in))
	b.wrote = true
}

// finishAnswer sends what remains of the answer when its call ends: the
// value of a wrapped answer, "{}" for a call whose input was empty (the
// API's default input).
func (s *stream) finishAnswer(b *openBlock) {
	if s.output.wrapped {
		var in struct {
			Value json.RawMessage `json:"value"`
		}
		raw := b.input.String()
		if json.Unmarshal([]byte(raw), &in) == nil && len(in.Value) > 0 {
			raw = string(in.Value)
		}
		if raw != "" {
			s.emit(events.TextDelta(b.idx, raw))
		}
		return
	}
	if !b.wrote {
		s.emit(events.TextDelta(b.idx, "{}"))
	}
}

func (s *stream) flushHeld(reason events.StopReason) {
	if !s.haveHeld {
		return
	}
	s.held.StopReason = reason
	s.emit(s.held)
	s.haveHeld = false
}

func (s *stream) abortOpen(reason string) {
	for _, b := range s.open {
		if !b.skip {
			s.emit(events.BlockAbort{Index: b.idx, BlockType: b.typ, Reason: reason})
		}
	}
	s.open = s.open[:0]
}

func (s *stream) terminal(st events.StreamStatus) {
	ev := events.StatusEvent{Status: st}
	if st == events.StatusCompleted {
		ev.Model, ev.ResponseID = s.model, s.responseID
	}
	s.emit(ev)
	s.done = true
	_ = s.release()
}

func (s *stream) fail(code, msg string) {
	s.flushHeld("")
	s.abortOpen(code)
	s.emit(events.ErrorEvent{Code: code, Message: msg})
	s.terminal(events.StatusFailed)
}

// end handles the end of the SDK stream without message_stop.
func (s *stream) end(err error) {
	switch {
	case errors.Is(context.Cause(s.rctx), errIdle):
		s.fail("idle_timeout", "no event from the provider for "+s.idle.String())
	case s.ctx.Err() != nil:
		s.flushHeld("")
		s.abortOpen("cancelled")
		s.terminal(events.StatusCancelled)
	case err != nil:
		s.fail(apiErrorInfo(err))
	default:
		s.fail("incomplete_stream", "the stream ended before message_stop")
	}
}

func (s *stream) mergeStartUsage(u *sdk.Usage) {
	setIf(&s.usage.InputTokens, u.InputTokens, u.JSON.InputTokens.Valid())
	setIf(&s.usage.OutputTokens, u.OutputTokens, u.JSON.OutputTokens.Valid())
	setIf(&s.usage.CacheReadInputTokens, u.CacheReadInputTokens, u.JSON.CacheReadInputTokens.Valid())
	setIf(&s.usage.CacheCreationInputTokens, u.CacheCreationInputTokens, u.JSON.CacheCreationInputTokens.Valid())
	setIf(&s.usage.ReasoningTokens, u.OutputTokensDetails.ThinkingTokens, u.JSON.OutputTokensDetails.Valid() && u.OutputTokensDetails.JSON.ThinkingTokens.Valid())
}

// mergeDeltaUsage applies message_delta usage, which is cumulative: fields
// it carries replace those of message_start.
func (s *stream) mergeDeltaUsage(u *sdk.MessageDeltaUsage) {
	setIf(&s.usage.InputTokens, u.InputTokens, u.JSON.InputTokens.Valid())
	setIf(&s.usage.OutputTokens, u.OutputTokens, u.JSON.OutputTokens.Valid())
	setIf(&s.usage.CacheReadInputTokens, u.CacheReadInputTokens, u.JSON.CacheReadInputTokens.Valid())
	setIf(&s.usage.CacheCreationInputTokens, u.CacheCreationInputTokens, u.JSON.CacheCreationInputTokens.Valid())
	setIf(&s.usage.ReasoningTokens, u.OutputTokensDetails.ThinkingTokens, u.JSON.OutputTokensDetails.Valid() && u.OutputTokensDetails.JSON.ThinkingTokens.Valid())
}

func setIf(dst **int64, v int64, ok bool) {
	if ok {
		*dst = &v
	}
}

func mapStopReason(r sdk.StopReason) events.StopReason {
	switch r {
	case sdk.StopReasonEndTurn:
		return events.StopEndTurn
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return events.StopMaxTokens
	case sdk.StopReasonStopSequence:
		return events.StopSequence
	case sdk.StopReasonToolUse:
		return events.StopToolUse
	case sdk.StopReasonPauseTurn:
		return events.StopPauseTurn
	case sdk.StopReasonRefusal:
		return events.StopRefusal
	}
	return ""
}

// errorMessage returns error.message of an API error body.
func errorMessage(raw string) string {
	var env struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal([]byte(raw), &env) != nil {
		return ""
	}
	if env.Error.Message != "" {
		return env.Error.Message
	}
	return env.Message
}
