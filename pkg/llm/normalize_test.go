package llm_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmworker/llmworker/internal/leaf/poll"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
)

// opaque hides the concrete type of a source, so that Normalize cannot
// tell that its events are in memory and reads it with its pump.
type opaque struct{ llm.Stream }

// selfBounded says its source bounds its own waits, so that Normalize
// reads it inline whatever ctx and IdleTimeout are.
type selfBounded struct{ llm.Stream }

func (selfBounded) SelfBounded() {}

// normalizeBoth runs raw through Normalize inline (no cancellable ctx, no
// idle limit) and through the goroutine path (a cancellable ctx): both must
// give the same, well-formed result.
func normalizeBoth(t *testing.T, raw []events.Event, srcErr error) []string {
	t.Helper()
	src := func() llm.Stream {
		if srcErr != nil {
			return llmtest.NewScripted(llmtest.Script{Events: raw, StreamErr: srcErr}).MustStream(t)
		}
		return llm.SliceStream(raw...)
	}
	inline, err := llm.Collect(llm.Normalize(context.Background(), src(), llm.NormalizeOptions{}))
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// opaque hides the SliceStream, which Normalize would read inline.
	async, err := llm.Collect(llm.Normalize(ctx, opaque{src()}, llm.NormalizeOptions{IdleTimeout: time.Hour}))
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	bounded, err := llm.Collect(llm.Normalize(ctx, selfBounded{src()}, llm.NormalizeOptions{IdleTimeout: time.Hour}))
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	if c := show(t, bounded); strings.Join(c, "\n") != strings.Join(show(t, inline), "\n") {
		t.Fatalf("inline and SelfBounded paths differ:\n%s\n---\n%s", strings.Join(show(t, inline), "\n"), strings.Join(c, "\n"))
	}
	for _, evs := range [][]events.Event{inline, async} {
		if err := llm.CheckWellFormed(evs); err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, strings.Join(show(t, evs), "\n"))
		}
	}
	a, b := show(t, inline), show(t, async)
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("inline and goroutine paths differ:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	return a
}

func TestNormalizeKeepsAWellFormedStream(t *testing.T) {
	raw := llmtest.ThinkingStep("hmm", "sig", "Hel", "lo").WithUsage(3, 4).Events
	got := normalizeBoth(t, raw, nil)
	wantShown(t, got,
		"status started",
		"start 0 thinking",
		`delta 0 thinking "hmm"`,
		"stop 0 thinking sig=sig",
		"start 1 text",
		`delta 1 text "Hel"`,
		`delta 1 text "lo"`,
		"stop 1 text end_turn",
		"usage",
		"status completed",
	)
}

