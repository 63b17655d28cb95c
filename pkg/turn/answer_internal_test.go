package turn

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/worker"
)

// recAck records the answers given to a turn request. Metadata says it is
// a first delivery.
type recAck struct {
	mu      sync.Mutex
	answers []string
	req     *request // the request it answers for
	seq     uint64   // the stream sequence of its message, less one
	// looked, when set, gets a value at every Metadata call.
	looked chan struct{}
}

func (r *recAck) add(s string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers = append(r.answers, s)
	return nil
}

func (r *recAck) Ack() error                         { return r.add("ack") }
func (r *recAck) Nak() error                         { return r.add("nak") }
func (r *recAck) NakWithDelay(time.Duration) error   { return r.add("nak-delay") }
func (r *recAck) InProgress() error                  { return nil }
func (r *recAck) TermWithReason(reason string) error { return r.add("term " + reason) }
func (r *recAck) Metadata() (*jetstream.MsgMetadata, error) {
	if r.looked != nil {
		r.looked <- struct{}{}
	}
	return &jetstream.MsgMetadata{NumDelivered: 1, Sequence: jetstream.SequencePair{Stream: r.seq + 1, Consumer: 1}}, nil
}

func (r *recAck) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.answers)
}

// answeredOnce fails t unless the request got exactly one answer, want.
func (r *recAck) answeredOnce(t *testing.T, want string) {
	t.Helper()
	if got := r.got(); len(got) != 1 || got[0] != want {
		t.Fatalf("request answered %q, want once %q", got, want)
	}
	r.req.mu.Lock()
	defer r.req.mu.Unlock()
	if r.req.gives != 1 {
		t.Fatalf("%d answers given to the request, want 1 (the others were dropped)", r.req.gives)
	}
}

// internalService starts a turn service on an embedded server and returns
// it with the server.
func internalService(t *testing.T, cfg Config) (*Service, *natstest.Server) {
	t.Helper()
	ns := natstest.Start(t, natstest.Options{})
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := New(ns.Connect(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(natstest.Context(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
	})
	return s, ns
}

// pausedState stores a paused turn waiting for a decision on call_1 and
// returns it with its revision.
func pausedState(t *testing.T, s *Service, id string) (*State, uint64) {
	t.Helper()
	st := &State{
		Version: StateVersion, Status: StatusPaused, Owner: "other",
		Request: &events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{}},
		Checkpoint: &worker.Checkpoint{
			Version: worker.CheckpointVersion, TurnID: id, Phase: worker.PhasePaused, Step: 1,
			Messages: []events.Message{events.UserText("capital?"),
				{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("call_1", "get_capital", json.RawMessage(`{"country":"France"}`))}}},
			Pending: []worker.PendingCall{{Call: events.ToolCall{ID: "call_1", Name: "get_capital", Input: json.RawMessage(`{"country":"France"}`)},
				State: worker.CallPaused, Hook: "approve"}},
			Pause: &worker.Pause{Event: events.HookBeforeToolCall, Hook: "approve", Reason: "needs approval"},
		},
		Updated: time.Now().UTC(),
	}
	b, err := marshalState(st)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := s.stateKV.Create(natstest.Context(t), kvKey(id), b)
	if err != nil {
		t.Fatal(err)
	}
	return st, rev
}

// newTestRun is a run of id answering through rec, as the service makes
// one for a delivered request.
func newTestRun(s *Service, id string, rec *recAck) *turnRun {
	ctx, cancel := context.WithCancelCause(s.root)
	rec.req = newRequest(rec, s.log)
	return &turnRun{s: s, id: id, msg: rec.req, cancelF: cancel, ctx: ctx}
}

