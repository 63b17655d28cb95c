package llmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// Script is what a Scripted provider plays for one call: a list of events
// and optional failure, blocking and delay behaviour. Events are played as
// given (not normalized), so scripts can also feed malformed streams to
// llm.Normalize.
type Script struct {
	// Events are yielded in order.
	Events []events.Event
	// Err, when set, fails the call before the first event: Stream returns
	// it and no stream.
	Err error
	// StreamErr, when set, fails the stream after Events: Next returns false
	// and Err returns StreamErr.
	StreamErr error
	// WaitForCancel makes the stream block after Events until ctx is
	// cancelled (Err is then ctx.Err()) or the stream is closed (Err is
	// llm.ErrStreamClosed): a model that hangs mid-answer.
	WaitForCancel bool
	// Delay is waited before each event (cancelled by ctx or Close).
	Delay time.Duration
	// At, when set, gives the time after the Stream call at which each
	// event is yielded (At[i] for Events[i]; events past its end follow at
	// once): a stream with the timing of a live model, where a block ends
	// at a known moment (TimedStep builds one). A late reader is not made
	// to wait again: an event whose time has passed is yielded at once.
	// Delay is not waited where At applies.
	At []time.Duration
	// OnCall, when set, runs at the call, before anything is played; an
	// error fails the call. Tests use it to synchronise with the code under
	// test or to inspect the request.
	OnCall func(ctx context.Context, req *llm.Request) error
}

// WithUsage returns s with a usage event (input and output tokens) before
// its final status, or at the end when it has none.
func (s Script) WithUsage(input, output int64) Script {
	u := events.UsageEvent{InputTokens: events.Int64(input), OutputTokens: events.Int64(output), TotalTokens: events.Int64(input + output)}
	evs := make([]events.Event, 0, len(s.Events)+1)
	n := len(s.Events)
	if n > 0 {
		if st, ok := s.Events[n-1].(events.StatusEvent); ok && st.Status.Terminal() {
			evs = append(append(append(evs, s.Events[:n-1]...), u), s.Events[n-1])
			s.Events = evs
			return s
		}
	}
	s.Events = append(append(evs, s.Events...), u)
	return s
}

// WithDelay returns s with Delay set.
func (s Script) WithDelay(d time.Duration) Script {
	s.Delay = d
	return s
}

// ToolCallSpec describes one tool call of a scripted step.
type ToolCallSpec struct {
	// ID may be empty, as with providers that give none (llm.Normalize then
	// synthesizes one).
	ID   string
	Name string
	// Input is the input JSON as the model streams it: it is sent in two
	// deltas to exercise reassembly; "" sends no delta. It may be invalid
	// JSON on purpose.
	Input string
	// Server marks a tool the provider runs itself.
	Server bool
}

// NewStep wraps blocks (built with TextBlockEvents, ThinkingBlockEvents,
// ToolUseBlockEvents) in status started … completed.
func NewStep(blocks ...[]events.Event) Script {
	evs := []events.Event{events.StatusEvent{Status: events.StatusStarted}}
	for _, b := range blocks {
		evs = append(evs, b...)
	}
	return Script{Events: append(evs, events.StatusEvent{Status: events.StatusCompleted})}
}

// TextBlockEvents returns a text block at index: start, one delta per chunk,
// stop with end_turn.
func TextBlockEvents(index int, chunks ...string) []events.Event {
	evs := []events.Event{events.BlockStart{Index: index, BlockType: events.BlockText}}
	for _, c := range chunks {
		evs = append(evs, events.TextDelta(index, c))
	}
	return append(evs, events.BlockStop{Index: index, BlockType: events.BlockText, StopReason: events.StopEndTurn})
}

// ThinkingBlockEvents returns a thinking block at index whose stop carries
// signature.
func ThinkingBlockEvents(index int, thinking, signature string) []events.Event {
	return []events.Event{
		events.BlockStart{Index: index, BlockType: events.BlockThinking},
		events.ThinkingDelta(index, thinking),
		events.BlockStop{Index: index, BlockType: events.BlockThinking, Signature: signature},
	}
}

// ToolUseBlockEvents returns a tool_use block at index for c: start, the
// input in two deltas, stop with tool_use.
func ToolUseBlockEvents(index int, c ToolCallSpec) []events.Event {
	evs := []events.Event{events.BlockStart{Index: index, BlockType: events.BlockToolUse, ID: c.ID, Name: c.Name, Server: c.Server}}
	if c.Input != "" {
		// Split at a rune boundary near the middle: chunks stay valid UTF-8
		// should they be sent over the wire.
		mid := len(c.Input) / 2
		for mid > 0 && !utf8.RuneStart(c.Input[mid]) {
			mid--
		}
		if mid > 0 {
			evs = append(evs, events.InputJSONDelta(index, c.Input[:mid]))
		}
		evs = append(evs, events.InputJSONDelta(index, c.Input[mid:]))
	}
	return append(evs, events.BlockStop{Index: index, BlockType: events.BlockToolUse, StopReason: events.StopToolUse})
}

