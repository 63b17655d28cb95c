package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// gatedStream plays its items in order: an event is yielded, a gate
// (a channel) is waited for, so that a test holds the stream between two
// blocks and looks at what the worker did meanwhile. After the items the
// stream ends, with err when set.
type gatedStream struct {
	ctx    context.Context
	items  []any
	err    error
	i      int
	cur    events.Event
	failed error
	once   sync.Once
	closed chan struct{}
}

func (s *gatedStream) Next() bool {
	for s.i < len(s.items) {
		it := s.items[s.i]
		s.i++
		switch v := it.(type) {
		case chan struct{}:
			select {
			case <-v:
			case <-s.ctx.Done():
				s.failed = s.ctx.Err()
				return false
			case <-s.closed:
				return false
			}
		case events.Event:
			s.cur = v
			return true
		}
	}
	s.failed = s.err
	return false
}

func (s *gatedStream) Current() events.Event { return s.cur }
func (s *gatedStream) Err() error            { return s.failed }
func (s *gatedStream) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

// gatedProvider plays one item list per call.
type gatedProvider struct {
	mu    sync.Mutex
	calls [][]any
	errs  []error
	n     int
}

func (p *gatedProvider) Stream(ctx context.Context, _ *llm.Request) (llm.Stream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n >= len(p.calls) {
		return nil, errors.New("gatedProvider: no script for this call")
	}
	s := &gatedStream{ctx: ctx, items: p.calls[p.n], closed: make(chan struct{})}
	if p.n < len(p.errs) {
		s.err = p.errs[p.n]
	}
	p.n++
	return s, nil
}

// items flattens events and gates into one list.
func items(parts ...any) []any {
	var out []any
	for _, p := range parts {
		switch v := p.(type) {
		case []events.Event:
			for _, e := range v {
				out = append(out, e)
			}
		default:
			out = append(out, v)
		}
	}
	return out
}

// probe is a tool that records its calls and may hold them until its
// release channel is closed or their context ends.
type probe struct {
	name    string
	started chan string // call ids, as calls start
	runs    atomic.Int32
	release chan struct{}
	mu      sync.Mutex
	stopped []string // calls whose context ended before release
}

func newProbe(name string) *probe {
	return &probe{name: name, started: make(chan string, 16)}
}

func (p *probe) tool(opts ...tool.Option) tool.Tool {
	return tool.MustFunc(p.name, p.name, json.RawMessage(`{"type":"object"}`), func(ctx context.Context, _ json.RawMessage) (string, error) {
		ci, _ := tool.CallFrom(ctx)
		p.runs.Add(1)
		p.started <- ci.CallID
		if p.release != nil {
			select {
			case <-p.release:
			case <-ctx.Done():
				p.mu.Lock()
				p.stopped = append(p.stopped, ci.CallID)
				p.mu.Unlock()
				return "", ctx.Err()
			}
		}
		return p.name + " done", nil
	}, opts...)
}

func (p *probe) stoppedCalls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.stopped)
}

// startedNow reports the id of a call that started, if one did.
func (p *probe) startedNow() (string, bool) {
	select {
	case id := <-p.started:
		return id, true
	default:
		return "", false
	}
}

func mustStart(t *testing.T, p *probe, want string) {
	t.Helper()
	var got string
	waitFor(t, p.name+" started", func() bool {
		id, ok := p.startedNow()
		got = id
		return ok
	})
	if got != want {
		t.Fatalf("%s started call %q, want %q", p.name, got, want)
	}
}

// toolResults returns the tool results of the transcript's tool
// messages: "id:content" in order.
func toolResults(msgs []events.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Role != events.RoleTool {
			continue
		}
		for _, p := range m.Content {
			out = append(out, p.ToolUseID+":"+p.Content)
		}
	}
	return out
}

