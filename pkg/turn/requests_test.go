package turn_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

// Every request the service does not run is answered on
// P.turn.rejected.<turn_id> (docs/protocol.md §5): before, each of these
// vanished without an answer and a client waiting for its turn hung.
func TestRequestsThatAreNotRunAreAnswered(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted()
	p.SetFallback(llmtest.TextStep("ok"))
	e.scripted(p)
	e.startTurn(turn.Config{})
	hi := []events.Message{events.UserText("hi")}

	t.Run("a turn id a subject cannot carry", func(t *testing.T) {
		rejected := e.rejections("_")
		e.submit(events.TurnRequest{TurnID: "a.b", Model: "test:m", Messages: hi})
		rj := rejected()
		if rj.Code != events.RejectInvalidRequest || rj.TurnID != "a.b" || !strings.Contains(rj.Reason, "turn_id") {
			t.Fatalf("answer %+v", rj)
		}
	})
	t.Run("a malformed body whose turn id is only in Nats-Msg-Id", func(t *testing.T) {
		id := newID("malformed")
		w := e.watch(id)
		rejected := e.rejections(id)
		m := &nats.Msg{Subject: e.subj.TurnSubmit(), Header: nats.Header{}, Data: []byte(`{"model": 7`)}
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		if _, err := e.js.PublishMsg(ctx, m, jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
		if rj := rejected(); rj.Code != events.RejectInvalidRequest || rj.TurnID != id {
			t.Fatalf("answer %+v", rj)
		}
		// The UI waiting on the turn's events ends too.
		if end := w.waitEnd(); end.Type != events.TypeTurnFailed || decode[events.TurnEnded](t, end).Code != turn.CodeInvalidRequest {
			t.Fatalf("end %s", end.Type)
		}
	})

	id := newID("done")
	w := e.watch(id)
	rejected := e.rejections(id)
	first := events.TurnRequest{TurnID: id, Model: "test:m", Messages: hi}
	e.submit(first)
	w.waitType(events.TypeTurnCompleted)

	t.Run("a resubmitted id of a finished turn", func(t *testing.T) {
		e.publish(e.subj.TurnSubmit(), events.TypeTurnSubmit, "", events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("again")}})
		rj := rejected()
		if rj.Code != events.RejectTurnExists || rj.Status != string(turn.StatusCompleted) {
			t.Fatalf("answer %+v", rj)
		}
	})
	t.Run("a resume of a completed turn", func(t *testing.T) {
		e.resume(events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{"x": {Kind: events.DecisionApprove}}})
		if rj := rejected(); rj.Code != events.RejectNotPaused || rj.Status != string(turn.StatusCompleted) {
			t.Fatalf("answer %+v", rj)
		}
	})
	t.Run("a cancel of a completed turn", func(t *testing.T) {
		// Answered at once instead of leaving the canceller to time out;
		// the turn stays completed.
		if err := e.nc.Publish(e.subj.TurnCancel(id), nil); err != nil {
			t.Fatal(err)
		}
		if rj := rejected(); rj.Code != events.RejectTurnEnded || rj.Status != string(turn.StatusCompleted) || rj.Request != events.TypeTurnCancel {
			t.Fatalf("answer %+v", rj)
		}
		if st, ok, err := turn.LoadState(context.Background(), e.js, id); err != nil || !ok || st.Status != turn.StatusCompleted {
			t.Fatalf("state after the cancel: %+v %v %v", st, ok, err)
		}
	})
	t.Run("a cancel racing a resume of the ended turn", func(t *testing.T) {
		// A resume registers the id on the replica while it is answered;
		// a cancel arriving then must still be answered, not handed to
		// that short-lived run. (Cancels of one ended turn at the same
		// moment share one answer, as the replicas hearing one cancel do:
		// each iteration waits for its answers.)
		for i := 0; i < 30; i++ {
			e.resume(events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{"x": {Kind: events.DecisionApprove}}})
			if err := e.nc.Publish(e.subj.TurnCancel(id), nil); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for len(got) < 2 {
				rj := rejected()
				got[rj.Request] = rj.Code
			}
			if got[events.TypeTurnCancel] != events.RejectTurnEnded || got[events.TypeTurnResume] != events.RejectNotPaused {
				t.Fatalf("round %d: answers %v", i, got)
			}
		}
	})
	t.Run("the same submit again is a retried publish, not a new turn", func(t *testing.T) {
		calls := p.Calls()
		// No Nats-Msg-Id: the stream stores it again, the service
		// recognises the data.
		e.publish(e.subj.TurnSubmit(), events.TypeTurnSubmit, "", first)
		e.consumerIdle(t)
		if p.Calls() != calls {
			t.Fatal("the retried submit ran the turn again")
		}
		if n := count(w.events(), events.TypeTurnCompleted); n != 1 {
			t.Fatalf("%d completed events", n)
		}
	})
}