func TestNormalizeRepairs(t *testing.T) {
	cases := []struct {
		name string
		raw  []events.Event
		err  error
		want []string
	}{
		{
			name: "empty source",
			want: []string{"status started", "status completed"},
		},
		{
			name: "OpenAI style: no status, no starts, no stops",
			raw:  seq(events.TextDelta(0, "a"), events.TextDelta(0, "b"), events.UsageEvent{}),
			want: []string{"status started", "start 0 text", `delta 0 text "a"`, `delta 0 text "b"`, "usage", "stop 0 text", "status completed"},
		},
		{
			name: "duplicate started, unknown and duplicate stops, meta kept",
			raw: seq(started, events.PingEvent{Timestamp: 5}, started,
				events.BlockStop{Index: 4, BlockType: events.BlockText},
				events.BlockStart{Index: 0, BlockType: events.BlockText},
				events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: "weird"},
				events.BlockStop{Index: 0, BlockType: events.BlockText},
				events.BlockAbort{Index: 0, BlockType: events.BlockText},
				events.StatusEvent{Status: "bogus"},
				completed),
			want: []string{"status started", "ping 5", "start 0 text", "stop 0 text", "status completed"},
		},
		{
			name: "reused index is renumbered, deltas follow their block",
			raw: seq(started,
				events.BlockStart{Index: 0, BlockType: events.BlockText}, events.TextDelta(0, "a"),
				events.BlockStop{Index: 0, BlockType: events.BlockText},
				events.BlockStart{Index: 0, BlockType: events.BlockText}, events.TextDelta(0, "b"),
				events.BlockStop{Index: 0, BlockType: events.BlockText},
				events.BlockStart{Index: 1, BlockType: events.BlockText}, events.TextDelta(1, "c"),
				events.BlockStop{Index: 1, BlockType: events.BlockText},
				completed),
			want: []string{"status started",
				"start 0 text", `delta 0 text "a"`, "stop 0 text",
				"start 1 text", `delta 1 text "b"`, "stop 1 text",
				"start 2 text", `delta 2 text "c"`, "stop 2 text",
				"status completed"},
		},
		{
			name: "negative index gets a valid one",
			raw:  seq(events.ThinkingDelta(-3, "k")),
			want: []string{"status started", "start 0 thinking", `delta 0 thinking "k"`, "stop 0 thinking", "status completed"},
		},
		{
			name: "start on an open index stops the open block",
			raw: seq(started,
				events.BlockStart{Index: 0, BlockType: events.BlockText}, events.TextDelta(0, "a"),
				events.BlockStart{Index: 0, BlockType: events.BlockThinking}, events.ThinkingDelta(0, "k"),
				events.BlockStop{Index: 0, BlockType: events.BlockThinking},
				completed),
			want: []string{"status started", "start 0 text", `delta 0 text "a"`, "stop 0 text",
				"start 1 thinking", `delta 1 thinking "k"`, "stop 1 thinking", "status completed"},
		},
		{
			name: "delta of the wrong kind and unknown block types are dropped",
			raw: seq(started,
				events.BlockStart{Index: 0, BlockType: "image"},
				events.BlockStart{Index: 1, BlockType: events.BlockText},
				events.ThinkingDelta(1, "x"), events.InputJSONDelta(1, "x"),
				events.BlockDelta{Index: 1, Kind: 9, Content: "x"},
				events.TextDelta(1, "ok"),
				completed),
			want: []string{"status started", "start 1 text", `delta 1 text "ok"`, "stop 1 text", "status completed"},
		},
		{
			name: "tool ids: missing and duplicate ids are synthesized",
			raw: seq(started,
				events.BlockStart{Index: 0, BlockType: events.BlockToolUse, Name: "f"},
				events.BlockStop{Index: 0, BlockType: events.BlockToolUse},
				events.BlockStart{Index: 1, BlockType: events.BlockToolUse, ID: "x", Name: "g"},
				events.BlockStop{Index: 1, BlockType: events.BlockToolUse},
				events.BlockStart{Index: 2, BlockType: events.BlockToolUse, ID: "x", Name: "h", Server: true},
				events.BlockStop{Index: 2, BlockType: events.BlockToolUse, StopReason: events.StopToolUse},
				completed),
			want: []string{"status started",
				"start 0 tool_use call_* f", "stop 0 tool_use",
				"start 1 tool_use x g", "stop 1 tool_use",
				"start 2 tool_use call_* h server", "stop 2 tool_use tool_use",
				"status completed"},
		},
		{
			name: "tool without a name is aborted and its events dropped",
			raw: seq(started,
				events.BlockStart{Index: 0, BlockType: events.BlockToolUse, ID: "c"},
				events.InputJSONDelta(0, "{}"),
				events.BlockStop{Index: 0, BlockType: events.BlockToolUse},
				events.InputJSONDelta(1, "{}"), // input without a start: no name either
				events.InputJSONDelta(1, "{}"),
				events.BlockAbort{Index: 1, BlockType: events.BlockToolUse},
				events.TextDelta(0, "after"),
				completed),
			want: []string{"status started",
				"start 0 tool_use c " + llm.UnnamedTool, "abort 0 tool_use: the provider sent a tool call without a tool name",
				"start 1 tool_use call_* " + llm.UnnamedTool, "abort 1 tool_use: the provider sent a tool call without a tool name",
				"start 2 text", `delta 2 text "after"`, "stop 2 text",
				"status completed"},
		},
		{
			name: "source failure aborts open blocks",
			raw:  seq(started, events.BlockStart{Index: 0, BlockType: events.BlockText}, events.TextDelta(0, "par")),
			err:  errors.New("connection reset"),
			want: []string{"status started", "start 0 text", `delta 0 text "par"`,
				"error stream_error: connection reset", "abort 0 text: stream error", "status failed"},
		},
		{
			name: "source failure without a message",
			raw:  seq(started),
			err:  errors.New(""),
			want: []string{"status started", "error stream_error: the provider stream failed", "status failed"},
		},
		{
			name: "failed without an error event gets one",
			raw:  seq(events.TextDelta(0, "x"), failed),
			want: []string{"status started", "start 0 text", `delta 0 text "x"`,
				"error provider_failed: the provider reported a failure without saying why", "abort 0 text: provider failed", "status failed"},
		},
		{
			name: "failed after the provider's error event",
			raw:  seq(started, events.ErrorEvent{Code: "overloaded"}, failed),
			want: []string{"status started", "error overloaded: provider error overloaded", "status failed"},
		},
		{
			name: "provider cancelled",
			raw:  seq(started, events.BlockStart{Index: 0, BlockType: events.BlockText}, cancelled),
			want: []string{"status started", "start 0 text", "abort 0 text: cancelled by the provider", "status cancelled"},
		},
		{
			name: "provider abort keeps its reason, empty reason filled",
			raw: seq(started,
				events.BlockStart{Index: 0, BlockType: events.BlockText}, events.BlockAbort{Index: 0, BlockType: events.BlockText, Reason: "filtered"},
				events.BlockStart{Index: 1, BlockType: events.BlockText}, events.BlockAbort{Index: 1, BlockType: events.BlockThinking},
				completed),
			want: []string{"status started", "start 0 text", "abort 0 text: filtered", "start 1 text", "abort 1 text: aborted by the provider", "status completed"},
		},
		{
			name: "events after the terminal status are dropped",
			raw:  seq(started, completed, events.TextDelta(0, "late"), failed),
			want: []string{"status started", "status completed"},
		},
		{
			name: "nil events are dropped",
			raw:  seq(nil, started, nil, completed),
			want: []string{"status started", "status completed"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantShown(t, normalizeBoth(t, tc.raw, tc.err), tc.want...)
		})
	}
}