func TestEagerCallsStartInBlockStopOrderWhileStreaming(t *testing.T) {
	a, b := newProbe("read_a"), newProbe("read_b")
	gate1, gate2 := make(chan struct{}), make(chan struct{})
	p := &gatedProvider{calls: [][]any{
		items(started(), toolBlock(0, "c1", "read_a", `{}`), gate1, toolBlock(1, "c2", "read_b", `{}`), gate2,
			textBlock(2, events.StopToolUse, "done asking"), completed()),
		items(stream(textBlock(0, events.StopEndTurn, "bye"))),
	}}
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{a.tool(tool.WithReadOnly()), b.tool(tool.WithIdempotent())}, Observer: rec})
	done := make(chan *worker.Result, 1)
	go func() { done <- mustRun(t, w, events.UserText("go")) }()

	// The stream waits at gate1: c1's block stopped, c2's has not started.
	mustStart(t, a, "c1")
	if _, ok := b.startedNow(); ok {
		t.Fatal("read_b started before its block")
	}
	close(gate1)
	mustStart(t, b, "c2")
	close(gate2)
	res := <-done
	if res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	if got, want := toolResults(res.Messages), []string{"c1:read_a done", "c2:read_b done"}; !slices.Equal(got, want) {
		t.Fatalf("tool results %v, want %v", got, want)
	}
	// Each call started once; both llmw.tool.started came before the
	// text block that ends the response, the results after the stream.
	if a.runs.Load() != 1 || b.runs.Load() != 1 {
		t.Fatalf("runs: read_a %d, read_b %d, want 1 each", a.runs.Load(), b.runs.Load())
	}
	var order []string
	for _, ev := range rec.events() {
		switch d := ev.Data.(type) {
		case events.ToolStarted:
			order = append(order, "started "+d.CallID)
		case events.ToolCallResult:
			order = append(order, "result "+d.CallID)
		case events.WorkerBlockStart:
			if d.BlockType == events.BlockText {
				order = append(order, fmt.Sprintf("text of step %d", d.Step))
			}
		}
	}
	want := []string{"started c1", "started c2", "text of step 1", "result c1", "result c2", "text of step 2"}
	if !slices.Equal(order, want) {
		t.Fatalf("events %v, want %v", order, want)
	}
}

func TestEagerHooksRunInOrderPerCallAtBlockStop(t *testing.T) {
	a := newProbe("read_a")
	n := newProbe("write_n")
	gate := make(chan struct{})
	var mu sync.Mutex
	var trace []string
	note := func(s string) {
		mu.Lock()
		trace = append(trace, s)
		mu.Unlock()
	}
	chain := chainWith(t, func(c *chainT) {
		for _, name := range []string{"first", "second"} {
			c.before(name, func(_ context.Context, in *beforeIn) (beforeOut, error) {
				note(name + " " + in.Call.ID)
				return beforeOut{Action: hook.ToolContinue}, nil
			})
		}
	})
	p := &gatedProvider{calls: [][]any{
		items(started(), toolBlock(0, "c1", "write_n", `{}`), toolBlock(1, "c2", "read_a", `{}`), gate, completed()),
		items(stream(textBlock(0, events.StopEndTurn, "bye"))),
	}}
	w := mustNew(t, worker.Config{Provider: p, Hooks: chain, Tools: []tool.Tool{a.tool(tool.WithReadOnly()), n.tool()}})
	done := make(chan *worker.Result, 1)
	go func() { done <- mustRun(t, w, events.UserText("go")) }()

	mustStart(t, a, "c2")
	note("stream end")
	close(gate)
	res := <-done
	if res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	// read_a's hooks ran, in their order, while the stream waited;
	// write_n, not eager, is decided after the stream, in its order too.
	want := []string{"first c2", "second c2", "stream end", "first c1", "second c1"}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(trace, want) {
		t.Fatalf("hook calls %v, want %v", trace, want)
	}
	if got, want := toolResults(res.Messages), []string{"c1:write_n done", "c2:read_a done"}; !slices.Equal(got, want) {
		t.Fatalf("tool results %v, want %v", got, want)
	}
}

func TestNonEagerToolWaitsForTheStreamEnd(t *testing.T) {
	n, a := newProbe("write_n"), newProbe("read_a")
	gate := make(chan struct{})
	p := &gatedProvider{calls: [][]any{
		items(started(), toolBlock(0, "c1", "write_n", `{}`), toolBlock(1, "c2", "read_a", `{}`), gate, completed()),
		items(stream(textBlock(0, events.StopEndTurn, "bye"))),
	}}
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{n.tool(), a.tool(tool.WithReadOnly())}})
	done := make(chan *worker.Result, 1)
	go func() { done <- mustRun(t, w, events.UserText("go")) }()

	// read_a started, so the worker looked at both stopped blocks: write_n,
	// which does not say it may start early, waits.
	mustStart(t, a, "c2")
	if id, ok := n.startedNow(); ok {
		t.Fatalf("write_n started call %s while the model streamed", id)
	}
	close(gate)
	mustStart(t, n, "c1")
	if res := <-done; res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
}

