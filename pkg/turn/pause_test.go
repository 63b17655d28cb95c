package turn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmworker/llmworker/internal/service/servicetest"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

// pauseChain pauses every call of get_capital for approval.
func pauseChain(t *testing.T) *hook.Chain {
	chain := &hook.Chain{}
	if err := chain.BeforeToolCall(hook.Func[hook.ToolCallInput, hook.BeforeToolCallResult](
		func(ctx context.Context, in *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
			return hook.BeforeToolCallResult{Action: hook.ToolPause, Reason: "needs approval"}, nil
		}), hook.Options{Name: "approve", Matcher: "^get_capital$"}); err != nil {
		t.Fatal(err)
	}
	return chain
}

func TestPauseAndResume(t *testing.T) {
	for _, tc := range []struct {
		name     string
		decision events.Decision
		// wantResult is the tool result the model reads; wantRuns how often
		// the tool ran.
		wantResult string
		wantErr    bool
		wantRuns   int64
	}{
		{"approve", events.Decision{Kind: events.DecisionApprove}, "Paris", false, 1},
		{"deny", events.Decision{Kind: events.DecisionDeny, Reason: "not today"}, "not today", true, 0},
		{"edit", events.Decision{Kind: events.DecisionEdit, Input: json.RawMessage(`{"country":"UK"}`)}, "London", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			p := llmtest.NewScripted(
				llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "get_capital", Input: `{"country":"France"}`}),
				llmtest.TextStep("ok"),
			)
			e.scripted(p)
			var runs atomic.Int64
			e.startToolexec(toolexec.Config{}, capitalTool(&runs))
			e.startTurn(turn.Config{Hooks: pauseChain(t)})
			id := newID("pause-" + tc.name)
			w := e.watch(id)
			e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("capital?")}, Tools: []string{"get_capital"}})
			end := w.waitEnd()
			if end.Type != events.TypeTurnPaused {
				t.Fatalf("ended with %s", end.Type)
			}
			paused := decode[events.TurnPaused](t, end)
			if len(paused.Pending) != 1 || paused.Pending[0].ID != "call_1" || paused.Hook != "approve" {
				t.Fatalf("paused %+v", paused)
			}
			// The request was acknowledged; the state waits for a resume.
			e.consumerIdle(t)
			st, ok, err := turn.LoadState(context.Background(), e.js, id)
			if err != nil || !ok || st.Status != turn.StatusPaused || len(st.Pending()) != 1 {
				t.Fatalf("state %+v %v %v", st, ok, err)
			}

			e.resume(events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{"call_1": tc.decision}})
			evs := w.waitFor("the end after the resume", func(evs []ev) bool {
				return find(evs, events.TypeTurnCompleted) >= 0 || find(evs, events.TypeTurnFailed) >= 0
			})
			checkSeq(t, evs)
			if find(evs, events.TypeTurnResumed) < 0 {
				t.Fatalf("no llmw.turn.resumed:%s", describe(evs))
			}
			done := decode[events.TurnCompleted](t, evs[find(evs, events.TypeTurnCompleted)])
			_, results := toolUses(done.Messages)
			r := results["call_1"]
			if r.IsError != tc.wantErr || !strings.Contains(r.Content, tc.wantResult) {
				t.Fatalf("result %+v, want %q (error %v)", r, tc.wantResult, tc.wantErr)
			}
			if runs.Load() != tc.wantRuns {
				t.Fatalf("tool ran %d times, want %d", runs.Load(), tc.wantRuns)
			}
			e.consumerIdle(t)
		})
	}
}

