package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// onCancel handles P.turn.cancel.<id> on every replica: the one running
// the turn cancels it. The rest of a cancel is onQueuedCancel's.
func (s *Service) onCancel(m *nats.Msg) {
	id := events.LastToken(m.Subject)
	if !events.ValidToken(id) {
		return
	}
	s.cancelHere(id)
}

// cancelHere cancels the run of turn id on this replica, if there is one.
func (s *Service) cancelHere(id string) bool {
	s.mu.Lock()
	t := s.running[id]
	if t != nil {
		t.life.cancelRequested = true
	}
	s.mu.Unlock()
	if t != nil {
		t.cancel(s.cancelCause(id))
	}
	return t != nil
}

// onQueuedCancel handles P.turn.cancel.> in the queue group ServiceName,
// so that one replica answers each cancel: a subject that names no
// single turn (more tokens after cancel, or one that is no turn id) is
// answered with llmw.turn.rejected (invalid_request) on
// P.turn.rejected._; a cancel of a turn this replica does not run is
// settled through the turn's state (cancelIdle).
func (s *Service) onQueuedCancel(m *nats.Msg) {
	if m.Header.Get(events.HeaderCancelForwardedBy) != "" {
		return // settled by the replica that forwarded it (forwardCancel)
	}
	id, ok := strings.CutPrefix(m.Subject, s.subjects.TurnCancel(""))
	if !ok || !events.ValidToken(id) {
		s.publishRejected(events.TurnRejected{Request: events.TypeTurnCancel, Code: events.RejectInvalidRequest,
			Reason: fmt.Sprintf("the cancel subject %q names no single turn: publish a cancel to %s, one turn id and no wildcard", m.Subject, s.subjects.TurnCancel("<turn_id>"))})
		return
	}
	// Whichever of the two handlers comes first cancels a run here; the
	// run settles a cancel it did not apply when it ends (unregister).
	if !s.cancelHere(id) {
		s.settleCancel(id)
	}
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

// cancelAttempts bounds how often cancelIdle looks at the state again
// after a write that conflicted (the turn started meanwhile).
const cancelAttempts = 3

// cancelIdle settles a cancel of a turn this replica does not run, by
// the turn's state (read from the leader):
//
//   - none: the cancel may have overtaken its submit (cancels are core
//     NATS, submits wait in a stream). It is written as the turn's state
//     (StatusCancelled, expiring after Config.CancelTTL), so that the
//     submit, on whichever replica, ends at once with llmw.turn.aborted,
//     and answered with llmw.turn.rejected (unknown_turn).
//   - running: its replica runs it and cancels it; if that replica died,
//     the one that takes the turn over applies the cancel, which is
//     written as the turn's cancel request (putCancelRequest) for it.
//   - paused: the turn is aborted (abortPaused; its on_abort hooks run).
//   - ended, or cancelled before it started: answered with
//     llmw.turn.rejected (turn_ended, or unknown_turn), nothing written.
//
// A write that conflicts (the turn started, or another replica aborted
// it) has the state read again.
func (s *Service) cancelIdle(ctx context.Context, id string) {
	for attempt := 1; attempt <= cancelAttempts; attempt++ {
		st, rev, err := s.leaderState(ctx, id)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			reason := fmt.Sprintf("no turn %q is running or paused", id)
			if s.cfg.CancelTTL > 0 {
				tomb := State{Version: StateVersion, Status: StatusCancelled, Owner: s.cfg.Instance,
					Reason: "the turn was cancelled before it started", Code: CodeCancelled, Updated: time.Now().UTC()}
				b, _ := json.Marshal(&tomb)
				if _, err := s.casState(ctx, id, b, 0, s.cfg.CancelTTL); isConflict(err) {
					continue // the turn just started
				} else if err != nil {
					s.log.Warn("turn: cancel: record the cancel of a turn that has not started", "turn_id", id, "err", err)
					return
				}
				reason += fmt.Sprintf("; a submit of it within %s ends at once with llmw.turn.aborted (the cancel may have overtaken it)", s.cfg.CancelTTL)
			}
			s.publishRejected(events.TurnRejected{TurnID: id, Request: events.TypeTurnCancel, Code: events.RejectUnknownTurn, Reason: reason})
			return
		case err != nil:
			s.log.Warn("turn: cancel: read checkpoint", "turn_id", id, "err", err)
			return
		case st.Status == StatusPaused && st.Checkpoint != nil:
			s.cancelChildren(st)
			if s.abortPaused(ctx, id, st, rev, "the turn was cancelled while paused: "+s.cancelCause(id).Error()) {
				continue // a resume or another replica was first
			}
			return
		case st.Status == StatusRunning:
			s.cancelChildren(st)
			s.putCancelRequest(ctx, id)
			return
		case st.Status == StatusCancelled:
			s.publishRejected(events.TurnRejected{TurnID: id, Request: events.TypeTurnCancel, Code: events.RejectUnknownTurn,
				Reason: fmt.Sprintf("no turn %q is running or paused; it was already cancelled before it started", id)})
			return
		case st.Status.Finished():
			s.publishRejected(events.TurnRejected{TurnID: id, Request: events.TypeTurnCancel, Code: events.RejectTurnEnded, Status: string(st.Status),
				Reason: fmt.Sprintf("turn %q already ended (%s): there is nothing to cancel", id, st.Status)})
			return
		default:
			s.log.Warn("turn: cancel: a state that cannot be cancelled", "turn_id", id, "status", st.Status)
			return
		}
	}
}