// rejectedOf subscribes to P.turn.rejected.<id>.
func rejectedOf(t *testing.T, nc *nats.Conn, s *Service, id string) func() events.TurnRejected {
	t.Helper()
	ch := make(chan *nats.Msg, 8)
	sub, err := nc.ChanSubscribe(s.subjects.TurnRejected(id), ch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() events.TurnRejected {
		t.Helper()
		select {
		case m := <-ch:
			env, err := events.DecodeEnvelope(m.Header, m.Data)
			if err != nil {
				t.Fatal(err)
			}
			rj, err := events.DecodeData[events.TurnRejected](env)
			if err != nil {
				t.Fatal(err)
			}
			return rj
		case <-time.After(10 * time.Second):
			t.Fatalf("no llmw.turn.rejected for %s", id)
			return events.TurnRejected{}
		}
	}
}

// deleteStream removes a stream, so that what the service stores there
// fails for its RetryTimeout.
func deleteStream(t *testing.T, js jetstream.JetStream, name string) {
	t.Helper()
	if err := js.DeleteStream(natstest.Context(t), name); err != nil {
		t.Fatal(err)
	}
}

// Two replicas resume one paused turn at once: both read it paused, one
// claims it first. The other's claim conflicts, and its client is told
// the turn is not paused (any more) with the status it has.
func TestResumeThatLosesTheClaimIsRejected(t *testing.T) {
	s, ns := internalService(t, Config{})
	id := "race-resume"
	st, rev := pausedState(t, s, id)
	next := rejectedOf(t, ns.NC, s, id)
	// The replica that won claimed the turn after this one read it.
	claim := *st
	claim.Status, claim.Owner = StatusRunning, "winner"
	b, _ := marshalState(&claim)
	if _, err := s.stateKV.Update(natstest.Context(t), kvKey(id), b, rev); err != nil {
		t.Fatal(err)
	}

	rec := &recAck{}
	tr := newTestRun(s, id, rec)
	tr.msg.give(s.resume(tr, st, rev, &events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{"call_1": {Kind: events.DecisionApprove}}}))
	rj := next()
	if rj.Code != events.RejectNotPaused || rj.Status != string(StatusRunning) || rj.Request != events.TypeTurnResume {
		t.Fatalf("rejection %+v, want not_paused with status running", rj)
	}
	rec.answeredOnce(t, "term "+events.RejectNotPaused)
}

// A resume whose claim cannot be written (the bucket takes no write) is
// left for its next delivery, answered once: no acknowledgement follows
// the negative one.
func TestResumeWhoseClaimFailsIsAnsweredOnce(t *testing.T) {
	s, ns := internalService(t, Config{RetryTimeout: 300 * time.Millisecond})
	id := "claim-fails"
	st, rev := pausedState(t, s, id)
	deleteStream(t, ns.JS, "KV_"+events.BucketTurnState)

	rec := &recAck{}
	tr := newTestRun(s, id, rec)
	tr.msg.give(s.resume(tr, st, rev, &events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{"call_1": {Kind: events.DecisionApprove}}}))
	rec.answeredOnce(t, "nak-delay")
}

// A turn that cannot start and whose failed event cannot be stored is
// left for the request's next delivery at once, not after its ack wait.
func TestFailEarlyWhoseEventIsNotStoredIsRedelivered(t *testing.T) {
	s, ns := internalService(t, Config{RetryTimeout: 300 * time.Millisecond})
	deleteStream(t, ns.JS, events.StreamEvents)
	id := "fail-early"
	rec := &recAck{}
	req := &events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("hi")}, Tools: []string{"no_such_tool"}}
	tr := newTestRun(s, id, rec)
	a, _ := s.fresh(tr, req, "digest")
	tr.msg.give(a)
	rec.answeredOnce(t, "nak-delay")
	if _, _, err := s.leaderState(natstest.Context(t), id); err == nil {
		t.Fatal("the failed turn's state was written although its failed event was not stored")
	}
}