// A resume the turn cannot apply — decisions for calls that do not wait,
// or no decision at all while calls wait — is answered with
// llmw.turn.rejected (invalid_request): the turn's events and state stay
// as the pause left them, and a valid resume still continues it.
func TestResumeRejected(t *testing.T) {
	e := newEnv(t)
	e.scripted(llmtest.NewScripted(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "get_capital", Input: `{"country":"France"}`}), llmtest.TextStep("ok")))
	var runs atomic.Int64
	e.startToolexec(toolexec.Config{}, capitalTool(&runs))
	e.startTurn(turn.Config{Hooks: pauseChain(t)})
	id := newID("reject")
	w := e.watch(id)
	rejected := e.rejections(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("capital?")}, Tools: []string{"get_capital"}})
	paused := w.waitType(events.TypeTurnPaused)
	before, _, _ := turn.LoadState(context.Background(), e.js, id)
	for _, tc := range []struct {
		name      string
		decisions map[string]events.Decision
		// want is what the reason names.
		want []string
	}{
		{"unknown call", map[string]events.Decision{"no_such_call": {Kind: events.DecisionApprove}}, []string{"no_such_call", "call_1"}},
		{"no decisions", nil, []string{"decisions", "call_1"}},
		{"unknown kind", map[string]events.Decision{"call_1": {Kind: "maybe"}}, []string{"maybe"}},
	} {
		e.resume(events.ResumeRequest{TurnID: id, Decisions: tc.decisions})
		rj := rejected()
		if rj.Code != events.RejectInvalidRequest || rj.Request != events.TypeTurnResume || rj.TurnID != id {
			t.Fatalf("%s: answer %+v, want invalid_request", tc.name, rj)
		}
		for _, s := range tc.want {
			if !strings.Contains(rj.Reason, s) {
				t.Fatalf("%s: reason %q does not name %q", tc.name, rj.Reason, s)
			}
		}
	}
	e.consumerIdle(t)
	st, _, _ := turn.LoadState(context.Background(), e.js, id)
	if st == nil || st.Status != turn.StatusPaused || st.Seq != before.Seq || len(st.Pending()) != 1 {
		t.Fatalf("state after the rejected resumes %+v, want paused at seq %d", st, before.Seq)
	}
	if evs := e.stored(id); len(evs) != len(paused) {
		t.Fatalf("the rejected resumes added events:%s", describe(evs[len(paused):]))
	}
	// A valid resume still works afterwards.
	e.resume(events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{"call_1": {Kind: events.DecisionDeny}}})
	end := w.waitFor("the end", func(evs []ev) bool {
		return find(evs, events.TypeTurnFailed) >= 0 || find(evs, events.TypeTurnCompleted) >= 0
	})
	checkSeq(t, end)
	if find(end, events.TypeTurnCompleted) < 0 || runs.Load() != 0 || count(end, events.TypeTurnPaused) != 1 {
		t.Fatalf("after the deny: tool ran %d times:%s", runs.Load(), describe(end))
	}
}

func TestResumeUnknownTurn(t *testing.T) {
	e := newEnv(t)
	e.startTurn(turn.Config{})
	id := newID("ghost")
	w := e.watch(id)
	rejected := e.rejections(id)
	e.resume(events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{"x": {Kind: events.DecisionApprove}}})
	if rj := rejected(); rj.Code != events.RejectUnknownTurn || rj.TurnID != id || rj.Request != events.TypeTurnResume {
		t.Fatalf("answer %+v", rj)
	}
	e.consumerIdle(t)
	// The id has no turn, so it has no events either: a later submit of
	// it starts a turn whose seq begins at 1.
	if evs := w.events(); len(evs) != 0 {
		t.Fatalf("events of a turn that does not exist:%s", describe(evs))
	}
}