// A resume published with Nats-Msg-Id = the turn id (the natural guess,
// the same id as its submit) reaches the turn; before, JetStream dropped
// it as a duplicate of the submit and the turn stayed paused forever.
func TestResumeWithTheTurnIDAsMsgID(t *testing.T) {
	e := newEnv(t)
	// A model takes its time: the pause comes a few hundred ms after the
	// submit, as with any real provider. (LLMW_TURNS keeps message ids for
	// provision.TurnsDuplicateWindow only.)
	p := llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "get_capital", Input: `{"country":"France"}`}).WithDelay(60*time.Millisecond),
		llmtest.TextStep("Paris it is"),
	)
	e.scripted(p)
	var runs atomic.Int64
	e.startToolexec(toolexec.Config{}, capitalTool(&runs))
	e.startTurn(turn.Config{Hooks: pauseChain(t)})
	id := newID("natural")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("capital?")}, Tools: []string{"get_capital"}})
	w.waitType(events.TypeTurnPaused)
	e.publish(e.subj.TurnResume(), events.TypeTurnResume, id, events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{"call_1": {Kind: events.DecisionApprove}}})
	w.waitType(events.TypeTurnCompleted)
	if runs.Load() != 1 {
		t.Fatalf("the tool ran %d times", runs.Load())
	}
}

// Ended turns and early cancels do not keep their ids forever: their
// states expire (FinishedTTL, CancelTTL), after which the id starts a new
// turn. A permanent entry per cancel would let anyone fill the bucket and
// make the id unusable for ever.
func TestEndedStatesAndEarlyCancelsExpire(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted()
	p.SetFallback(llmtest.TextStep("ok"))
	e.scripted(p)
	e.startTurn(turn.Config{FinishedTTL: time.Second, CancelTTL: time.Second})
	gone := func(id string) {
		t.Helper()
		natstest.Eventually(t, "the state of "+id+" expired", func() bool {
			_, ok, err := turn.LoadState(context.Background(), e.js, id)
			return err == nil && !ok
		})
	}

	cancelled := newID("cancelled")
	e.cancelTurn(cancelled)
	natstest.Eventually(t, "the cancel is remembered", func() bool {
		st, ok, _ := turn.LoadState(context.Background(), e.js, cancelled)
		return ok && st.Status == turn.StatusCancelled
	})
	gone(cancelled)
	w := e.watch(cancelled)
	e.submit(events.TurnRequest{TurnID: cancelled, Model: "test:m", Messages: []events.Message{events.UserText("hi")}})
	w.waitType(events.TypeTurnCompleted)

	gone(cancelled)
	e.publish(e.subj.TurnSubmit(), events.TypeTurnSubmit, "", events.TurnRequest{TurnID: cancelled, Model: "test:m", Messages: []events.Message{events.UserText("once more")}})
	natstest.Eventually(t, "a second turn of the id", func() bool { return count(w.events(), events.TypeTurnCompleted) == 2 })
}
