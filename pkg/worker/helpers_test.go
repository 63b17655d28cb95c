package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/leaf/poll"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script is what the scripted provider plays for one model call.
type script struct {
	evs []events.Event
	// err is returned by Stream instead of a stream.
	err error
	// block: after evs, Next blocks until ctx is cancelled or the stream is
	// closed (a model that hangs mid-stream).
	block bool
	// started is closed when the stream is opened.
	started chan struct{}
}

// scripted is a Provider test double: call n plays scripts[n] and the
// requests are recorded (deep copies, as JSON).
type scripted struct {
	mu      sync.Mutex
	scripts []script
	reqs    []llm.Request
}

func newScripted(s ...script) *scripted { return &scripted{scripts: s} }

func (p *scripted) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var cp llm.Request
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, err
	}
	p.mu.Lock()
	n := len(p.reqs)
	p.reqs = append(p.reqs, cp)
	p.mu.Unlock()
	if n >= len(p.scripts) {
		return nil, fmt.Errorf("scripted: no script for call %d", n+1)
	}
	sc := p.scripts[n]
	if sc.started != nil {
		close(sc.started)
	}
	if sc.err != nil {
		return nil, sc.err
	}
	return &sliceStream{ctx: ctx, evs: sc.evs, block: sc.block, closed: make(chan struct{})}, nil
}

func (p *scripted) requests() []llm.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]llm.Request(nil), p.reqs...)
}

type sliceStream struct {
	ctx       context.Context
	evs       []events.Event
	i         int
	cur       events.Event
	block     bool
	closeOnce sync.Once
	closed    chan struct{}
	err       error
}

func (s *sliceStream) Next() bool {
	if s.i < len(s.evs) {
		s.cur = s.evs[s.i]
		s.i++
		return true
	}
	if s.block {
		select {
		case <-s.ctx.Done():
			s.err = s.ctx.Err()
		case <-s.closed:
		}
	}
	return false
}

func (s *sliceStream) Current() events.Event { return s.cur }
func (s *sliceStream) Err() error            { return s.err }
func (s *sliceStream) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}

// Event builders.

func started() events.Event   { return events.StatusEvent{Status: events.StatusStarted} }
func completed() events.Event { return events.StatusEvent{Status: events.StatusCompleted} }

func textBlock(idx int, stop events.StopReason, chunks ...string) []events.Event {
	evs := []events.Event{events.BlockStart{Index: idx, BlockType: events.BlockText}}
	for _, c := range chunks {
		evs = append(evs, events.TextDelta(idx, c))
	}
	return append(evs, events.BlockStop{Index: idx, BlockType: events.BlockText, StopReason: stop})
}

func thinkingBlock(idx int, text, sig string) []events.Event {
	evs := []events.Event{events.BlockStart{Index: idx, BlockType: events.BlockThinking}}
	if text != "" {
		evs = append(evs, events.ThinkingDelta(idx, text))
	}
	return append(evs, events.BlockStop{Index: idx, BlockType: events.BlockThinking, Signature: sig})
}

func toolBlock(idx int, id, name, input string) []events.Event {
	return []events.Event{
		events.BlockStart{Index: idx, BlockType: events.BlockToolUse, ID: id, Name: name},
		events.InputJSONDelta(idx, input),
		events.BlockStop{Index: idx, BlockType: events.BlockToolUse, StopReason: events.StopToolUse},
	}
}

func usage(in, out int64) events.Event {
	return events.UsageEvent{InputTokens: events.Int64(in), OutputTokens: events.Int64(out)}
}

// stream wraps blocks into started … completed.
func stream(blocks ...[]events.Event) []events.Event {
	evs := []events.Event{started()}
	for _, b := range blocks {
		evs = append(evs, b...)
	}
	return append(evs, completed())
}

func textStep(text string) script {
	return script{evs: stream(textBlock(0, events.StopEndTurn, text))}
}

type call struct{ id, name, input string }

func toolStep(calls ...call) script {
	var blocks [][]events.Event
	for i, c := range calls {
		blocks = append(blocks, toolBlock(i, c.id, c.name, c.input))
	}
	return script{evs: stream(blocks...)}
}

// recorder is an Observer keeping every event.
type recorder struct {
	mu  sync.Mutex
	evs []worker.Event
}

func (r *recorder) Observe(ev worker.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
}

func (r *recorder) events() []worker.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]worker.Event(nil), r.evs...)
}

// types returns the event types, with the channel for block events.
func (r *recorder) types() []string {
	var out []string
	for _, ev := range r.events() {
		s := strings.TrimPrefix(ev.Type(), "llmw.")
		if strings.HasPrefix(ev.Type(), "llmw.block.") {
			s += "/" + string(ev.Channel())
		}
		out = append(out, s)
	}
	return out
}

func (r *recorder) ofType(typ string) []any {
	var out []any
	for _, ev := range r.events() {
		if ev.Type() == typ {
			out = append(out, ev.Data)
		}
	}
	return out
}

// waitFor polls until cond holds or fails the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, what, cond)
}

func mustNew(t *testing.T, cfg worker.Config, opts ...worker.Option) *worker.Worker {
	t.Helper()
	w, err := worker.New(cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return w
}

func mustRun(t *testing.T, w *worker.Worker, msgs ...events.Message) *worker.Result {
	t.Helper()
	res, err := w.Run(context.Background(), msgs)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(b)
}

// providerFunc plays the script f returns for each call.
type providerFunc func(req *llm.Request) script

func (f providerFunc) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	sc := f(req)
	return &sliceStream{ctx: ctx, evs: sc.evs, closed: make(chan struct{})}, nil
}

func jsonData(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(b)
}
