package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/fence"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// process dispatches a decoded request and returns its answer: decide
// says what to do in the situation a run of the turn here, or else the
// turn's state, makes. The run it starts (turnRun) holds the request
// until it ends, and its functions return the answer the request gets.
func (s *Service) process(m *request, env *events.Envelope, submit *events.TurnRequest, resume *events.ResumeRequest, dg string) answer {
	sit := situation{kind: kindSubmit}
	id := ""
	if submit != nil {
		id = submit.TurnID
	} else {
		sit.kind, id = kindResume, resume.TurnID
	}
	if md, err := m.ack.Metadata(); err == nil {
		sit.redelivered = md.NumDelivered > 1
	}
	// The request's trace context (telemetry.Extract) parents the turn's
	// spans; a continued turn's checkpoint keeps it (worker.Checkpoint).
	ctx, cancel := context.WithCancelCause(telemetry.Extract(s.root, env))
	t := &turnRun{s: s, id: id, msg: m, cancelF: cancel, life: newRunLife()}
	// Remote tool calls and hook requests go out only once the turn's
	// events are stored, fenced: proof that the turn is still this run's.
	t.ctx = fence.With(ctx, func(context.Context) error { return t.fence() })
	for {
		onDispatch(dispatchArrived, id, sit.redelivered)
		here := s.register(t)
		if here == nil {
			onDispatch(dispatchRegistered, id, sit.redelivered)
			break
		}
		onDispatch(dispatchFoundRun, id, sit.redelivered)
		sit.stand = here.standFor(m)
		act := decide(sit)
		if act == actWait {
			if sit.stand == standHereDeciding {
				<-here.life.decided
			} else {
				<-here.life.done
			}
			continue
		}
		if act == actLeave {
			cancel(nil)
			return leave
		}
		st, _, err := s.leaderRead(id)
		if err == nil && act == actNotPaused && st.Status == StatusPaused {
			// The run here is another resume that has not claimed the
			// turn yet: answer with the status it leaves, or, if it
			// ends without a claim (refused), look again.
			if st, err = s.awaitClaim(here, id); err == nil && st == nil {
				continue
			}
		}
		cancel(nil)
		if err != nil {
			return retry
		}
		sit.sameData = dg != "" && dg == st.RequestDigest
		return s.answerExisting(id, st, decide(sit))
	}
	defer s.unregister(t)

	for attempt := 0; ; attempt++ {
		st, rev, err := s.dispatchState(id, sit.kind == kindSubmit && attempt == 0)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			st, sit.stand = nil, standNone
		case err != nil:
			s.log.Warn("turn: read checkpoint", "turn_id", id, "err", err)
			return retry
		default:
			sit.stand, sit.sameData = standingOf(st.Status), dg != "" && dg == st.RequestDigest
		}
		act := decide(sit)
		if act == actStart || act == actResume || act == actRecover || act == actAbortCancelled {
			// The run answers for the turn from here on: another request
			// of it that came meanwhile waited for this (standHereDeciding).
			t.life.decide()
		}
		switch act {
		case actStart:
			a, again := s.fresh(t, submit, dg)
			if again && attempt < 3 {
				continue // another replica created the turn meanwhile
			}
			return a
		case actResume:
			return s.resume(t, st, rev, resume)
		case actRecover:
			telemetry.RecordRedelivery(t.ctx, "turn", "")
			if s.takeCancelRequest(id) {
				// Cancelled while no replica ran it: the turn ends as
				// soon as this run continues it.
				s.cancelHere(id)
			}
			return s.takeOver(t, st, rev)
		case actAbortCancelled:
			return s.abortCancelled(t, submit, rev, dg)
		default:
			return s.answerExisting(id, st, act)
		}
	}
}

// Where process stands with a request, for dispatchHook.
const (
	dispatchArrived    = "arrived"    // before it registers the run
	dispatchRegistered = "registered" // its run is the turn's on this replica
	dispatchFoundRun   = "found run"  // another run of the turn is here
)

func onDispatch(stage, turnID string, redelivered bool) {
	if f, ok := dispatchHook.load(); ok {
		f(stage, turnID, redelivered)
	}
}

// claimPoll is how often awaitClaim reads the state of a turn that a
// resume here is claiming.
const claimPoll = 20 * time.Millisecond

// awaitClaim waits until the turn id, which a run here is resuming, is
// not paused any more, and returns its state; nil when the run ended first
// (its resume refused, the turn still paused). A resume that finds
// another resuming the turn is answered not_paused with the status that
// resume gives it, not the paused status it is about to leave. After
// kvTimeout it returns the paused state it read last.
func (s *Service) awaitClaim(here *turnRun, id string) (*State, error) {
	tick := time.NewTicker(claimPoll)
	defer tick.Stop()
	deadline := time.After(kvTimeout)
	var last *State
	for {
		select {
		case <-here.life.done:
			return nil, nil
		case <-deadline:
			return last, nil
		case <-tick.C:
		}
		st, _, err := s.leaderRead(id)
		if err != nil {
			return nil, err
		}
		if last = st; st.Status != StatusPaused {
			return st, nil
		}
	}
}