func TestEagerOptions(t *testing.T) {
	noop := func(context.Context, struct{}) (string, error) { return "", nil }
	for _, c := range []struct {
		name string
		opts []tool.Option
		want bool
	}{
		{"plain", nil, false},
		{"read-only", []tool.Option{tool.WithReadOnly()}, true},
		{"idempotent", []tool.Option{tool.WithIdempotent()}, true},
		{"read-only, not eager", []tool.Option{tool.WithReadOnly(), tool.WithEager(false)}, false},
		{"eager", []tool.Option{tool.WithEager(true)}, true},
	} {
		tl := tool.Must("t", "t", noop, c.opts...)
		if got := tool.EagerOf(tl); got != c.want {
			t.Errorf("%s: EagerOf %v, want %v", c.name, got, c.want)
		}
		if got := tool.CatalogEntry(tl).Eager; got != c.want {
			t.Errorf("%s: catalog eager %v, want %v", c.name, got, c.want)
		}
	}
}

func TestEagerCallPausedWaitsForTheTurnsPause(t *testing.T) {
	a, b := newProbe("read_a"), newProbe("read_b")
	chain := chainWith(t, func(c *chainT) {
		c.before("approve_a", func(_ context.Context, in *beforeIn) (beforeOut, error) {
			if in.Call.Name == "read_a" {
				return beforeOut{Action: hook.ToolPause, Reason: "ask"}, nil
			}
			return beforeOut{Action: hook.ToolContinue}, nil
		})
	})
	gate := make(chan struct{})
	p := &gatedProvider{calls: [][]any{
		items(started(), toolBlock(0, "c1", "read_a", `{}`), toolBlock(1, "c2", "read_b", `{}`), gate, completed()),
		items(stream(textBlock(0, events.StopEndTurn, "bye"))),
	}}
	tools := []tool.Tool{a.tool(tool.WithReadOnly()), b.tool(tool.WithReadOnly())}
	w := mustNew(t, worker.Config{Provider: p, Hooks: chain, Tools: tools})
	done := make(chan *worker.Result, 1)
	go func() { done <- mustRun(t, w, events.UserText("go")) }()

	// read_b, allowed, runs while the model streams; read_a waits.
	mustStart(t, b, "c2")
	close(gate)
	res := <-done
	if res.Status != worker.StatusPaused {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	if a.runs.Load() != 0 {
		t.Fatal("the paused read_a ran")
	}
	st := res.State
	if len(st.Pending) != 2 || st.Pending[0].State != worker.CallPaused || st.Pending[1].State != worker.CallAllowed ||
		st.Pending[1].Output == nil || st.Pending[1].Output.Content != "read_b done" {
		t.Fatalf("pending %s, want c1 paused and c2 allowed with its output", jsonString(t, st.Pending))
	}
	res, err := w.Resume(context.Background(), st, map[string]events.Decision{"c1": {Kind: events.DecisionApprove}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != worker.StatusCompleted {
		t.Fatalf("resumed: %s: %s", res.Status, res.Reason)
	}
	if a.runs.Load() != 1 || b.runs.Load() != 1 {
		t.Fatalf("runs: read_a %d, read_b %d, want 1 each", a.runs.Load(), b.runs.Load())
	}
	if got, want := toolResults(res.Messages), []string{"c1:read_a done", "c2:read_b done"}; !slices.Equal(got, want) {
		t.Fatalf("tool results %v, want %v", got, want)
	}
}

func TestEagerCallOfAFailedStreamIsCancelled(t *testing.T) {
	a := newProbe("read_a")
	a.release = make(chan struct{}) // runs until cancelled
	gate := make(chan struct{})
	p := &gatedProvider{
		calls: [][]any{items(started(), toolBlock(0, "c1", "read_a", `{}`), gate)},
		errs:  []error{errors.New("connection reset")},
	}
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{a.tool(tool.WithReadOnly())}, Observer: rec})
	done := make(chan *worker.Result, 1)
	go func() { done <- mustRun(t, w, events.UserText("go")) }()

	mustStart(t, a, "c1")
	close(gate) // the stream fails now
	res := <-done
	if res.Status != worker.StatusFailed {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	if got := a.stoppedCalls(); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("cancelled calls %v, want [c1]", got)
	}
	if got := toolResults(res.Messages); len(got) != 0 {
		t.Fatalf("tool results %v in the transcript of a failed stream", got)
	}
	if got := rec.ofType(events.TypeToolResult); len(got) != 0 {
		t.Fatalf("llmw.tool.result %v for a cancelled call", got)
	}
	cancelled := rec.ofType(events.TypeToolCancelled)
	if len(cancelled) != 1 || cancelled[0].(events.ToolCancelled).CallID != "c1" || cancelled[0].(events.ToolCancelled).Step != 1 {
		t.Fatalf("llmw.tool.cancelled %v, want one for c1 of step 1", cancelled)
	}
	// The cancel comes before the turn's end.
	types := rec.types()
	if i, j := slices.Index(types, "tool.cancelled"), slices.Index(types, "turn.failed"); i < 0 || j < i {
		t.Fatalf("events %v: tool.cancelled must come before turn.failed", types)
	}
}

func TestEagerCallOfARetriedStep(t *testing.T) {
	t.Run("asked again", func(t *testing.T) {
		a := newProbe("read_a")
		p := &gatedProvider{
			calls: [][]any{
				items(started(), toolBlock(0, "c1", "read_a", `{"q":1}`)),
				items(stream(toolBlock(0, "c1", "read_a", `{"q":1}`))),
				items(stream(textBlock(0, events.StopEndTurn, "bye"))),
			},
			errs: []error{errors.New("connection reset")},
		}
		rec := &recorder{}
		ta := tool.MustFunc("read_a", "a", []byte(`{"type":"object"}`), func(ctx context.Context, _ json.RawMessage) (string, error) {
			ci, _ := tool.CallFrom(ctx)
			a.runs.Add(1)
			a.started <- ci.CallID
			return "read_a done", nil
		}, tool.WithReadOnly())
		w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{ta}, StepAttempts: 2, Observer: rec})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusCompleted {
			t.Fatalf("status %s: %s", res.Status, res.Reason)
		}
		// The second attempt asked for the same call: it is the first
		// one's, run once, its result recorded once.
		if a.runs.Load() != 1 {
			t.Fatalf("read_a ran %d times, want 1", a.runs.Load())
		}
		if got, want := toolResults(res.Messages), []string{"c1:read_a done"}; !slices.Equal(got, want) {
			t.Fatalf("tool results %v, want %v", got, want)
		}
		if got := rec.ofType(events.TypeToolCancelled); len(got) != 0 {
			t.Fatalf("llmw.tool.cancelled %v for a call asked again", got)
		}
		if got := rec.ofType(events.TypeToolStarted); len(got) != 1 {
			t.Fatalf("llmw.tool.started %v, want one", got)
		}
	})
	t.Run("not asked again", func(t *testing.T) {
		a, b := newProbe("read_a"), newProbe("read_b")
		a.release = make(chan struct{})
		gate := make(chan struct{})
		p := &gatedProvider{
			calls: [][]any{
				items(started(), toolBlock(0, "c1", "read_a", `{}`), gate),
				items(stream(toolBlock(0, "c2", "read_b", `{}`))),
				items(stream(textBlock(0, events.StopEndTurn, "bye"))),
			},
			errs: []error{errors.New("connection reset")},
		}
		rec := &recorder{}
		w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{a.tool(tool.WithReadOnly()), b.tool(tool.WithReadOnly())},
			StepAttempts: 2, Observer: rec})
		done := make(chan *worker.Result, 1)
		go func() { done <- mustRun(t, w, events.UserText("go")) }()
		mustStart(t, a, "c1")
		close(gate)
		res := <-done
		if res.Status != worker.StatusCompleted {
			t.Fatalf("status %s: %s", res.Status, res.Reason)
		}
		if got := a.stoppedCalls(); !slices.Equal(got, []string{"c1"}) {
			t.Fatalf("cancelled calls %v, want [c1]", got)
		}
		if got, want := toolResults(res.Messages), []string{"c2:read_b done"}; !slices.Equal(got, want) {
			t.Fatalf("tool results %v, want %v", got, want)
		}
		cancelled := rec.ofType(events.TypeToolCancelled)
		if len(cancelled) != 1 || cancelled[0].(events.ToolCancelled).CallID != "c1" {
			t.Fatalf("llmw.tool.cancelled %v, want one for c1", cancelled)
		}
		for _, r := range rec.ofType(events.TypeToolResult) {
			if r.(events.ToolCallResult).CallID == "c1" {
				t.Fatalf("llmw.tool.result for the cancelled c1: %v", r)
			}
		}
	})
}