// cancelKey is the KV key of turn id's cancel request: the turn's key
// and a token no turn's key has (kvKey never makes a dot).
func cancelKey(id string) string { return kvKey(id) + ".cancel" }

// putCancelRequest records the cancel of a running turn that this
// replica does not run, for the replica that takes the turn over if its
// own replica died (takeCancelRequest): in LLMW_TURN_STATE under
// cancelKey, expiring after Config.CancelTTL, so that it outlives this
// replica and reaches any other. Then it forwards the cancel to the
// replica running the turn (forwardCancel).
func (s *Service) putCancelRequest(ctx context.Context, id string) {
	if s.cfg.CancelTTL > 0 {
		rec := State{Version: StateVersion, Status: StatusCancelled, Owner: s.cfg.Instance,
			Reason: s.cancelCause(id).Error(), Code: CodeCancelled, Updated: time.Now().UTC()}
		b, _ := json.Marshal(&rec)
		// A conflict: a cancel of the turn is recorded already.
		if _, err := s.casKey(ctx, cancelKey(id), b, 0, s.cfg.CancelTTL); err != nil && !isConflict(err) {
			s.log.Warn("turn: cancel: record the cancel of a running turn", "turn_id", id, "err", err)
		}
	}
	s.forwardCancel(id)
}

// forwardCancel publishes the cancel of turn id again, marked
// HeaderCancelForwardedBy, for the replica running the turn (onCancel).
// That replica may have missed the client's cancel: it arrives there
// before the replica registers the run, and this one reads the turn's
// state as running, which the run writes only after it registered. The
// forwarded cancel, published after that read, finds the run registered.
func (s *Service) forwardCancel(id string) {
	m := nats.NewMsg(s.subjects.TurnCancel(id))
	m.Header.Set(events.HeaderCancelForwardedBy, s.cfg.Instance)
	if err := s.nc.PublishMsg(m); err != nil {
		s.log.Warn("turn: cancel: forward the cancel to the turn's replica", "turn_id", id, "err", err)
		s.cancelHere(id)
	}
}

// takeCancelRequest says whether the turn that a run takes over was
// cancelled while no replica ran it (putCancelRequest), within
// Config.CancelTTL.
func (s *Service) takeCancelRequest(id string) bool {
	if s.cfg.CancelTTL <= 0 {
		return false
	}
	ctx, cancel := kvContext(s.root)
	defer cancel()
	b, _, err := jsread.KVLast(ctx, s.nc, s.pub.APIPrefix(), events.BucketTurnState, cancelKey(id))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			s.log.Warn("turn: read the cancel request of a turn taken over", "turn_id", id, "err", err)
		}
		return false
	}
	var rec State
	return json.Unmarshal(b, &rec) == nil && time.Since(rec.Updated) < s.cfg.CancelTTL
}

// abortPaused ends a paused turn with llmw.turn.aborted (code cancelled)
// and says whether a resume or another replica was first (its first write
// conflicted). The aborted state is written first, at revision rev, so
// that a resume or another replica that was first wins; it keeps the checkpoint until
// the event is stored. Then the turn's on_abort hooks run and the event is
// published. Once it is stored the checkpoint goes; when it cannot be
// stored the paused state is written back, so that the state never says
// aborted without the event and a later cancel or resume finds the turn
// as it was.
func (s *Service) abortPaused(ctx context.Context, id string, st *State, rev uint64, reason string) (lost bool) {
	now := time.Now().UTC()
	session := ""
	if st.Request != nil {
		session = st.Request.SessionID
	}
	t := s.endingRun(id, session)
	ep := t.ep
	end := *st
	end.Status, end.Owner, end.Reason, end.Code, end.Updated = StatusAborted, s.cfg.Instance, reason, CodeCancelled, now
	b, err := marshalState(&end)
	if err != nil {
		return false
	}
	if rev, err = s.casState(ctx, id, b, rev, s.cfg.FinishedTTL); err != nil {
		return isConflict(err) // a resume or another replica was first
	}
	s.cancelRemoteOf(st)
	cp := st.Checkpoint
	if s.cfg.Hooks != nil {
		if _, err := s.loadCheckpoint(ctx, st); err != nil {
			s.log.Warn("turn: cancel: read the paused turn's transcript for on_abort", "turn_id", id, "err", err)
		}
	}
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
			_, _ = s.casState(ctx, id, b, rev, 0)
		}
		return false
	}
	end.Seq, end.Checkpoint = ep.Seq(), nil
	if b, err := json.Marshal(&end); err == nil {
		_, _ = s.casState(ctx, id, b, rev, s.cfg.FinishedTTL)
	}
	return false
}
