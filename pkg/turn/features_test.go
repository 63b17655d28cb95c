package turn_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

type noArgs struct{}

// Two tool calls of one response run at the same time: each tool waits
// until the other one started.
func TestParallelToolCalls(t *testing.T) {
	e := newEnv(t)
	e.scripted(llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "tool_a", Input: `{}`}, llmtest.ToolCallSpec{ID: "c2", Name: "tool_b", Input: `{}`}),
		llmtest.TextStep("both done"),
	))
	var started sync.WaitGroup
	started.Add(2)
	barrier := func(name string) tool.Tool {
		return tool.Must(name, "waits for the other tool", func(ctx context.Context, _ noArgs) (string, error) {
			started.Done()
			ok := make(chan struct{})
			go func() { started.Wait(); close(ok) }()
			select {
			case <-ok:
				return name + " ran alongside", nil
			case <-time.After(10 * time.Second):
				return "", errors.New("the other tool never started: calls were not concurrent")
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
	}
	e.startToolexec(toolexec.Config{}, barrier("tool_a"), barrier("tool_b"))
	e.startTurn(turn.Config{})
	id := newID("parallel")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("both")}, Tools: []string{"*"}})
	done := w.completed()
	uses, results := toolUses(done.Messages)
	if len(uses) != 2 {
		t.Fatalf("tool uses %+v", uses)
	}
	for _, u := range uses {
		r := results[u.ID]
		if r.IsError || r.Content != u.Name+" ran alongside" {
			t.Fatalf("result of %s: %+v", u.Name, r)
		}
	}
	checkSeq(t, w.events())
}

// A UI that only reads the text deltas rebuilds the answer exactly, in
// order, as llmw.text.complete and the transcript have it.
func TestUIDeltasRebuildText(t *testing.T) {
	chunks := []string{"Hel", "lo, ", "wör", "ld ", "✓", " — ", "\"quoted\"", "\n", "end."}
	e := newEnv(t)
	e.scripted(llmtest.NewScripted(llmtest.TextStep(chunks...)))
	e.startTurn(turn.Config{})
	id := newID("deltas")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("hi")}})
	done := w.completed()
	evs := w.events()
	checkSeq(t, evs)
	var rebuilt strings.Builder
	var complete string
	for _, ev := range evs {
		if !strings.HasSuffix(ev.Subject, ".text") {
			continue
		}
		switch ev.Type {
		case events.TypeBlockDelta:
			d := decode[events.WorkerBlockDelta](t, ev)
			if d.Kind != events.DeltaText || d.Step != 1 {
				t.Fatalf("delta %+v", d)
			}
			rebuilt.WriteString(d.Content)
		case events.TypeTextComplete:
			complete = decode[events.TextComplete](t, ev).Text
		}
	}
	want := strings.Join(chunks, "")
	if rebuilt.String() != want || complete != want || done.Messages[len(done.Messages)-1].Text() != want {
		t.Fatalf("rebuilt %q, text.complete %q, transcript %q; want %q", rebuilt.String(), complete,
			done.Messages[len(done.Messages)-1].Text(), want)
	}
}

// A UI that comes late replays a finished turn from LLMW_EVENTS with an
// ordered consumer and sees what a live UI saw.
func TestLateUIReplaysFinishedTurn(t *testing.T) {
	e := newEnv(t)
	e.scripted(llmtest.NewScripted(llmtest.TextStep("a", "b", "c")))
	e.startTurn(turn.Config{})
	id := newID("late")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", SessionID: "s-late", Messages: []events.Message{events.UserText("hi")}})
	w.completed()
	live := w.events()
	var replay []ev
	natstest.Eventually(t, "every event stored", func() bool {
		replay = e.stored(id)
		return len(replay) >= len(live)
	})
	checkSeq(t, replay)
	if len(replay) != len(live) {
		t.Fatalf("replayed %d events, live %d", len(replay), len(live))
	}
	for i := range live {
		if replay[i].Type != live[i].Type || replay[i].Subject != live[i].Subject || string(replay[i].Data) != string(live[i].Data) {
			t.Fatalf("event %d: replay %s %s, live %s %s", i, replay[i].Type, replay[i].Data, live[i].Type, live[i].Data)
		}
		if !strings.HasPrefix(replay[i].Subject, "llmw.events.s-late."+id+".") {
			t.Fatalf("subject %s", replay[i].Subject)
		}
	}
}

