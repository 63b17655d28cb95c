package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// onCancel handles P.turn.cancel.<id>: every replica gets it; the one
// running the turn cancels it, the others settle a paused or not yet
// started turn through the checkpoint (one of them wins by revision).
func (s *Service) onCancel(m *nats.Msg) {
	id := events.LastToken(m.Subject)
	if !events.ValidToken(id) {
		return
	}
	s.mu.Lock()
	t := s.running[id]
	if t != nil {
		t.cancelRequested = true
	}
	s.mu.Unlock()
	if t != nil {
		t.cancel(s.cancelCause(id))
		return
	}
	s.settleCancel(id)
}

// onBadCancel answers a cancel whose last token is no turn id (a
// wildcard: the subject names no single turn) with llmw.turn.rejected
// (invalid_request) on P.turn.rejected._; its queue group makes one
// replica answer.
func (s *Service) onBadCancel(m *nats.Msg) {
	if events.ValidToken(events.LastToken(m.Subject)) {
		return
	}
	s.rejected(events.TurnRejected{Request: events.TypeTurnCancel, Code: events.RejectInvalidRequest,
		Reason: fmt.Sprintf("the cancel subject %q names no single turn: publish a cancel to %s, one turn id and no wildcard", m.Subject, s.subjects.TurnCancel("<turn_id>"))})
}

// settleCancel settles the cancel of a turn this replica does not run
// (cancelIdle) in a goroutine that Stop waits for.
func (s *Service) settleCancel(id string) {
	s.mu.Lock()
	if s.cancelClosed {
		s.mu.Unlock()
		return
	}
	s.aux.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.aux.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.cancelIdle(ctx, id)
	}()
}

// errCancelRequested is the cause of a turn cancelled by a request;
// cancelCause names the subject it came on.
var errCancelRequested = errors.New("cancelled by a request")

func (s *Service) cancelCause(id string) error {
	return fmt.Errorf("%w on %s", errCancelRequested, s.subjects.TurnCancel(id))
}

// cancelIdle handles a cancel of a turn this replica does not run: a
// paused turn is aborted (its on_abort hooks run). For a turn id with no
// turn the cancel is answered with llmw.turn.rejected (unknown_turn) and
// remembered for Config.CancelTTL, since it may have overtaken its submit
// (cancels are core NATS, submits wait in a stream): that submit then
// ends at once with llmw.turn.aborted. A running turn is its replica's to
// cancel. Replicas race by revision; one wins.
func (s *Service) cancelIdle(ctx context.Context, id string) {
	st, rev, err := s.leaderState(ctx, id)
	now := time.Now().UTC()
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		reason := fmt.Sprintf("no turn %q is running or paused", id)
		if s.cfg.CancelTTL > 0 {
			tomb := State{Version: StateVersion, Status: StatusCancelled, Owner: s.cfg.Instance,
				Reason: "the turn was cancelled before it started", Code: CodeCancelled, Updated: now}
			b, _ := json.Marshal(&tomb)
			if _, err := s.storeState(ctx, id, b, 0, s.cfg.CancelTTL); err != nil {
				return // another replica was first, or the turn just started
			}
			reason += fmt.Sprintf("; a submit of it within %s ends at once with llmw.turn.aborted (the cancel may have overtaken it)", s.cfg.CancelTTL)
		}
		s.rejected(events.TurnRejected{TurnID: id, Request: events.TypeTurnCancel, Code: events.RejectUnknownTurn, Reason: reason})
	case err != nil:
		s.log.Warn("turn: cancel: read checkpoint", "turn_id", id, "err", err)
	case st.Status == StatusPaused && st.Checkpoint != nil:
		s.abortPaused(ctx, id, st, rev, "the turn was cancelled while paused: "+s.cancelCause(id).Error())
	case st.Status == StatusRunning:
		// Its replica runs it and cancels it, unless that replica is gone:
		// then the replica that takes the turn over applies the cancel.
		s.rememberOrphanCancel(id)
	case st.Status == StatusCompleted || st.Status == StatusFailed || st.Status == StatusAborted || st.Status == StatusCancelled:
		// Nothing to cancel, but the canceller waits for an answer: the
		// replica that rewrites the state at its revision gives it (one
		// answer, however many replicas heard the cancel). The rewrite
		// keeps the moment the state expires: a cancel does not hold the
		// id longer.
		b, _ := json.Marshal(st)
		ttl := s.cfg.FinishedTTL
		if st.Status == StatusCancelled {
			ttl = s.cfg.CancelTTL
		}
		if ttl > 0 {
			ttl = max(ttl-now.Sub(st.Updated), time.Second)
		}
		if _, err := s.storeState(ctx, id, b, rev, ttl); err != nil {
			return
		}
		rj := events.TurnRejected{TurnID: id, Request: events.TypeTurnCancel, Code: events.RejectTurnEnded, Status: string(st.Status),
			Reason: fmt.Sprintf("turn %q already ended (%s): there is nothing to cancel", id, st.Status)}
		if st.Status == StatusCancelled {
			rj.Code, rj.Status, rj.Reason = events.RejectUnknownTurn, "", fmt.Sprintf("no turn %q is running or paused; it was already cancelled before it started", id)
		}
		s.rejected(rj)
	}
}

