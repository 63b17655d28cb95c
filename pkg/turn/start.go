package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/media"
	"github.com/llmworker/llmworker/pkg/worker"
)

// abortCancelled ends the submit of a turn id that was cancelled before
// the submit arrived: llmw.turn.aborted (cancelled) is the turn's only
// event, and the state records the end. A final write that fails (for
// longer than Config.RetryTimeout) leaves the end to the request's next
// delivery, which finds the event stored and only writes the state.
func (s *Service) abortCancelled(t *turnRun, req *events.TurnRequest, rev uint64, dg string) answer {
	t.session = req.SessionID
	t.ep = s.turnEvents(t.id, t.session)
	t.w.rev.Store(rev)
	stripped := *req
	stripped.Messages = []events.Message{}
	t.base = State{Version: StateVersion, Request: &stripped, RequestDigest: dg}
	reason := fmt.Sprintf("the turn was cancelled (%s) before it started", s.subjects.TurnCancel(t.id))
	// A turn cancelled before it started has no event but this one: one
	// stored already was published by an earlier delivery. (Where reading
	// the turn's last event failed, the fence refuses a second one.)
	if t.ep.Seq() == 0 {
		t.publishEnd(events.TurnAborted{Reason: reason, Code: CodeCancelled})
		if t.flush() != nil {
			return retry
		}
	}
	return afterWrite(t.writeEndOnce(StatusAborted, reason, CodeCancelled), ackAnswer)
}

// fresh starts a new turn and returns the request's answer; again means
// the state appeared meanwhile (the caller dispatches again).
func (s *Service) fresh(t *turnRun, req *events.TurnRequest, dg string) (a answer, again bool) {
	t.session = req.SessionID
	t.ep = s.turnEvents(t.id, t.session)
	if a, stop := s.startAgent(t, req, dg); stop {
		return a, false
	}
	// The fallback list is fixed when the turn starts, with the request
	// kept in its state: a replica that continues the turn, whatever its
	// own default, tries the same models.
	req.FallbackModels = s.fallbackModels(req)
	stripped := *req
	stripped.Messages = []events.Message{} // in the checkpoint; [] keeps the value valid against the turn request schema
	t.base = State{Version: StateVersion, Request: &stripped, RequestDigest: dg, SubAgents: t.children.pinned, Remote: t.children.remote}

	tools, err := s.selectTools(s.root, req.Tools)
	if err != nil {
		return s.failEarly(t, CodeUnknownTool, err), false
	}
	var sv sessionView
	if t.session != "" {
		var err error
		sv, err = s.sessionStart(t.session)
		switch {
		case errors.Is(err, ErrCorruptSession), transcriptLost(err):
			// Redelivering the request would find the same value.
			return s.failEarly(t, CodeInternal, err), false
		case err != nil:
			s.log.Warn("turn: read session", "session_id", t.session, "err", err)
			return retry, false
		}
	}
	t.tx.sess, t.tx.base, t.tx.start, t.tx.seqs, t.tx.compaction = sv.ref, sv.base, sv.start, sv.seqs, sv.compaction
	t.base.SessionPrefix, t.base.SessionCompaction = sv.ref.Len, sv.config
	kctx, cancel := context.WithTimeout(s.root, mediaTimeout)
	err = s.offloadMedia(kctx, req.Messages)
	cancel()
	switch {
	case errors.Is(err, media.ErrTooLarge):
		return s.failEarly(t, CodeTooLarge, err), false
	case err != nil:
		s.log.Warn("turn: store media", "turn_id", t.id, "err", err)
		return retry, false
	}
	t.obs.input = req.Messages
	// The session's originals from its compaction's To on, then the
	// request's messages.
	msgs := make([]events.Message, 0, len(sv.msgs)+len(req.Messages))
	msgs = append(append(msgs, sv.msgs...), req.Messages...)
	cp := &worker.Checkpoint{Version: worker.CheckpointVersion, TurnID: t.id, SessionID: t.session, Phase: worker.PhaseModel, Messages: msgs,
		Base: sv.base, Compaction: sv.compaction}
	st := t.base
	st.Status, st.Owner, st.Checkpoint, st.Updated = StatusRunning, s.cfg.Instance, cp, time.Now().UTC()
	// The input goes to the turn's transcript before the state that
	// names it is created. A new turn's subject is empty but for a run
	// of the id that stopped before it created the state, whose items
	// make the append conflict and read the tail.
	t.tx.tailKnown = true
	b, err := t.checkpointState(&st)
	switch {
	case errors.Is(err, ErrTooLarge):
		return s.failEarly(t, CodeTooLarge, err), false
	case err != nil:
		s.log.Warn("turn: store the turn's input", "turn_id", t.id, "err", err)
		return retry, false
	}
	kctx, cancel = kvContext(s.root)
	rev, err := s.casState(kctx, t.id, b, 0, 0)
	cancel()
	if f, ok := afterStateCreated.load(); ok && err == nil {
		err = f(t.id)
	}
	if isConflict(err) {
		return leave, true
	}
	if err != nil {
		s.log.Warn("turn: create checkpoint", "turn_id", t.id, "err", err)
		return retry, false
	}
	t.w.rev.Store(rev)
	if t.children.remote != nil {
		return t.runRemote(cp, true), false
	}
	w, err := s.newWorker(t, req, tools)
	if err != nil {
		return s.failRun(t, workerCode(err), err), false
	}
	res, err := w.RunAfter(t.ctx, sv.base, msgs, sv.compaction)
	return t.finish(res, err), false
}

