package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
	t.rev.Store(rev)
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
			return nakAfter(time.Second)
		}
	}
	return t.answerEnd(t.writeFinal(StatusAborted, reason, CodeCancelled), ackAnswer)
}

// fresh starts a new turn and returns the request's answer; again means
// the state appeared meanwhile (the caller dispatches again).
func (s *Service) fresh(t *turnRun, req *events.TurnRequest, dg string) (a answer, again bool) {
	t.session = req.SessionID
	t.ep = s.turnEvents(t.id, t.session)
	// The fallback list is fixed when the turn starts, with the request
	// kept in its state: a replica that continues the turn, whatever its
	// own default, tries the same models.
	req.FallbackModels = s.fallbackModels(req)
	stripped := *req
	stripped.Messages = []events.Message{} // in the checkpoint; [] keeps the value valid against the turn request schema
	t.base = State{Version: StateVersion, Request: &stripped, RequestDigest: dg}

	tools, err := s.selectTools(s.root, req.Tools)
	if err != nil {
		return s.failEarly(t, CodeUnknownTool, err), false
	}
	var prefix []events.Message
	if t.session != "" {
		kctx, cancel := context.WithTimeout(s.root, kvTimeout)
		sess, _, err := readSession(kctx, s.nc, s.pub.apiPrefix, t.session)
		cancel()
		switch {
		case err == nil:
			prefix = sess.Messages
		case errors.Is(err, ErrCorruptSession):
			// Redelivering the request would find the same value.
			return s.failEarly(t, CodeInternal, err), false
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			s.log.Warn("turn: read session", "session_id", t.session, "err", err)
			return nakAfter(time.Second), false
		}
	}
	t.base.SessionPrefix = len(prefix)
	kctx, cancel := context.WithTimeout(s.root, mediaTimeout)
	err = s.offloadMedia(kctx, req.Messages)
	cancel()
	switch {
	case errors.Is(err, media.ErrTooLarge):
		return s.failEarly(t, CodeTooLarge, err), false
	case err != nil:
		s.log.Warn("turn: store media", "turn_id", t.id, "err", err)
		return nakAfter(time.Second), false
	}
	t.input = req.Messages
	msgs := make([]events.Message, 0, len(prefix)+len(req.Messages))
	msgs = append(append(msgs, prefix...), req.Messages...)
	cp := &worker.Checkpoint{Version: worker.CheckpointVersion, TurnID: t.id, SessionID: t.session, Phase: worker.PhaseModel, Messages: msgs}
	st := t.base
	st.Status, st.Owner, st.Checkpoint, st.Updated = StatusRunning, s.cfg.Instance, cp, time.Now().UTC()
	b, err := s.encodeState(&st)
	if err != nil {
		return s.failEarly(t, CodeTooLarge, err), false
	}
	kctx, cancel = context.WithTimeout(s.root, kvTimeout)
	rev, err := s.storeState(kctx, t.id, b, 0, 0)
	cancel()
	if isConflict(err) {
		return leave, true
	}
	if err != nil {
		s.log.Warn("turn: create checkpoint", "turn_id", t.id, "err", err)
		return nakAfter(time.Second), false
	}
	t.rev.Store(rev)
	w, err := s.newWorker(t, req, tools)
	if err != nil {
		return s.failRun(t, workerCode(err), err), false
	}
	res, err := w.Run(t.ctx, msgs)
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
		if t.nak.Load() {
			return nakAfter(time.Second)
		}
		return leave
	}
	st := t.base
	st.Status, st.Owner, st.Seq, st.Reason, st.Code, st.Updated = StatusFailed, s.cfg.Instance, t.ep.Seq(), err.Error(), code, time.Now().UTC()
	if b, merr := json.Marshal(&st); merr == nil {
		kctx, cancel := context.WithTimeout(s.root, kvTimeout)
		_, _ = s.storeState(kctx, t.id, b, 0, s.cfg.FinishedTTL)
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
	return t.answerEnd(t.recordEnd(StatusFailed, err.Error(), code), termWith(code))
}
