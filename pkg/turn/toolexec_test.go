package turn_test

import (
	"context"
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

// Two toolexec replicas host the same tool; the one running the call is
// stopped mid-call. The call moves to the other replica, the turn
// completes and the call has exactly one result.
func TestToolexecReplicaStoppedMidCall(t *testing.T) {
	e := newEnv(t)
	e.scripted(llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "w1", Name: "work", Input: `{}`}),
		llmtest.TextStep("worked"),
	))
	var first atomic.Value // the replica that took the call first
	var starts atomic.Int64
	replica := func(name string) tool.Tool {
		return tool.Must("work", "works until stopped", func(ctx context.Context, _ noArgs) (string, error) {
			starts.Add(1)
			if first.CompareAndSwap(nil, name) {
				<-ctx.Done() // the first run hangs until its replica stops
				return "", ctx.Err()
			}
			return "done on " + name, nil
		})
	}
	x := e.startToolexec(toolexec.Config{Instance: "x", AckWait: time.Second}, replica("x"))
	y := e.startToolexec(toolexec.Config{Instance: "y", AckWait: time.Second}, replica("y"))
	e.startTurn(turn.Config{})
	id := newID("toolexec")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("work")}, Tools: []string{"work"}})
	natstest.Eventually(t, "the call to start", func() bool { return starts.Load() == 1 })
	stopped, other := x, "y"
	if first.Load() == "y" {
		stopped, other = y, "x"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_ = stopped.Stop(ctx)

	done := w.completed()
	_, results := toolUses(done.Messages)
	if r := results["w1"]; r.IsError || r.Content != "done on "+other {
		t.Fatalf("result %+v, want done on %s", r, other)
	}
	if starts.Load() != 2 {
		t.Fatalf("the tool started %d times, want 2 (once per replica)", starts.Load())
	}
	sctx, scancel := context.WithTimeout(context.Background(), waitFor)
	defer scancel()
	st, err := e.js.Stream(sctx, events.StreamToolResults)
	if err != nil {
		t.Fatal(err)
	}
	subj := e.subj.ToolResult(id, "w1")
	info, err := st.Info(sctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[subj]; n != 1 {
		t.Fatalf("%d results stored for the call, want 1", n)
	}
	checkSeq(t, w.events())
}