// A cancel of a paused turn whose llmw.turn.aborted cannot be stored
// leaves the turn paused with its checkpoint: the state never says aborted
// without the event.
func TestAbortPausedWithoutStoredEventKeepsTheTurnPaused(t *testing.T) {
	s, ns := internalService(t, Config{RetryTimeout: 300 * time.Millisecond})
	id := "abort-unstored"
	st, rev := pausedState(t, s, id)
	deleteStream(t, ns.JS, events.StreamEvents)

	s.abortPaused(natstest.Context(t), id, st, rev, "cancelled")
	got, _, err := s.leaderState(natstest.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusPaused || got.Checkpoint == nil || len(got.Pending()) != 1 {
		t.Fatalf("state %s (checkpoint %v) after a cancel whose aborted event was not stored, want paused with its checkpoint", got.Status, got.Checkpoint != nil)
	}
}

// A cancel of an ended turn is answered without writing its state: the
// moment the state expires (and its id is free again) stays where the
// turn's end put it, and its revision does not move however often the
// turn is cancelled.
func TestCancelOfEndedTurnWritesNothing(t *testing.T) {
	s, ns := internalService(t, Config{FinishedTTL: time.Hour})
	id := "ended"
	st := State{Version: StateVersion, Status: StatusCompleted, Owner: "other", Request: &events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{}},
		Updated: time.Now().UTC().Add(-30 * time.Minute)}
	b, _ := json.Marshal(&st)
	ctx := natstest.Context(t)
	rev, err := s.stateKV.Create(ctx, kvKey(id), b, jetstream.KeyTTL(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	next := rejectedOf(t, ns.NC, s, id)
	for range 3 {
		s.cancelIdle(ctx, id)
		if rj := next(); rj.Code != events.RejectTurnEnded || rj.Status != string(StatusCompleted) {
			t.Fatalf("rejection %+v, want turn_ended (completed)", rj)
		}
	}
	if err := ns.NC.Publish(s.subjects.TurnCancel(id), nil); err != nil {
		t.Fatal(err)
	}
	if rj := next(); rj.Code != events.RejectTurnEnded {
		t.Fatalf("rejection %+v, want turn_ended", rj)
	}
	str, err := ns.JS.Stream(ctx, "KV_"+events.BucketTurnState)
	if err != nil {
		t.Fatal(err)
	}
	m, err := str.GetLastMsgForSubject(ctx, "$KV."+events.BucketTurnState+"."+kvKey(id))
	if err != nil {
		t.Fatal(err)
	}
	if m.Sequence != rev {
		t.Fatalf("after four cancels the state is at revision %d, want %d (the ended turn's, unwritten)", m.Sequence, rev)
	}
}

// A resume that arrives while this replica's run of the turn is ending
// with the pause it answers (the paused state is stored, the run not over)
// waits for that run to end, then resumes the turn — here a resume the
// turn cannot apply, so its answer is the rejection, given once.
func TestResumeWhileTheRunHereEndsItsPauseWaitsForIt(t *testing.T) {
	s, ns := internalService(t, Config{})
	id := "pausing"
	pausedState(t, s, id)
	next := rejectedOf(t, ns.NC, s, id)
	hereAck := &recAck{seq: 1, looked: make(chan struct{})}
	here := &turnRun{s: s, id: id, msg: newRequest(hereAck, s.log), life: newRunLife()}
	here.life.decide() // it ran the turn
	here.life.enter(phasePausing)
	s.mu.Lock()
	s.running[id] = here
	s.mu.Unlock()

	rec := &recAck{}
	rec.req = newRequest(rec, s.log)
	answered := make(chan answer, 1)
	go func() {
		answered <- s.process(rec.req, &events.Envelope{}, nil,
			&events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{"call_9": {Kind: events.DecisionApprove}}}, "")
	}()
	<-hereAck.looked // the resume found the run here
	s.mu.Lock()
	delete(s.running, id)
	s.mu.Unlock()
	close(here.life.done)
	if a := <-answered; a != termWith(events.RejectInvalidRequest) {
		t.Fatalf("answer %+v, want the resume rejected (invalid_request) once the run here ended", a)
	}
	if rj := next(); rj.Code != events.RejectInvalidRequest || !strings.Contains(rj.Reason, "call_9") {
		t.Fatalf("rejection %+v", rj)
	}
}
