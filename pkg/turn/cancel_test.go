package turn_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// stopNow stops s within a second.
func stopNow(s *turn.Service) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.Stop(ctx)
}

// The cancel of a turn whose replica died, heard only by a replica that
// stops before the turn is taken over, still ends the turn: the replica
// that takes it over finds the cancel in LLMW_TURN_STATE and aborts the
// turn without another model call.
func TestCancelOfAnOrphanedTurnOutlivesTheReplicaThatHeardIt(t *testing.T) {
	e := newEnv(t)
	slow := make([]string, 40)
	for i := range slow {
		slow[i] = "word "
	}
	p := llmtest.NewScripted(llmtest.TextStep(slow...).WithDelay(50*time.Millisecond), llmtest.TextStep("the whole answer"))
	e.scripted(p)
	// The request comes back an AckWait after its replica is gone, long
	// after replica a below stopped: b takes the turn over.
	const ackWait = 5 * time.Second
	ncX := e.connect()
	x, err := turn.New(ncX, turn.Config{Instance: "x", Logger: quietLogger(), AckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := newID("orphan-cancel")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}})
	w.waitFor("the answer streaming", func(evs []ev) bool { return count(evs, events.TypeBlockDelta) > 0 })
	ncX.Close() // x is gone with the turn
	defer stopNow(x)

	a := e.startTurn(turn.Config{Instance: "a", AckWait: ackWait})
	e.cancelTurn(id)
	ctx := natstest.Context(t)
	kv, err := e.js.KeyValue(ctx, events.BucketTurnState)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the cancel recorded in "+events.BucketTurnState, func() bool {
		_, err := kv.Get(ctx, turn.CancelKey(id))
		return err == nil
	})
	stopNow(a)

	e.startTurn(turn.Config{Instance: "b", AckWait: ackWait})
	end := w.waitEnd()
	if end.Type != events.TypeTurnAborted {
		t.Fatalf("the turn ended %s, want aborted by the cancel:%s", end.Type, describe(w.events()))
	}
	if ab := decode[events.TurnEnded](t, end); ab.Code != turn.CodeCancelled {
		t.Fatalf("aborted %+v, want code cancelled", ab)
	}
	if n := p.Calls(); n != 1 {
		t.Fatalf("the model was called %d times, want 1 (the call of the replica that died)", n)
	}
}

// A cancel that overtook its submit, heard by a replica that stops before
// the submit arrives, ends the submit on another replica at once: aborted,
// with no model call.
func TestCancelBeforeTheSubmitOutlivesTheReplicaThatHeardIt(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(llmtest.TextStep("never"))
	e.scripted(p)
	a := e.startTurn(turn.Config{Instance: "a"})
	id := newID("early-cancel")
	rejected := e.rejections(id)
	e.cancelTurn(id)
	if rj := rejected(); rj.Code != events.RejectUnknownTurn || rj.Request != events.TypeTurnCancel {
		t.Fatalf("answer to the cancel %+v, want unknown_turn", rj)
	}
	stopNow(a)

	e.startTurn(turn.Config{Instance: "b"})
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}})
	end := w.waitEnd()
	if end.Type != events.TypeTurnAborted || decode[events.TurnEnded](t, end).Code != turn.CodeCancelled {
		t.Fatalf("the submit ended %s %s, want aborted (cancelled)", end.Type, end.Data)
	}
	if n := p.Calls(); n != 0 {
		t.Fatalf("the model was called %d times for a cancelled turn", n)
	}
}

// A cancel that the turn's replica heard before it held the run (it
// arrived as the replica took the turn) still ends the turn: the replica
// that answers the cancel finds the turn running and forwards the cancel
// to the turn's replica.
func TestCancelMissedByTheTurnsReplicaIsForwardedToIt(t *testing.T) {
	e := newEnv(t)
	slow := make([]string, 100)
	for i := range slow {
		slow[i] = "word "
	}
	p := llmtest.NewScripted(llmtest.TextStep(slow...).WithDelay(50 * time.Millisecond))
	e.scripted(p)
	e.startTurn(turn.Config{Instance: "a"})
	id := newID("missed-cancel")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}})
	w.waitFor("the answer streaming", func(evs []ev) bool { return count(evs, events.TypeBlockDelta) > 0 })

	b := e.startTurn(turn.Config{Instance: "b"})
	turn.AnswerCancel(b, id)
	end := w.waitEnd()
	if end.Type != events.TypeTurnAborted {
		t.Fatalf("the turn ended %s, want aborted by the cancel:%s", end.Type, describe(w.events()))
	}
	if ab := decode[events.TurnEnded](t, end); ab.Code != turn.CodeCancelled {
		t.Fatalf("aborted %+v, want code cancelled", ab)
	}
	if n := count(w.events(), events.TypeBlockDelta); n >= len(slow) {
		t.Fatalf("the turn streamed all %d deltas before it ended: the cancel did not stop it", n)
	}
}

// A cancel on a subject of more than one token after cancel names no
// single turn: it is answered with llmw.turn.rejected (invalid_request)
// on P.turn.rejected._, and the turn its first token names runs on.
func TestCancelOnASubjectThatNamesNoSingleTurn(t *testing.T) {
	e := newEnv(t)
	e.scripted(llmtest.NewScripted(llmtest.TextStep("done")))
	e.startTurn(turn.Config{Instance: "a"})
	e.startTurn(turn.Config{Instance: "b"})
	rejected := e.rejections("")
	subject := e.subj.TurnCancel("t-multi.part")
	if err := e.nc.Publish(subject, nil); err != nil {
		t.Fatal(err)
	}
	rj := rejected()
	if rj.Code != events.RejectInvalidRequest || rj.Request != events.TypeTurnCancel || rj.TurnID != "" || !strings.Contains(rj.Reason, subject) {
		t.Fatalf("answer %+v, want invalid_request for the cancel naming %s", rj, subject)
	}
	id := newID("t-multi")
	w := e.watch(id)
	if err := e.nc.Publish(e.subj.TurnCancel(id+".part"), nil); err != nil {
		t.Fatal(err)
	}
	if rj := rejected(); rj.Code != events.RejectInvalidRequest {
		t.Fatalf("answer %+v, want invalid_request", rj)
	}
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}})
	w.completed()
}