// TimedBlock is a part of a TimedStep: its events, the last of which is
// yielded End after the call.
type TimedBlock struct {
	Events []events.Event
	End    time.Duration
}

// Timed returns the block of evs (built with TextBlockEvents,
// ToolUseBlockEvents, ...) ending at end.
func Timed(end time.Duration, evs []events.Event) TimedBlock {
	return TimedBlock{Events: evs, End: end}
}

// TimedStep is NewStep with the timing of a live model: the events of
// each block are spread evenly from the end of the block before it (the
// call, for the first) to its End, so that a tool_use block's stop (its
// input complete) comes exactly at End; status started comes at once,
// status completed with the last block. Ends must not decrease.
func TimedStep(blocks ...TimedBlock) Script {
	evs := []events.Event{events.StatusEvent{Status: events.StatusStarted}}
	at := []time.Duration{0}
	var from time.Duration
	for _, b := range blocks {
		n := len(b.Events)
		for i, ev := range b.Events {
			evs = append(evs, ev)
			at = append(at, from+(b.End-from)*time.Duration(i+1)/time.Duration(n))
		}
		from = max(from, b.End)
	}
	evs = append(evs, events.StatusEvent{Status: events.StatusCompleted})
	at = append(at, from)
	return Script{Events: evs, At: at}
}

// TextStep is a step that answers with one text block streamed in chunks.
func TextStep(chunks ...string) Script { return NewStep(TextBlockEvents(0, chunks...)) }

// ThinkingStep is a step that thinks (with a signature), then answers text.
func ThinkingStep(thinking, signature string, text ...string) Script {
	return NewStep(ThinkingBlockEvents(0, thinking, signature), TextBlockEvents(1, text...))
}

// ToolStep is a step that calls the given tools in parallel (one tool_use
// block each, indexes 0, 1, ...).
func ToolStep(calls ...ToolCallSpec) Script { return TextToolStep("", calls...) }

// TextToolStep is a step that says text (when not empty) and then calls
// tools, as models often do.
func TextToolStep(text string, calls ...ToolCallSpec) Script {
	var blocks [][]events.Event
	if text != "" {
		b := TextBlockEvents(0, text)
		stop := b[len(b)-1].(events.BlockStop)
		stop.StopReason = "" // the answer goes on with tool calls
		b[len(b)-1] = stop
		blocks = append(blocks, b)
	}
	for _, c := range calls {
		blocks = append(blocks, ToolUseBlockEvents(len(blocks), c))
	}
	return NewStep(blocks...)
}

// BlockingStep is a step that starts a text block, streams chunks, then
// hangs until the call's ctx is cancelled (or the stream closed).
func BlockingStep(chunks ...string) Script {
	evs := []events.Event{events.StatusEvent{Status: events.StatusStarted}, events.BlockStart{Index: 0, BlockType: events.BlockText}}
	for _, c := range chunks {
		evs = append(evs, events.TextDelta(0, c))
	}
	return Script{Events: evs, WaitForCancel: true}
}

// FailStep is a step whose call fails with err before the first event.
func FailStep(err error) Script { return Script{Err: err} }

// FailMidStep is a step that starts a text block, streams chunks, then
// fails with err (a broken connection).
func FailMidStep(err error, chunks ...string) Script {
	s := BlockingStep(chunks...)
	s.WaitForCancel, s.StreamErr = false, err
	return s
}

// Scripted is a Provider for tests that plays one Script per call, in
// order, and records a copy of every request it gets. It is safe for
// concurrent use.
type Scripted struct {
	mu       sync.Mutex
	steps    []Script
	next     int
	requests []llm.Request
	fallback *Script
}

var _ llm.Provider = (*Scripted)(nil)

// NewScripted returns a provider that plays steps, one per call.
func NewScripted(steps ...Script) *Scripted {
	return &Scripted{steps: append([]Script(nil), steps...)}
}

// Add appends steps.
func (p *Scripted) Add(steps ...Script) {
	p.mu.Lock()
	p.steps = append(p.steps, steps...)
	p.mu.Unlock()
}