// cancellable is a remote-like tool: its calls may run elsewhere, and
// CancelCall records what it was asked to stop.
type cancellable struct {
	tool.Tool
	mu        sync.Mutex
	cancelled []string
}

func (c *cancellable) Eager() bool { return true }

func (c *cancellable) CancelCall(_ context.Context, ci tool.CallInfo) error {
	c.mu.Lock()
	c.cancelled = append(c.cancelled, ci.TurnID+"."+ci.CallID)
	c.mu.Unlock()
	return nil
}

func TestRunFromCheckpointWithEagerCalls(t *testing.T) {
	// The first run's checkpoints: the one that lists c1 and c2, started
	// while the model streamed, is where its process "died".
	a, b := newProbe("read_a"), newProbe("read_b")
	a.release, b.release = make(chan struct{}), make(chan struct{})
	ca := &cancellable{Tool: a.tool()}
	cb := &cancellable{Tool: b.tool()}
	gate := make(chan struct{})
	var mu sync.Mutex
	var last *worker.Checkpoint
	p := &gatedProvider{calls: [][]any{
		items(started(), toolBlock(0, "c1", "read_a", `{"q":1}`), toolBlock(1, "c2", "read_b", `{}`), gate),
	}}
	ctx, cancel := context.WithCancel(context.Background())
	w := mustNew(t, worker.Config{Provider: p, TurnID: "t1", Tools: []tool.Tool{ca, cb},
		Checkpoint: func(_ context.Context, cp *worker.Checkpoint) error {
			mu.Lock()
			last = cp
			mu.Unlock()
			return nil
		}})
	done := make(chan *worker.Result, 1)
	go func() {
		res, _ := w.Run(ctx, []events.Message{events.UserText("go")})
		done <- res
	}()
	mustStart(t, a, "c1")
	mustStart(t, b, "c2")
	mu.Lock()
	cp := last
	mu.Unlock()
	cancel()
	<-done
	if cp.Phase != worker.PhaseModel || len(cp.Eager) != 2 || cp.Eager[0].Call.ID != "c1" || cp.Eager[1].Call.ID != "c2" {
		t.Fatalf("checkpoint %s, want phase model with c1 and c2 started early", jsonString(t, cp))
	}
	if err := cp.Validate(); err != nil {
		t.Fatal(err)
	}

	// Another run continues it: the model call made again asks for c1
	// (same input), not for c2.
	a2 := newProbe("read_a")
	var first []bool
	ta := tool.MustFunc("read_a", "a", []byte(`{"type":"object"}`), func(ctx context.Context, _ json.RawMessage) (string, error) {
		ci, _ := tool.CallFrom(ctx)
		mu.Lock()
		first = append(first, ci.First)
		mu.Unlock()
		a2.runs.Add(1)
		return "read_a collected", nil
	})
	ca2 := &cancellable{Tool: ta}
	b2 := newProbe("read_b")
	cb2 := &cancellable{Tool: b2.tool()}
	p2 := &gatedProvider{calls: [][]any{
		items(stream(toolBlock(0, "c1", "read_a", `{"q":1}`))),
		items(stream(textBlock(0, events.StopEndTurn, "bye"))),
	}}
	rec := &recorder{}
	w2 := mustNew(t, worker.Config{Provider: p2, TurnID: "t1", Tools: []tool.Tool{ca2, cb2}, Observer: rec})
	res, err := w2.RunFrom(context.Background(), cp)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	// c1 is collected where its result may be stored (not a first run),
	// once; c2 is cancelled by its id, and not run.
	mu.Lock()
	defer mu.Unlock()
	if a2.runs.Load() != 1 || !slices.Equal(first, []bool{false}) {
		t.Fatalf("read_a ran %d times (first: %v), want once, not first", a2.runs.Load(), first)
	}
	if b2.runs.Load() != 0 || !slices.Equal(cb2.cancelled, []string{"t1.c2"}) || len(ca2.cancelled) != 0 {
		t.Fatalf("read_b ran %d times, cancelled %v (read_a %v), want c2 cancelled only", b2.runs.Load(), cb2.cancelled, ca2.cancelled)
	}
	if got, want := toolResults(res.Messages), []string{"c1:read_a collected"}; !slices.Equal(got, want) {
		t.Fatalf("tool results %v, want %v", got, want)
	}
	cancelled := rec.ofType(events.TypeToolCancelled)
	if len(cancelled) != 1 || cancelled[0].(events.ToolCancelled).CallID != "c2" {
		t.Fatalf("llmw.tool.cancelled %v, want one for c2", cancelled)
	}
}