// Cancel mid-stream stops the model call, aborts the open block, runs the
// on_abort hooks and ends the turn as aborted, with its checkpoint marked
// aborted.
func TestCancelMidStream(t *testing.T) {
	e := newEnv(t)
	e.scripted(llmtest.NewScripted(llmtest.BlockingStep("partial ")))
	chain := &hook.Chain{}
	var aborted atomic.Value
	if err := chain.OnAbort(hook.Func[hook.AbortInput, hook.AbortResult](func(ctx context.Context, in *hook.AbortInput) (hook.AbortResult, error) {
		aborted.Store(in.Reason)
		return hook.AbortResult{}, nil
	}), hook.Options{Name: "record-abort"}); err != nil {
		t.Fatal(err)
	}
	svc := e.startTurn(turn.Config{Hooks: chain})
	id := newID("cancel")
	w := e.watch(id)
	// The model call is cancelled on ingest's side too.
	llmCancels := make(chan string, 4)
	sub, err := e.nc.Subscribe("llmw.llm.cancel.*", func(m *nats.Msg) { llmCancels <- m.Subject })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("hi")}})
	w.waitType(events.TypeBlockDelta)
	e.cancelTurn(id)
	end := w.waitEnd()
	if end.Type != events.TypeTurnAborted {
		t.Fatalf("ended with %s", end.Type)
	}
	evs := w.waitFor("the block abort", func(evs []ev) bool { return find(evs, events.TypeBlockAbort) >= 0 })
	checkSeq(t, evs)
	if find(evs, events.TypeBlockAbort) > find(evs, events.TypeTurnAborted) {
		t.Fatalf("block.abort after turn.aborted:%s", describe(evs))
	}
	if r, _ := aborted.Load().(string); !strings.Contains(r, "cancel") {
		t.Fatalf("on_abort hook saw reason %q", r)
	}
	select {
	case <-llmCancels:
	case <-time.After(waitFor):
		t.Fatal("no P.llm.cancel published")
	}
	natstest.Eventually(t, "the aborted state", func() bool {
		st, ok, err := turn.LoadState(context.Background(), e.js, id)
		return err == nil && ok && st.Status == turn.StatusAborted
	})
	natstest.Eventually(t, "the turn to leave the replica", func() bool { return len(svc.Running()) == 0 })
}

// consumerIdle waits until LLMW_TURNS has nothing pending or unacked: the
// request was acknowledged or terminated, not left for redelivery.
func (e *env) consumerIdle(t *testing.T) {
	t.Helper()
	natstest.Eventually(t, "the turn consumer to be idle", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := e.js.Consumer(ctx, events.StreamTurns, turn.ConsumerName)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0
	})
}

func TestMalformedRequests(t *testing.T) {
	e := newEnv(t)
	e.startTurn(turn.Config{})

	t.Run("not a CloudEvent", func(t *testing.T) {
		id := newID("garbage")
		w := e.watch(id)
		if _, err := e.js.Publish(context.Background(), e.subj.TurnSubmit(), []byte(`{"turn_id":"`+id+`", "model": 42}`)); err != nil {
			t.Fatal(err)
		}
		end := w.waitEnd()
		te := decode[events.TurnEnded](t, end)
		if end.Type != events.TypeTurnFailed || te.Code != turn.CodeInvalidRequest || !strings.Contains(te.Reason, "CloudEvent") {
			t.Fatalf("%s %+v", end.Type, te)
		}
	})
	t.Run("missing field", func(t *testing.T) {
		id := newID("nomodel")
		w := e.watch(id)
		e.publish(e.subj.TurnSubmit(), events.TypeTurnSubmit, id, map[string]any{"turn_id": id, "messages": []any{}})
		end := w.waitEnd()
		te := decode[events.TurnEnded](t, end)
		if end.Type != events.TypeTurnFailed || te.Code != turn.CodeInvalidRequest || !strings.Contains(te.Reason, `"model"`) {
			t.Fatalf("%s %+v", end.Type, te)
		}
	})
	t.Run("wrong type", func(t *testing.T) {
		id := newID("wrongtype")
		w := e.watch(id)
		e.publish(e.subj.TurnSubmit(), "llmw.turn.bogus", id, map[string]any{"turn_id": id})
		end := w.waitEnd()
		if te := decode[events.TurnEnded](t, end); !strings.Contains(te.Reason, "llmw.turn.bogus") {
			t.Fatalf("%+v", te)
		}
	})
	// Every bad request was terminated: nothing pending, nothing redelivered.
	e.consumerIdle(t)
}

func TestUnknownTool(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted()
	e.scripted(p)
	e.startTurn(turn.Config{})
	id := newID("unknown")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("hi")}, Tools: []string{"no_such_tool"}})
	end := w.waitEnd()
	te := decode[events.TurnEnded](t, end)
	if end.Type != events.TypeTurnFailed || te.Code != turn.CodeUnknownTool || !strings.Contains(te.Reason, `"no_such_tool"`) {
		t.Fatalf("%s %+v", end.Type, te)
	}
	if p.Calls() != 0 {
		t.Fatalf("the model was called")
	}
	e.consumerIdle(t)
}

// A cancel on a subject that names no single turn (a wildcard for the
// turn id) is answered with llmw.turn.rejected (invalid_request) on
// P.turn.rejected._, and cancels no turn.
func TestCancelOfNoSingleTurnIsRejected(t *testing.T) {
	e := newEnv(t)
	e.startTurn(turn.Config{})
	e.startTurn(turn.Config{})
	rejected := e.rejections("_")
	if err := e.nc.Publish(e.subj.TurnCancel("*"), nil); err != nil {
		t.Fatal(err)
	}
	rj := rejected()
	if rj.Code != events.RejectInvalidRequest || rj.Request != events.TypeTurnCancel || !strings.Contains(rj.Reason, e.subj.TurnCancel("*")) {
		t.Fatalf("answer %+v", rj)
	}
}