// SetFallback makes calls after the steps ran out play s instead of failing
// with ErrScriptExhausted.
func (p *Scripted) SetFallback(s Script) {
	p.mu.Lock()
	p.fallback = &s
	p.mu.Unlock()
}

// Stream implements llm.Provider: it records req and plays the next step.
func (p *Scripted) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	p.mu.Lock()
	var rec llm.Request
	if req != nil {
		rec = cloneRequest(req)
	}
	p.requests = append(p.requests, rec)
	call := len(p.requests)
	var sc Script
	ok := p.next < len(p.steps)
	if ok {
		sc = p.steps[p.next]
		p.next++
	} else if p.fallback != nil {
		sc, ok = *p.fallback, true
	}
	steps := len(p.steps)
	p.mu.Unlock()

	if !ok {
		return nil, fmt.Errorf("%w: call %d, but only %d steps were scripted", ErrScriptExhausted, call, steps)
	}
	if sc.OnCall != nil {
		if err := sc.OnCall(ctx, req); err != nil {
			return nil, err
		}
	}
	if sc.Err != nil {
		return nil, sc.Err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &scriptStream{ctx: ctx, sc: sc, start: time.Now(), closed: make(chan struct{})}, nil
}

// Requests returns copies of the requests received so far, in call order.
func (p *Scripted) Requests() []llm.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]llm.Request, len(p.requests))
	for i := range p.requests {
		out[i] = cloneRequest(&p.requests[i])
	}
	return out
}

// Calls returns how many times Stream was called.
func (p *Scripted) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.requests)
}

// Remaining returns how many scripted steps were not played yet.
func (p *Scripted) Remaining() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.steps) - p.next
}

type scriptStream struct {
	ctx       context.Context
	sc        Script
	start     time.Time
	i         int
	cur       events.Event
	err       error
	ended     bool
	closed    chan struct{}
	closeOnce sync.Once
}

func (s *scriptStream) end(err error) bool {
	s.ended, s.err, s.cur = true, err, nil
	return false
}

func (s *scriptStream) Next() bool {
	if s.ended {
		return false
	}
	select {
	case <-s.closed:
		return s.end(llm.ErrStreamClosed)
	default:
	}
	if err := s.ctx.Err(); err != nil {
		return s.end(err)
	}
	if s.i < len(s.sc.Events) {
		var wait time.Duration
		switch {
		case s.i < len(s.sc.At):
			wait = time.Until(s.start.Add(s.sc.At[s.i]))
		case s.sc.At == nil:
			wait = s.sc.Delay
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-t.C:
			case <-s.ctx.Done():
				return s.end(s.ctx.Err())
			case <-s.closed:
				return s.end(llm.ErrStreamClosed)
			}
		}
		s.cur = s.sc.Events[s.i]
		s.i++
		return true
	}
	switch {
	case s.sc.StreamErr != nil:
		return s.end(s.sc.StreamErr)
	case s.sc.WaitForCancel:
		select {
		case <-s.ctx.Done():
			return s.end(s.ctx.Err())
		case <-s.closed:
			return s.end(llm.ErrStreamClosed)
		}
	}
	return s.end(nil)
}

func (s *scriptStream) Current() events.Event { return s.cur }

func (s *scriptStream) Err() error { return s.err }

// Close unblocks a pending Next; it may be called from any goroutine.
func (s *scriptStream) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}

// cloneRequest deep-copies r, so that recorded requests do not change when
// the caller reuses its slices.
func cloneRequest(r *llm.Request) llm.Request {
	c := *r
	if r.Messages != nil {
		c.Messages = make([]events.Message, len(r.Messages))
		for i, m := range r.Messages {
			c.Messages[i] = m
			if m.Content != nil {
				c.Messages[i].Content = make([]events.Part, len(m.Content))
				for j, part := range m.Content {
					part.Input = cloneRaw(part.Input)
					c.Messages[i].Content[j] = part
				}
			}
		}
	}
	if r.Tools != nil {
		c.Tools = make([]events.ToolDefinition, len(r.Tools))
		for i, t := range r.Tools {
			t.InputSchema = cloneRaw(t.InputSchema)
			c.Tools[i] = t
		}
	}
	if r.Temperature != nil {
		v := *r.Temperature
		c.Temperature = &v
	}
	if r.Thinking != nil {
		v := *r.Thinking
		c.Thinking = &v
	}
	return c
}

func cloneRaw(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage{}, b...)
}

// MustStream plays the next step with a background context and fails t if
// the call fails.
func (p *Scripted) MustStream(t testing.TB) llm.Stream {
	t.Helper()
	s, err := p.Stream(context.Background(), &llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