// The second turn of a session sees the first turn's transcript, and the
// session holds both.
func TestSessions(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(llmtest.TextStep("first answer"), llmtest.TextStep("second answer"))
	e.scripted(p)
	e.startTurn(turn.Config{})
	const session = "sess-1"
	id1, id2 := newID("s1"), newID("s2")
	w1 := e.watch(id1)
	e.submit(events.TurnRequest{TurnID: id1, SessionID: session, Model: "test:m", Messages: []events.Message{events.UserText("one")}})
	first := w1.completed()
	w2 := e.watch(id2)
	e.submit(events.TurnRequest{TurnID: id2, SessionID: session, Model: "test:m", Messages: []events.Message{events.UserText("two")}})
	second := w2.completed()

	reqs := p.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls", len(reqs))
	}
	want := append(append([]events.Message{}, first.Messages...), events.UserText("two"))
	if mustJSON(t, reqs[1].Messages) != mustJSON(t, want) {
		t.Fatalf("second request messages %s, want %s", mustJSON(t, reqs[1].Messages), mustJSON(t, want))
	}
	// The second turn's end carries the messages it added, after the
	// first turn's.
	whole := append(append([]events.Message{}, first.Messages...), second.Messages...)
	if mustJSON(t, whole[:len(want)]) != mustJSON(t, want) || second.From() != len(first.Messages) {
		t.Fatalf("second turn's messages %s from %d", mustJSON(t, second.Messages), second.From())
	}
	s, ok, err := turn.LoadSession(context.Background(), e.js, session)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if mustJSON(t, s.Messages) != mustJSON(t, whole) || s.LastTurn != id2 {
		t.Fatalf("session %s", mustJSON(t, s))
	}
	// Each turn's llmw.turn.started holds the question it added, not the
	// session's transcript before it.
	for _, c := range []struct {
		w    *watcher
		want events.Message
	}{{w1, events.UserText("one")}, {w2, events.UserText("two")}} {
		evs := c.w.events()
		if len(evs) == 0 || evs[0].Type != events.TypeTurnStarted {
			t.Fatalf("first event %s", describe(evs))
		}
		var st events.TurnStarted
		if err := json.Unmarshal(evs[0].Data, &st); err != nil {
			t.Fatal(err)
		}
		if mustJSON(t, st.Input) != mustJSON(t, []events.Message{c.want}) {
			t.Fatalf("input of %s: %s, want %s", st.TurnID, mustJSON(t, st.Input), mustJSON(t, []events.Message{c.want}))
		}
	}
	// Events of a session turn are on P.events.<session>.<turn>.*.
	for _, ev := range w2.events() {
		if !strings.HasPrefix(ev.Subject, "llmw.events."+session+"."+id2+".") {
			t.Fatalf("subject %s", ev.Subject)
		}
	}
}

// Cancelling a paused turn aborts it (on_abort hooks run on a replica that
// does not run it); cancelling a turn before it starts makes its request do
// nothing.
func TestCancelPausedAndUnstarted(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "get_capital", Input: `{"country":"France"}`}))
	e.scripted(p)
	var runs atomic.Int64
	e.startToolexec(toolexec.Config{}, capitalTool(&runs))
	chain := pauseChain(t)
	var aborts atomic.Int64
	if err := chain.OnAbort(hook.Func[hook.AbortInput, hook.AbortResult](func(ctx context.Context, in *hook.AbortInput) (hook.AbortResult, error) {
		aborts.Add(1)
		return hook.AbortResult{}, nil
	}), hook.Options{Name: "count-aborts"}); err != nil {
		t.Fatal(err)
	}
	e.startTurn(turn.Config{Hooks: chain})

	id := newID("cancel-paused")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("capital?")}, Tools: []string{"get_capital"}})
	w.waitType(events.TypeTurnPaused)
	e.cancelTurn(id)
	evs := w.waitType(events.TypeTurnAborted)
	checkSeq(t, evs)
	if aborts.Load() != 1 || runs.Load() != 0 {
		t.Fatalf("on_abort ran %d times, tool %d times", aborts.Load(), runs.Load())
	}
	natstest.Eventually(t, "the aborted state", func() bool {
		st, ok, _ := turn.LoadState(context.Background(), e.js, id)
		return ok && st.Status == turn.StatusAborted
	})

	// Cancelled before it was submitted (the cancel overtook the submit):
	// the cancel is answered at once, and the submit ends with
	// llmw.turn.aborted as the turn's only event.
	id2 := newID("cancel-early")
	w2 := e.watch(id2)
	rejected := e.rejections(id2)
	e.cancelTurn(id2)
	if rj := rejected(); rj.Code != events.RejectUnknownTurn || rj.Request != events.TypeTurnCancel {
		t.Fatalf("answer to the cancel %+v", rj)
	}
	calls := p.Calls()
	e.submit(events.TurnRequest{TurnID: id2, Model: "test:m", Messages: []events.Message{events.UserText("late")}})
	evs2 := w2.waitType(events.TypeTurnAborted)
	e.consumerIdle(t)
	if p.Calls() != calls || len(evs2) != 1 || evs2[0].Seq != 1 || decode[events.TurnEnded](t, evs2[0]).Code != turn.CodeCancelled {
		t.Fatalf("a cancelled turn ran (%d calls):%s", p.Calls()-calls, describe(w2.events()))
	}
}

