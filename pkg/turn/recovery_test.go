package turn_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

func countingTool(name string, runs *atomic.Int64, release <-chan struct{}) tool.Tool {
	return tool.Must(name, "counts its runs", func(ctx context.Context, _ noArgs) (string, error) {
		runs.Add(1)
		if release != nil {
			select {
			case <-release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return name + " done", nil
	})
}

// A replica stopped mid-stream (Stop with a tiny timeout) hands the turn
// off: another replica aborts the half-streamed block, makes the model call
// again and finishes; the tool of the first step does not run again and
// seq goes on without a gap.
func TestReplicaStoppedMidStream(t *testing.T) {
	e := newEnv(t)
	e.scripted(llm.NewScripted(
		llm.ToolStep(llm.ToolCallSpec{ID: "c1", Name: "count", Input: `{}`}),
		llm.BlockingStep("half an ans"),
		llm.TextStep("the whole answer"),
	))
	var runs atomic.Int64
	e.startToolexec(toolexec.Config{}, countingTool("count", &runs, nil))
	// The turn is not over when a hands it off: a runs no on_abort hook.
	var aborts atomic.Int64
	chain := &hook.Chain{}
	_ = chain.OnAbort(hook.Func[hook.AbortInput, hook.AbortResult](func(context.Context, *hook.AbortInput) (hook.AbortResult, error) {
		aborts.Add(1)
		return hook.AbortResult{}, nil
	}), hook.Options{Name: "count_aborts"})
	a, err := turn.New(e.connect(), turn.Config{Instance: "a", Logger: quietLogger(), AckWait: 2 * time.Second, Hooks: chain})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := newID("handoff")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}, Tools: []string{"count"}})
	w.waitFor("the second step streaming", func(evs []ev) bool {
		return count(evs, events.TypeBlockDelta) > 0 && count(evs, events.TypeTurnStep) == 2 &&
			strings.Contains(string(evs[len(evs)-1].Data), "half an ans")
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx) // too short: the turn is handed off
	before := len(w.events())

	e.startTurn(turn.Config{Instance: "b", AckWait: 2 * time.Second})
	done := w.completed()
	evs := w.events()
	checkSeq(t, evs)
	// Nothing was published by a after the hand-off but before b: b's first
	// event is the abort of the half-streamed block.
	if evs[before].Type != events.TypeBlockAbort {
		t.Fatalf("first event after the hand-off is %s:%s", evs[before].Type, describe(evs))
	}
	abort := decode[events.WorkerBlockAbort](t, evs[before])
	if abort.Step != 2 || abort.BlockType != events.BlockText {
		t.Fatalf("abort %+v", abort)
	}
	if st := decode[events.TurnStarted](t, evs[before+1]); evs[before+1].Type != events.TypeTurnStarted || !st.Resumed {
		t.Fatalf("after the abort: %s %s", evs[before+1].Type, evs[before+1].Data)
	}
	if got := done.Messages[len(done.Messages)-1].Text(); got != "the whole answer" {
		t.Fatalf("final text %q", got)
	}
	if runs.Load() != 1 {
		t.Fatalf("the tool ran %d times", runs.Load())
	}
	if aborts.Load() != 0 {
		t.Fatalf("the handing-off replica ran on_abort hooks %d times", aborts.Load())
	}
	e.consumerIdle(t)
}

// A replica whose connection dies while its tools run: after AckWait
// another replica resumes from the checkpoint; the tool that finished is
// not run again, the one still running on toolexec delivers its one result
// to the new replica.
func TestReplicaDiesMidToolCall(t *testing.T) {
	e := newEnv(t)
	e.scripted(llm.NewScripted(
		llm.ToolStep(llm.ToolCallSpec{ID: "f1", Name: "fast", Input: `{}`}, llm.ToolCallSpec{ID: "s1", Name: "slow", Input: `{}`}),
		llm.TextStep("all done"),
	))
	var fastRuns, slowRuns atomic.Int64
	release := make(chan struct{})
	e.startToolexec(toolexec.Config{}, countingTool("fast", &fastRuns, nil), countingTool("slow", &slowRuns, release))

	ncA := e.connect()
	a, err := turn.New(ncA, turn.Config{Instance: "a", Logger: quietLogger(), AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := newID("dies")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}, Tools: []string{"*"}})
	// fast finished (its result is on the turn's events), slow runs.
	w.waitFor("the fast result", func(evs []ev) bool { return count(evs, events.TypeToolResult) == 1 })
	pollUntil(t, "slow to run", func() bool { return slowRuns.Load() == 1 })
	ncA.Close() // the replica is gone

	e.startTurn(turn.Config{Instance: "b", AckWait: time.Second})
	// b re-dispatched slow (dropped as a duplicate) and waits for its result.
	w.waitFor("b to take over", func(evs []ev) bool { return count(evs, events.TypeTurnStarted) == 2 })
	close(release)
	done := w.completed()
	_, results := toolUses(done.Messages)
	if results["f1"].Content != "fast done" || results["s1"].Content != "slow done" {
		t.Fatalf("results %+v", results)
	}
	if fastRuns.Load() != 1 || slowRuns.Load() != 1 {
		t.Fatalf("fast ran %d, slow ran %d times; want once each", fastRuns.Load(), slowRuns.Load())
	}
	checkSeq(t, w.events())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx)
}