// TestNormalizeCancelMidStream: ctx is cancelled while a block is open and
// the source hangs; the open block is aborted and the stream ends cancelled.
func TestNormalizeCancelMidStream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := llmtest.NewScripted(llmtest.BlockingStep("Hel", "lo"))
	raw, err := p.Stream(ctx, &llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	s := llm.Normalize(ctx, raw, llm.NormalizeOptions{})
	defer s.Close()
	var evs []events.Event
	for s.Next() {
		evs = append(evs, s.Current())
		if d, ok := s.Current().(events.BlockDelta); ok && d.Content == "lo" {
			cancel() // the source now blocks until it sees the cancel
		}
	}
	if s.Err() != nil {
		t.Fatalf("Err = %v, want nil (failures are events)", s.Err())
	}
	if err := llm.CheckWellFormed(evs); err != nil {
		t.Fatal(err)
	}
	wantShown(t, show(t, evs), "status started", "start 0 text", `delta 0 text "Hel"`, `delta 0 text "lo"`,
		"abort 0 text: cancelled", "status cancelled")
	if s.Next() || s.Current() != nil {
		t.Fatal("Next after the end")
	}
}

func TestNormalizeCancelledBeforeFirstEvent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	evs, err := llm.Collect(llm.Normalize(ctx, llm.SliceStream(llmtest.TextStep("x").Events...), llm.NormalizeOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	wantShown(t, show(t, evs), "status started", "status cancelled")
}

func TestNormalizeIdleTimeout(t *testing.T) {
	// The source hangs after its deltas and never sees a cancel: only the
	// idle timeout ends the stream, and Close must still release the source.
	p := llmtest.NewScripted(llmtest.BlockingStep("a"))
	raw, err := p.Stream(context.Background(), &llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := llm.Collect(llm.Normalize(context.Background(), raw, llm.NormalizeOptions{IdleTimeout: 20 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	if err := llm.CheckWellFormed(evs); err != nil {
		t.Fatal(err)
	}
	wantShown(t, show(t, evs), "status started", "start 0 text", `delta 0 text "a"`,
		"error idle_timeout: no event from the provider for 20ms", "abort 0 text: idle timeout", "status failed")
}

func TestNormalizeIdleTimeoutResetsOnEveryEvent(t *testing.T) {
	// Events every millisecond with a generous limit: the limit is per gap,
	// not for the whole stream, so a long answer is never cut.
	s := llmtest.Script{Events: llmtest.TextStep("a", "b", "c", "d", "e").Events, Delay: time.Millisecond}
	p := llmtest.NewScripted(s)
	raw, _ := p.Stream(context.Background(), &llm.Request{})
	evs, err := llm.Collect(llm.Normalize(context.Background(), raw, llm.NormalizeOptions{IdleTimeout: 5 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last != completed {
		t.Fatalf("last event %v, want completed", last)
	}
}

// closeCounter is a source that counts Close calls.
type closeCounter struct {
	llm.Stream
	closes atomic.Int32
}

func (c *closeCounter) Close() error {
	c.closes.Add(1)
	return c.Stream.Close()
}

func TestNormalizeClosesTheSourceAtTheTerminalStatus(t *testing.T) {
	for _, ctx := range []context.Context{context.Background(), t.Context()} {
		src := &closeCounter{Stream: llm.SliceStream(started, completed, events.PingEvent{})}
		s := llm.Normalize(ctx, src, llm.NormalizeOptions{})
		for s.Next() {
		}
		if n := src.closes.Load(); n != 1 {
			t.Fatalf("source closed %d times after the end, want 1 (without Close)", n)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if n := src.closes.Load(); n != 1 {
			t.Fatalf("source closed %d times, want 1", n)
		}
	}
}

func TestNormalizeCloseBeforeNext(t *testing.T) {
	for _, ctx := range []context.Context{context.Background(), t.Context()} {
		src := &closeCounter{Stream: llm.SliceStream(llmtest.TextStep("x").Events...)}
		s := llm.Normalize(ctx, src, llm.NormalizeOptions{})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if s.Next() {
			t.Fatal("Next after Close")
		}
		if src.closes.Load() != 1 {
			t.Fatal("source not closed")
		}
	}
}

// TestNormalizeCloseUnblocksNext: a consumer blocked in Next on a hanging
// source is released by Close from another goroutine, inline and with the
// goroutine path; goleak (TestMain) checks that nothing is left running.
func TestNormalizeCloseUnblocksNext(t *testing.T) {
	for _, ctx := range []context.Context{context.Background(), t.Context()} {
		p := llmtest.NewScripted(llmtest.BlockingStep())
		raw, _ := p.Stream(context.Background(), &llm.Request{})
		s := llm.Normalize(ctx, raw, llm.NormalizeOptions{})
		var n atomic.Int32
		done := make(chan struct{})
		go func() {
			defer close(done)
			for s.Next() {
				n.Add(1)
			}
		}()
		// Wait until the consumer has read status started and block start
		// and is blocked on the source.
		waitFor(t, func() bool { return n.Load() == 2 })
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		<-done
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, "the condition", cond)
}

func TestNormalizeNilContext(t *testing.T) {
	//lint:ignore SA1012 a nil ctx is tolerated on purpose
	evs, err := llm.Collect(llm.Normalize(nil, llm.SliceStream(), llm.NormalizeOptions{})) //nolint:staticcheck
	if err != nil || len(evs) != 2 {
		t.Fatalf("evs = %v, err = %v", evs, err)
	}
}

// A nil source (a Provider that returned (nil, nil)) must not crash the
// process: docs/protocol.md §3 — the stream is still well-formed and ends failed
// after an error event that says why.
func TestNormalizeNilSource(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // a cancellable ctx makes Normalize read through its goroutine
	for name, ctx := range map[string]context.Context{"inline": context.Background(), "pumped": ctx} {
		t.Run(name, func(t *testing.T) {
			evs, err := llm.Collect(llm.Normalize(ctx, nil, llm.NormalizeOptions{}))
			if err != nil {
				t.Fatal(err)
			}
			if err := llm.CheckWellFormed(evs); err != nil {
				t.Fatal(err)
			}
			want := []events.Event{
				events.StatusEvent{Status: events.StatusStarted},
				events.ErrorEvent{Code: llm.CodeStreamError, Message: llm.ErrNilStream.Error()},
				events.StatusEvent{Status: events.StatusFailed},
			}
			if !reflect.DeepEqual(evs, want) {
				t.Fatalf("events %v, want %v", evs, want)
			}
		})
	}
}

// TestNormalizeConcurrentStreams runs many normalized scripted streams at
// once (go test -race), with cancels racing the streams.
func TestNormalizeConcurrentStreams(t *testing.T) {
	const n = 32
	p := llmtest.NewScripted()
	for i := 0; i < n; i++ {
		switch i % 4 {
		case 0:
			p.Add(llmtest.TextStep("a", "b"))
		case 1:
			p.Add(llmtest.ToolStep(llmtest.ToolCallSpec{Name: "f", Input: `{"x":1}`}, llmtest.ToolCallSpec{Name: "g"}))
		case 2:
			p.Add(llmtest.BlockingStep("z"))
		case 3:
			p.Add(llmtest.FailMidStep(errors.New("reset"), "q"))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			raw, err := p.Stream(ctx, &llm.Request{RequestID: "r"})
			if err != nil {
				errs <- err
				return
			}
			s := llm.Normalize(ctx, raw, llm.NormalizeOptions{IdleTimeout: time.Minute})
			var evs []events.Event
			for s.Next() {
				evs = append(evs, s.Current())
				if _, ok := s.Current().(events.BlockDelta); ok {
					cancel() // ends the blocking ones; may or may not cut the others
				}
			}
			s.Close()
			errs <- llm.CheckWellFormed(evs)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := len(p.Requests()); got != n {
		t.Fatalf("recorded %d requests, want %d", got, n)
	}
}

// panicky panics in Next after its events, as a broken provider might.
type panicky struct {
	llm.Stream
}

func (p panicky) Next() bool {
	if !p.Stream.Next() {
		panic("provider bug")
	}
	return true
}

// A source that panics, read inline or by the pump goroutine, fails the
// stream well-formed instead of crashing the process.
func TestNormalizeSourcePanic(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for name, ctx := range map[string]context.Context{"inline": context.Background(), "pumped": ctx} {
		t.Run(name, func(t *testing.T) {
			src := panicky{llm.SliceStream(events.StatusEvent{Status: events.StatusStarted}, events.TextDelta(0, "hi"))}
			evs, err := llm.Collect(llm.Normalize(ctx, src, llm.NormalizeOptions{}))
			if err != nil {
				t.Fatal(err)
			}
			if err := llm.CheckWellFormed(evs); err != nil {
				t.Fatal(err)
			}
			var errEv events.ErrorEvent
			for _, ev := range evs {
				if e, ok := ev.(events.ErrorEvent); ok {
					errEv = e
				}
			}
			if errEv.Code != llm.CodeStreamError || !strings.Contains(errEv.Message, "provider bug") ||
				evs[len(evs)-1] != (events.StatusEvent{Status: events.StatusFailed}) {
				t.Fatalf("events %v: want a stream_error naming the panic, then failed", evs)
			}
		})
	}
}

// A stream is normalized once: Normalize of a normalized stream is that
// stream (no second goroutine or buffer), and what it yields is unchanged.
func TestNormalizeOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	raw := []events.Event{events.TextDelta(0, "a"), events.TextDelta(0, "b")}
	once := llm.Normalize(ctx, llm.SliceStream(raw...), llm.NormalizeOptions{IdleTimeout: time.Hour})
	if _, ok := once.(llm.WellFormed); !ok {
		t.Fatalf("%T does not say it is well-formed", once)
	}
	twice := llm.Normalize(ctx, once, llm.NormalizeOptions{IdleTimeout: time.Minute})
	if twice != once {
		t.Fatalf("Normalize wrapped an already normalized stream (%T)", twice)
	}
	evs, err := llm.Collect(twice)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := llm.Collect(llm.Normalize(context.Background(), llm.SliceStream(raw...), llm.NormalizeOptions{}))
	if !reflect.DeepEqual(evs, ref) {
		t.Fatalf("got %v, want %v", evs, ref)
	}
}

// TestNormalizeInMemoryCancelMidStream: a SliceStream is read inline (no
// pump), and a cancel between two of its events still ends the stream
// cancelled with the open block aborted.
func TestNormalizeInMemoryCancelMidStream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := llm.Normalize(ctx, llm.SliceStream(llmtest.TextStep("Hel", "lo").Events...), llm.NormalizeOptions{IdleTimeout: time.Minute})
	defer s.Close()
	var evs []events.Event
	for s.Next() {
		evs = append(evs, s.Current())
		if d, ok := s.Current().(events.BlockDelta); ok && d.Content == "Hel" {
			cancel()
		}
	}
	if err := llm.CheckWellFormed(evs); err != nil {
		t.Fatal(err)
	}
	wantShown(t, show(t, evs), "status started", "start 0 text", `delta 0 text "Hel"`,
		"abort 0 text: cancelled", "status cancelled")
}

// gated is a source that yields n text deltas and then ends, waiting on
// gate before each event after the first burst events, so that a test
// controls how far the pump can read ahead.
type gated struct {
	n, burst, i int
	gate        chan struct{}
	cur         events.Event
	// reads counts the events read, for the test's goroutine.
	reads atomic.Int32
}

func (g *gated) Next() bool {
	if g.i >= g.n {
		return false
	}
	defer g.reads.Add(1)
	if g.i >= g.burst {
		<-g.gate
	}
	g.cur = events.TextDelta(0, string(rune('a'+g.i%26)))
	g.i++
	return true
}
func (g *gated) Current() events.Event { return g.cur }
func (g *gated) Err() error            { return nil }
func (g *gated) Close() error          { return nil }

// TestNormalizePumpOrderAndBackpressure: a burst far larger than the pump's
// read-ahead (the consumer lets the pump fill it before reading), then
// events one at a time with the consumer waiting for each: every event
// comes through once, in order, with the idle timer running throughout.
func TestNormalizePumpOrderAndBackpressure(t *testing.T) {
	const burst, n = 1000, 1050
	src := &gated{n: n, burst: burst, gate: make(chan struct{})}
	s := llm.Normalize(t.Context(), src, llm.NormalizeOptions{IdleTimeout: time.Minute})
	defer s.Close()
	var got strings.Builder
	var evs []events.Event
	for s.Next() {
		evs = append(evs, s.Current())
		if d, ok := s.Current().(events.BlockDelta); ok {
			got.WriteString(d.Content)
		}
		if len(evs) == 1 {
			// The pump fills its read-ahead and waits.
			waitFor(t, func() bool { return src.reads.Load() >= llm.PumpBuffer })
		}
		if len(evs) >= 2+burst && len(evs) < 2+n {
			go func() { src.gate <- struct{}{} }()
		}
	}
	if err := llm.CheckWellFormed(evs); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 0; i < n; i++ {
		want.WriteByte(byte('a' + i%26))
	}
	if got.String() != want.String() {
		t.Fatalf("deltas %q, want %q", got.String(), want.String())
	}
	// status started, block start, n deltas, block stop, status completed.
	if len(evs) != n+4 || evs[len(evs)-1] != completed {
		t.Fatalf("%d events ending with %v, want %d ending with completed", len(evs), evs[len(evs)-1], n+4)
	}
}

// TestNormalizeCancelWhileThePumpWaits: the consumer stops reading while the
// pump is blocked on a full read-ahead; a cancel ends the stream cancelled,
// and Close returns (goleak checks the pump is gone).
func TestNormalizeCancelWhileThePumpWaits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := &gated{n: 5000, burst: 5000}
	s := llm.Normalize(ctx, src, llm.NormalizeOptions{IdleTimeout: time.Minute})
	if !s.Next() {
		t.Fatal("no first event")
	}
	// The pump fills its read-ahead and waits.
	waitFor(t, func() bool { return src.reads.Load() >= llm.PumpBuffer })
	cancel()
	var last events.Event
	n := 1
	for s.Next() {
		last = s.Current()
		n++
	}
	if last != (events.StatusEvent{Status: events.StatusCancelled}) {
		t.Fatalf("last event %v, want status cancelled", last)
	}
	if n > 5000 {
		t.Fatalf("%d events: the source was read to its end after the cancel", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// slowBounded is a SelfBounded source: a text delta, then a silence of gap
// (cut short by Close or by ctx), then its own idle verdict as events.
type slowBounded struct {
	ctx    context.Context
	gap    time.Duration
	closed chan struct{}
	once   sync.Once
	evs    []events.Event
	cur    events.Event
	waited bool
}

func (s *slowBounded) SelfBounded() {}
func (s *slowBounded) Next() bool {
	if len(s.evs) == 0 {
		return false
	}
	if !s.waited && len(s.evs) == 2 {
		s.waited = true
		select {
		case <-time.After(s.gap):
		case <-s.ctx.Done():
			s.evs = []events.Event{events.StatusEvent{Status: events.StatusCancelled}}
		case <-s.closed:
			return false
		}
	}
	s.cur, s.evs = s.evs[0], s.evs[1:]
	return true
}
func (s *slowBounded) Current() events.Event { return s.cur }
func (s *slowBounded) Err() error            { return nil }
func (s *slowBounded) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

func newSlowBounded(ctx context.Context, gap time.Duration) *slowBounded {
	return &slowBounded{ctx: ctx, gap: gap, closed: make(chan struct{}), evs: []events.Event{
		events.TextDelta(0, "a"),
		events.ErrorEvent{Code: llm.CodeIdleTimeout, Message: "the source's own verdict"},
		events.StatusEvent{Status: events.StatusFailed},
	}}
}

// TestNormalizeSelfBounded: a SelfBounded source is read inline, so its own
// idle verdict applies and Normalize's shorter IdleTimeout does not; a
// cancel still ends it cancelled, through the source.
func TestNormalizeSelfBounded(t *testing.T) {
	src := newSlowBounded(context.Background(), 100*time.Millisecond)
	evs, err := llm.Collect(llm.Normalize(t.Context(), src, llm.NormalizeOptions{IdleTimeout: 5 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	wantShown(t, show(t, evs), "status started", "start 0 text", `delta 0 text "a"`,
		"error idle_timeout: the source's own verdict", "abort 0 text: provider failed", "status failed")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src = newSlowBounded(ctx, time.Hour)
	s := llm.Normalize(ctx, src, llm.NormalizeOptions{IdleTimeout: time.Hour})
	defer s.Close()
	evs = nil
	for s.Next() {
		evs = append(evs, s.Current())
		if _, ok := s.Current().(events.BlockDelta); ok {
			cancel()
		}
	}
	wantShown(t, show(t, evs), "status started", "start 0 text", `delta 0 text "a"`,
		"abort 0 text: cancelled", "status cancelled")
}

// TestNormalizeBuffered: Buffered counts what Next can return without
// waiting for the source: on the pump path what it read ahead, read inline
// what the source says it holds; 0 while the source is silent.
func TestNormalizeBuffered(t *testing.T) {
	t.Run("pump", func(t *testing.T) {
		src := &gated{n: 5, burst: 3, gate: make(chan struct{})}
		s := llm.Normalize(t.Context(), src, llm.NormalizeOptions{IdleTimeout: time.Minute})
		defer s.Close()
		b := s.(llm.Buffered)
		if !s.Next() { // status started, synthesized with the block start of the first delta
			t.Fatal("no first event")
		}
		// The source's burst of 3 deltas: the block start and the first
		// delta are normalized and queued, the other 2 are read ahead once
		// the pump got to them.
		waitFor(t, func() bool { return b.Buffered() == 4 })
		for want := 3; want >= 0; want-- {
			if !s.Next() {
				t.Fatal("stream ended early")
			}
			if got := b.Buffered(); got != want {
				t.Fatalf("after %v: Buffered = %d, want %d", s.Current(), got, want)
			}
		}
		// The third delta was the last: the pump now waits on the gate.
		close(src.gate)
		// The last two deltas and the end, once read ahead: the end counts
		// as one, and stopping the block and the completed status follow
		// from it.
		waitFor(t, func() bool { return b.Buffered() == 3 })
		n := 0
		for s.Next() {
			n++
		}
		if n != 4 || b.Buffered() != 0 {
			t.Fatalf("%d events after the gate (want 4: two deltas, stop, completed), Buffered %d", n, b.Buffered())
		}
	})
	t.Run("inline", func(t *testing.T) {
		s := llm.Normalize(t.Context(), llm.SliceStream(events.TextDelta(0, "a"), events.TextDelta(0, "b")), llm.NormalizeOptions{})
		b := s.(llm.Buffered)
		var got []int
		for s.Next() {
			got = append(got, b.Buffered())
		}
		// The first delta gives started, block start and delta a, so after
		// started: block start and a queued + b and the end in the source
		// (4); block start (3); a (2: b and the end); b (1: the end); the
		// end gives block stop and completed: stop (1), completed (0).
		want := []int{4, 3, 2, 1, 1, 0}
		if !slices.Equal(got, want) {
			t.Fatalf("Buffered after each event: %v, want %v", got, want)
		}
	})
}

// warned is a source whose provider did not send some settings.
type warned struct {
	llm.Stream
	w []events.Warning
}

func (s warned) Warnings() []events.Warning { return s.w }

// boundedWarned is a warned source that bounds its own waits.
type boundedWarned struct{ warned }

func (boundedWarned) SelfBounded() {}

// A consumer sees an adapter's stream only through Normalize, so the
// warnings of the source must be readable on the normalized stream, on
// every read path, before and after the events are read.
func TestNormalizeForwardsWarnings(t *testing.T) {
	want := []events.Warning{{Setting: "top_k", Message: "openai has no top_k; not sent"}}
	evs := []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.StatusEvent{Status: events.StatusCompleted},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := func() warned { return warned{Stream: opaque{llm.SliceStream(evs...)}, w: want} }
	for name, s := range map[string]llm.Stream{
		"inline":  llm.Normalize(context.Background(), src(), llm.NormalizeOptions{}),
		"pumped":  llm.Normalize(ctx, src(), llm.NormalizeOptions{IdleTimeout: time.Hour}),
		"bounded": llm.Normalize(ctx, boundedWarned{src()}, llm.NormalizeOptions{IdleTimeout: time.Hour}),
	} {
		t.Run(name, func(t *testing.T) {
			w, ok := s.(llm.Warner)
			if !ok {
				t.Fatalf("%T is not an llm.Warner", s)
			}
			if got := w.Warnings(); !reflect.DeepEqual(got, want) {
				t.Fatalf("before reading: warnings %v, want %v", got, want)
			}
			if _, err := llm.Collect(s); err != nil {
				t.Fatal(err)
			}
			if got := w.Warnings(); !reflect.DeepEqual(got, want) {
				t.Fatalf("after reading: warnings %v, want %v", got, want)
			}
		})
	}
	plain := llm.Normalize(context.Background(), llm.SliceStream(evs...), llm.NormalizeOptions{})
	if got := plain.(llm.Warner).Warnings(); got != nil {
		t.Fatalf("a source without warnings gave %v", got)
	}
}