// The submit of a turn cancelled before it started whose final state
// cannot be written (for longer than RetryTimeout) is left to its next
// delivery, which writes the state and does not publish llmw.turn.aborted
// a second time.
func TestCancelledSubmitRetriesItsFinalWrite(t *testing.T) {
	e := newEnv(t)
	var logs servicetest.SyncBuffer
	e.startTurn(turn.Config{RetryTimeout: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	id := newID("cancel-early-write")
	w := e.watch(id)
	rejected := e.rejections(id)
	e.cancelTurn(id)
	if rj := rejected(); rj.Code != events.RejectUnknownTurn {
		t.Fatalf("answer to the cancel %+v", rj)
	}

	// The state bucket refuses every write from now on (a message larger
	// than its stream takes): not a conflict, a write that fails.
	ctx := context.Background()
	st, err := e.js.Stream(ctx, "KV_"+events.BucketTurnState)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	limit := cfg.MaxMsgSize
	cfg.MaxMsgSize = 8
	if _, err := e.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("late")}})
	w.waitType(events.TypeTurnAborted)
	natstest.Eventually(t, "the final write to fail", func() bool { return strings.Contains(logs.String(), "turn: write final state") })
	cfg.MaxMsgSize = limit
	if _, err := e.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	natstest.Eventually(t, "the aborted state", func() bool {
		st, ok, _ := turn.LoadState(context.Background(), e.js, id)
		return ok && st.Status == turn.StatusAborted && st.Code == turn.CodeCancelled
	})
	e.consumerIdle(t)
	if evs := e.stored(id); len(evs) != 1 || evs[0].Type != events.TypeTurnAborted || evs[0].Seq != 1 {
		t.Fatalf("the turn's stored events:%s", describe(evs))
	}
}

// A resume of a turn that is running (not paused) does not disturb it.
func TestResumeOfRunningTurn(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(llmtest.BlockingStep("thinking aloud"))
	e.scripted(p)
	svc := e.startTurn(turn.Config{})
	id := newID("busy")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("hi")}})
	w.waitType(events.TypeBlockDelta)
	e.resume(events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{"x": {Kind: events.DecisionApprove}}})
	natstest.Eventually(t, "the resume to be terminated", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := e.js.Consumer(ctx, events.StreamTurns, turn.ConsumerName)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		// Only the running submit is unacknowledged.
		return err == nil && info.NumPending == 0 && info.NumAckPending == 1
	})
	if n := len(svc.Running()); n != 1 || p.Calls() != 1 {
		t.Fatalf("%d running turns, %d model calls", n, p.Calls())
	}
	if evs := w.events(); find(evs, events.TypeTurnResumed) >= 0 || find(evs, events.TypeTurnFailed) >= 0 {
		t.Fatalf("the running turn was disturbed:%s", describe(evs))
	}
	e.cancelTurn(id)
	if end := w.waitEnd(); end.Type != events.TypeTurnAborted {
		t.Fatalf("ended %s", end.Type)
	}
}

// A client that resumes the moment it sees llmw.turn.paused (an automated
// approver) gets every turn completed. The resume may reach the replica
// while it still finishes the pause (it must then wait, not be dropped);
// that window is narrow, so this test does not hit it on every run —
// TestResumeRejected, whose valid resume follows a rejected one, was the
// run that caught it.
func TestResumeRightAfterPause(t *testing.T) {
	e := newEnv(t)
	var runs atomic.Int64
	e.startToolexec(toolexec.Config{}, capitalTool(&runs))
	e.startTurn(turn.Config{Hooks: pauseChain(t)})
	const turns = 8
	var steps []llmtest.Script
	for range turns {
		steps = append(steps, llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "get_capital", Input: `{"country":"France"}`}), llmtest.TextStep("Paris"))
	}
	e.scripted(llmtest.NewScripted(steps...))
	for i := range turns {
		id := newID(fmt.Sprintf("quick%d", i))
		w := e.watch(id)
		e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("capital?")}, Tools: []string{"get_capital"}})
		w.waitType(events.TypeTurnPaused)
		e.resume(events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{"call_1": {Kind: events.DecisionApprove}}})
		if end := w.waitFor("the turn to complete", func(evs []ev) bool { return find(evs, events.TypeTurnCompleted) >= 0 }); find(end, events.TypeTurnFailed) >= 0 {
			t.Fatalf("turn %d failed:%s", i, describe(end))
		}
	}
	if runs.Load() != turns {
		t.Fatalf("the tool ran %d times, want %d", runs.Load(), turns)
	}
}
