package turn_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

type lookArgs struct {
	Q string `json:"q"`
}

// storedResults is how many results LLMW_TOOLRESULTS holds for a call.
func (e *env) storedResults(turnID, callID string) uint64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	st, err := e.js.Stream(ctx, events.StreamToolResults)
	if err != nil {
		e.t.Fatal(err)
	}
	subj := e.subj.ToolResult(turnID, callID)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.Subjects[subj]
}

// callIDs are the call ids of the events of type typ.
func callIDs(t testing.TB, evs []ev, typ string) []string {
	var out []string
	for _, e := range evs {
		if e.Type == typ {
			var d struct {
				CallID string `json:"call_id"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d.CallID)
		}
	}
	return out
}

// A turn replica dies while the model streams, after two read-only calls
// started on toolexec: the replica that continues the turn makes the
// model call again, collects the call its new response asks for again
// (same id and input) by its <turn>.<call> id, and cancels the other.
// Each call ran once; the collected one has one result — in
// LLMW_TOOLRESULTS, among the events and in the transcript — and the
// cancelled one none in the transcript or the events.
func TestReplicaDiesWithEagerCallsInFlight(t *testing.T) {
	e := newEnv(t)
	half := llmtest.Script{Events: append(append([]events.Event{events.StatusEvent{Status: events.StatusStarted}},
		llmtest.ToolUseBlockEvents(0, llmtest.ToolCallSpec{ID: "c1", Name: "look", Input: `{"q":"x"}`})...),
		llmtest.ToolUseBlockEvents(1, llmtest.ToolCallSpec{ID: "c2", Name: "peek", Input: `{"q":"y"}`})...),
		WaitForCancel: true}
	e.scripted(llmtest.NewScripted(
		half,
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "look", Input: `{"q":"x"}`}),
		llmtest.TextStep("all done"),
	))
	var lookRuns, peekRuns atomic.Int64
	release := make(chan struct{})
	peekStopped := make(chan struct{})
	look := tool.Must("look", "reads", func(ctx context.Context, a lookArgs) (string, error) {
		lookRuns.Add(1)
		select {
		case <-release:
			return "looked at " + a.Q, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}, tool.WithReadOnly())
	peek := tool.Must("peek", "reads too", func(ctx context.Context, a lookArgs) (string, error) {
		peekRuns.Add(1)
		<-ctx.Done()
		close(peekStopped)
		return "", ctx.Err()
	}, tool.WithReadOnly())
	e.startToolexec(toolexec.Config{}, look, peek)

	ncA := e.connect()
	a, err := turn.New(ncA, turn.Config{Instance: "a", Logger: quietLogger(), AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := newID("eager")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}, Tools: []string{"look", "peek"}})
	// Both calls run on toolexec while a's model stream still hangs.
	natstest.Eventually(t, "both calls to start", func() bool { return lookRuns.Load() == 1 && peekRuns.Load() == 1 })
	st, ok, err := turn.LoadState(context.Background(), e.js, id)
	if err != nil || !ok || st.Checkpoint == nil || len(st.Checkpoint.Eager) != 2 {
		t.Fatalf("state %s %v %v, want a checkpoint listing the two calls started early", mustJSON(t, st), ok, err)
	}
	if evs := w.events(); count(evs, events.TypeTurnStep) != 1 || find(evs, events.TypeToolResult) >= 0 {
		t.Fatalf("before the crash: %s", describe(evs))
	}
	ncA.Close() // the replica is gone

	e.startTurn(turn.Config{Instance: "b", AckWait: time.Second})
	select {
	case <-peekStopped:
	case <-time.After(waitFor):
		t.Fatalf("peek was not cancelled; events: %s", describe(w.events()))
	}
	close(release)
	done := w.completed()
	_, results := toolUses(done.Messages)
	if len(results) != 1 || results["c1"].Content != "looked at x" {
		t.Fatalf("results %+v, want c1's only", results)
	}
	if lookRuns.Load() != 1 || peekRuns.Load() != 1 {
		t.Fatalf("look ran %d, peek ran %d times; want once each", lookRuns.Load(), peekRuns.Load())
	}
	evs := w.events()
	checkSeq(t, evs)
	if got := callIDs(t, evs, events.TypeToolResult); len(got) != 1 || got[0] != "c1" {
		t.Fatalf("llmw.tool.result for %v, want c1 once:%s", got, describe(evs))
	}
	if got := callIDs(t, evs, events.TypeToolCancelled); len(got) != 1 || got[0] != "c2" {
		t.Fatalf("llmw.tool.cancelled for %v, want c2 once:%s", got, describe(evs))
	}
	if got := callIDs(t, evs, events.TypeToolStarted); len(got) != 2 {
		t.Fatalf("llmw.tool.started for %v, want c1 and c2 once each:%s", got, describe(evs))
	}
	if n := e.storedResults(id, "c1"); n != 1 {
		t.Fatalf("%d results of c1 stored, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx)
}

// Without a crash: a read-only call is published to toolexec as soon as
// its block stopped, so llmw.tool.started comes while the model still
// streams (before the text block after it), and its result after the
// stream, in the transcript once; with NoEagerStart it waits for the
// stream's end.
func TestEagerRemoteCallStartsWhileTheModelStreams(t *testing.T) {
	for _, noEager := range []bool{false, true} {
		name := "eager"
		if noEager {
			name = "no eager start"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			var lookRuns atomic.Int64
			look := tool.Must("look", "reads", func(_ context.Context, a lookArgs) (string, error) {
				lookRuns.Add(1)
				return "looked at " + a.Q, nil
			}, tool.WithReadOnly())
			step := llmtest.NewStep(
				llmtest.ToolUseBlockEvents(0, llmtest.ToolCallSpec{ID: "c1", Name: "look", Input: `{"q":"x"}`}),
				llmtest.TextBlockEvents(1, "and more"))
			e.scripted(llmtest.NewScripted(step, llmtest.TextStep("done")))
			e.startToolexec(toolexec.Config{}, look)
			e.startTurn(turn.Config{NoEagerStart: noEager})
			id := newID("eager-remote")
			w := e.watch(id)
			e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}, Tools: []string{"look"}})
			done := w.completed()
			evs := w.events()
			checkSeq(t, evs)
			started, text := find(evs, events.TypeToolStarted), -1
			for i, ev := range evs {
				if ev.Type == events.TypeBlockStart && ev.Subject[len(ev.Subject)-len(".text"):] == ".text" {
					text = i
					break
				}
			}
			if started < 0 || text < 0 || (started < text) == noEager {
				t.Fatalf("llmw.tool.started at %d, the text block's start at %d (no eager start: %v):%s", started, text, noEager, describe(evs))
			}
			if result := find(evs, events.TypeToolResult); result < text {
				t.Fatalf("the result at %d comes before the stream's text at %d:%s", result, text, describe(evs))
			}
			_, results := toolUses(done.Messages)
			if len(results) != 1 || results["c1"].Content != "looked at x" || lookRuns.Load() != 1 {
				t.Fatalf("results %+v, look ran %d times", results, lookRuns.Load())
			}
		})
	}
}