// abortPaused ends a paused turn with llmw.turn.aborted (code cancelled).
// The aborted state is written first, at revision rev, so that a resume
// or another replica that was first wins; it keeps the checkpoint until
// the event is stored. Then the turn's on_abort hooks run and the event is
// published. Once it is stored the checkpoint goes; when it cannot be
// stored the paused state is written back, so that the state never says
// aborted without the event and a later cancel or resume finds the turn
// as it was.
func (s *Service) abortPaused(ctx context.Context, id string, st *State, rev uint64, reason string) {
	now := time.Now().UTC()
	session := ""
	if st.Request != nil {
		session = st.Request.SessionID
	}
	t := s.owner(id, session)
	ep := t.ep
	end := *st
	end.Status, end.Owner, end.Reason, end.Code, end.Updated = StatusAborted, s.cfg.Instance, reason, CodeCancelled, now
	b, err := marshalState(&end)
	if err != nil {
		return
	}
	if rev, err = s.storeState(ctx, id, b, rev, s.cfg.FinishedTTL); err != nil {
		return // a resume or another replica was first
	}
	cp := st.Checkpoint
	obs := hook.ObserverFuncs{
		Decision: func(d events.HookDecision) { t.publish(d) },
		Message:  func(m events.HookMessage) { t.publish(m) },
	}
	if s.cfg.Hooks != nil {
		s.cfg.Hooks.RunAbort(ctx, &hook.AbortInput{
			Turn:     &hook.Turn{ID: id, SessionID: session, Step: cp.Step, Vars: hook.Variables(cp.Vars), Observer: obs},
			Reason:   reason,
			Messages: cp.Messages,
		})
	}
	t.publishEnd(events.TurnAborted{Reason: reason, Code: CodeCancelled})
	if err := s.flush(ep); err != nil {
		s.log.Warn("turn: cancel: llmw.turn.aborted not stored; the turn stays paused", "turn_id", id, "err", err)
		if b, err := marshalState(st); err == nil {
			_, _ = s.storeState(ctx, id, b, rev, 0)
		}
		return
	}
	end.Seq, end.Checkpoint = ep.Seq(), nil
	if b, err := json.Marshal(&end); err == nil {
		_, _ = s.storeState(ctx, id, b, rev, s.cfg.FinishedTTL)
	}
}

// maxOrphanCancels bounds Service.orphanCancels: a flood of cancels for
// running turns cannot grow a replica's memory without end.
const maxOrphanCancels = 4096

// rememberOrphanCancel keeps a cancel of a turn whose state says running
// but that no replica runs here, for the replica that picks it up.
func (s *Service) rememberOrphanCancel(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.orphanCancels) >= maxOrphanCancels {
		for k, at := range s.orphanCancels {
			if time.Since(at) >= s.cfg.CancelTTL || len(s.orphanCancels) >= maxOrphanCancels {
				delete(s.orphanCancels, k)
			}
		}
	}
	s.orphanCancels[id] = time.Now()
}