// failEarly ends a turn that cannot start (unknown tool, too large): it
// publishes llmw.turn.failed, stores the failed state (so a redelivery does
// nothing) and terminates the request.
func (s *Service) failEarly(t *turnRun, code string, err error) answer {
	t.publishEnd(events.TurnFailed{Reason: err.Error(), Code: code})
	if t.flush() != nil {
		// Not stored (and so not written to the state): the next
		// delivery publishes it, unless another replica's events for the
		// id fenced it out (lost decides).
		if t.life.load() == phaseHandedOff {
			return retry
		}
		return leave
	}
	st := t.base
	st.Status, st.Owner, st.Seq, st.Reason, st.Code, st.Updated = StatusFailed, s.cfg.Instance, t.ep.Seq(), err.Error(), code, time.Now().UTC()
	if b, merr := json.Marshal(&st); merr == nil {
		kctx, cancel := kvContext(s.root)
		_, _ = s.casState(kctx, t.id, b, 0, s.cfg.FinishedTTL)
		cancel()
	}
	return termWith(code)
}

// failRun ends a turn that has a state but cannot go on.
func (s *Service) failRun(t *turnRun, code string, err error) answer {
	t.publishEnd(events.TurnFailed{Reason: err.Error(), Code: code})
	if t.flush() != nil {
		return t.end()
	}
	return afterWrite(t.writeEnd(StatusFailed, err.Error(), code), termWith(code))
}

// finish acts on the worker's result: final state, then the request's
// answer.
func (t *turnRun) finish(res *worker.Result, err error) answer {
	t.children.tree.release()
	// The end is fenced: the checkpoints are stored, and the events.
	if t.fence() != nil || t.flush() != nil {
		return t.end()
	}
	if err != nil {
		return t.s.failRun(t, CodeInternal, fmt.Errorf("the turn could not be continued: %w", err))
	}
	var werr error
	tooLarge, override := t.ending.load()
	switch res.Status {
	case worker.StatusPaused:
		// The paused state was written by the checkpoint; a resume request
		// continues it.
	case worker.StatusCompleted:
		if override != nil {
			werr = t.writeEnd(StatusFailed, override.Reason, override.Code)
			break
		}
		werr = t.writeEnd(StatusCompleted, "", "")
	case worker.StatusAborted:
		werr = t.writeEnd(StatusAborted, res.Reason, res.Code)
	default:
		reason, code := res.Reason, res.Code
		if tooLarge != nil {
			reason, code = tooLarge.Error(), CodeTooLarge
		}
		werr = t.writeEnd(StatusFailed, reason, code)
	}
	return afterWrite(werr, ackAnswer)
}

// afterWrite is the request's answer once a write of the turn's state
// (a claim, or the end stored in its events) returned err: done (an ack,
// or a term for a failure) when it was stored; leave after a conflict,
// since the replica that wrote the state answers; and when the write
// failed (the bucket took no write for RetryTimeout), retry, so that the
// request's next delivery claims the turn again or records the end
// (takeOver finds it in its scan; abortCancelled, its one event stored)
// instead of the state saying running for good.
func afterWrite(err error, done answer) answer {
	switch {
	case err == nil:
		return done
	case isConflict(err):
		return leave
	}
	return retry
}

// end is the answer at the end of a run stopped early: its phase's
// (runPhase.answer).
func (t *turnRun) end() answer { return t.life.load().answer() }