// register makes t the running turn of its id, or returns the run of the
// id this replica has already.
func (s *Service) register(t *turnRun) *turnRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	if here := s.running[t.id]; here != nil {
		return here
	}
	s.running[t.id] = t
	return nil
}

// standFor is where the turn stands for a request m that finds this run
// of it here.
func (t *turnRun) standFor(m *request) standing {
	switch {
	case sameMsg(t.currentMsg(), m):
		return standHereSameMsg
	case t.life.deciding():
		return standHereDeciding
	case t.life.ending.Load():
		return standHereEnding
	case t.life.load() == phasePausing:
		return standHerePausing
	}
	return standHereRunning
}

// sameMsg reports whether a and b are deliveries of one stream message.
func sameMsg(a, b *request) bool {
	if a == nil || b == nil {
		return false
	}
	ma, err1 := a.ack.Metadata()
	mb, err2 := b.ack.Metadata()
	return err1 == nil && err2 == nil && ma.Sequence.Stream == mb.Sequence.Stream
}

// answerExisting is the answer to a request the service does not run,
// act's: a rejection (unknown_turn, not_paused, turn_exists), or for a
// submit with the same data as the turn's (a retried publish, a
// redelivery) an acknowledgement without an answer: the turn's events
// answer it. st is the turn's state (nil when it has none).
func (s *Service) answerExisting(id string, st *State, act action) answer {
	switch act {
	case actUnknownTurn:
		why := "it never started, or its state expired"
		req := events.TypeTurnResume
		if st != nil {
			why = "it was cancelled before it started"
		}
		return s.termRejected(events.TurnRejected{TurnID: id, Request: req, Code: events.RejectUnknownTurn,
			Reason: fmt.Sprintf("there is no turn %q to resume (%s)", id, why)})
	case actNotPaused:
		reason := fmt.Sprintf("turn %q is %s, not paused: a resume applies to a paused turn once (a resume sent twice, or the second of two at once, finds it running or ended)", id, st.Status)
		if st.Status == StatusPaused {
			reason = fmt.Sprintf("turn %q is being resumed by another resume request: a resume applies to a paused turn once", id)
		}
		return s.termRejected(events.TurnRejected{TurnID: id, Request: events.TypeTurnResume, Code: events.RejectNotPaused, Status: string(st.Status), Reason: reason})
	case actDuplicate:
		return ackAnswer
	default:
		reason := fmt.Sprintf("turn %q exists (%s) and was submitted with other data: a turn id names one turn, so choose a new id", id, st.Status)
		if st.Status.Finished() && s.cfg.FinishedTTL > 0 {
			reason += fmt.Sprintf(" (the id is free again %s after the turn ended)", s.cfg.FinishedTTL)
		}
		return s.termRejected(events.TurnRejected{TurnID: id, Request: events.TypeTurnSubmit, Code: events.RejectTurnExists, Status: string(st.Status), Reason: reason})
	}
}

func (s *Service) unregister(t *turnRun) {
	s.mu.Lock()
	if s.running[t.id] == t {
		delete(s.running, t.id)
	}
	cancelled := t.life.cancelRequested
	s.mu.Unlock()
	t.life.decide()
	close(t.life.done)
	t.cancelF(nil)
	if cancelled && t.life.load() != phaseCancelled {
		// The cancel reached this run but did not end the turn: the
		// worker had paused it, or it ended otherwise (completed, failed),
		// or the run only answered another request for a turn that had
		// ended (a resume or submit of it). Settle it as a replica that
		// does not run the turn does, so that the canceller gets its
		// answer: the paused turn is aborted, an ended one answered
		// turn_ended.
		s.settleCancel(t.id)
	}
}

// getState reads a turn's state with a direct get, which any replica of
// the bucket's stream may answer (leaderState reads from the leader).
func getState(ctx context.Context, kv jetstream.KeyValue, turnID string) (*State, uint64, error) {
	e, err := kv.Get(ctx, kvKey(turnID))
	if err != nil {
		return nil, 0, err
	}
	var st State
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return nil, e.Revision(), fmt.Errorf("turn: state of %s: %w", turnID, err)
	}
	return &st, e.Revision(), nil
}

// dispatchState reads the state process dispatches on. A submit's first
// look may take the direct get (kv.Get, answered by any replica): for a
// new turn, the common case, it says there is none, and if a lagging
// replica said so wrongly the Create that follows conflicts and the next
// look goes to the leader. Whatever else it finds is read again from the
// leader, since a claim, a resume or an answer follows.
func (s *Service) dispatchState(id string, direct bool) (*State, uint64, error) {
	ctx, cancel := kvContext(s.root)
	defer cancel()
	if direct {
		st, rev, err := getState(ctx, s.stateKV, id)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return st, rev, err
		}
	}
	return s.leaderState(ctx, id)
}
