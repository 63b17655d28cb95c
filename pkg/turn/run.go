package turn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/jsread"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/fence"
	"github.com/llmworker/llmworker/pkg/media"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// kvTimeout bounds one KV operation of the service.
const kvTimeout = 10 * time.Second

// turnRun is one turn being handled by this replica: its request message,
// its context, its event publisher and the revision of its checkpoint.
type turnRun struct {
	s       *Service
	id      string
	session string
	msg     acker
	ctx     context.Context
	cancelF context.CancelCauseFunc

	ep *EventPublisher
	// fenceSeq is the seq of the last event published that the run's
	// fence waits for: every event but llmw.tool.started (emit).
	fenceSeq atomic.Uint64
	base     State // request and session prefix of the checkpoints
	// rev is the revision of the state this run wrote last.
	rev atomic.Uint64
	// pending is the checkpoint being written while the model call after
	// it is made (checkpoint); nil when none was.
	pending atomic.Pointer[pendingWrite]
	step    atomic.Int64

	// silenced: this run must publish and write nothing more (another
	// replica owns the turn, or it was handed off by Stop); nak says the
	// request is to be negatively acknowledged at the end.
	silenced atomic.Bool
	nak      atomic.Bool
	paused   atomic.Bool // the run ended with the turn paused

	// cancelRequested: P.turn.cancel arrived while the run was registered
	// (guarded by Service.mu).
	cancelRequested bool
	// cancelApplied: the run ended the turn as cancelled (writeFinal with
	// CodeCancelled), which answers the cancel.
	cancelApplied atomic.Bool

	// claimed: recover published llmw.turn.started (resumed) itself, so
	// the worker's is dropped; results and started: calls whose
	// llmw.tool.result / llmw.tool.started the previous owner published,
	// not published again.
	claimed          bool
	results, started map[string]bool

	// input is the request's messages, for the turn's first
	// llmw.turn.started (nil for a turn picked up from a checkpoint).
	input []events.Message

	mu       sync.Mutex
	tooLarge error             // a checkpoint was too large
	override *events.TurnEnded // the completed event could not be published
}

func (t *turnRun) currentMsg() acker { return t.msg }

func (t *turnRun) cancel(cause error) { t.cancelF(cause) }

// handOff stops the run without a trace: nothing more is published or
// written, and the request is negatively acknowledged so another replica
// resumes the turn from its checkpoint.
func (t *turnRun) handOff(cause error) {
	t.silenced.Store(true)
	t.nak.Store(true)
	t.cancelF(cause)
}

// flush waits until the turn's events are stored (see
// EventPublisher.Flush): before a checkpoint, a side effect outside the
// events stream and the request's acknowledgement. An error silences the
// run (lost).
func (t *turnRun) flush() error { return t.flushTo(math.MaxUint64) }

// flushTo is flush for the events up to seq (EventPublisher.FlushTo).
func (t *turnRun) flushTo(seq uint64) error {
	ctx, cancel := context.WithTimeout(t.s.root, t.s.pub.retry+kvTimeout)
	defer cancel()
	err := t.ep.FlushTo(ctx, seq)
	if err != nil {
		t.lost(err)
	}
	return err
}

// fence is the run's fence.Func: the events published so far are stored,
// but for the llmw.tool.started of the calls about to go out. Those need
// not be: a call runs only once the checkpoint that lists it is stored
// (written with its expected revision, after a flush), so a replica that
// claimed the turn since continues from that checkpoint and publishes the
// same call, which the duplicate window keeps once
// (docs/architecture.md#fencing). Waiting for them would put a round trip
// to the events stream between every step's checkpoint and its calls.
func (t *turnRun) fence() error {
	if err := t.settle(); err != nil {
		return err
	}
	if t.silenced.Load() {
		return ErrOwnershipLost
	}
	if t.ep == nil {
		return nil
	}
	return t.flushTo(t.fenceSeq.Load())
}

// emit publishes ev and, unless it is a llmw.tool.started, records its
// seq as the one the run's fence waits for.
func (t *turnRun) emit(ev events.WorkerEvent) (uint64, error) {
	seq, err := t.ep.Publish(ev)
	if _, started := ev.(events.ToolStarted); err == nil && !started {
		t.fenceSeq.Store(seq)
	}
	return seq, err
}

// lost ends a run whose events were not stored: refused because another
// replica published for the turn (ErrFenced: the request is negatively
// acknowledged only if the checkpoint still says this run owns the turn —
// the one that published was a stale owner), or not acknowledged in time
// (handed off). Nothing more is published or written.
func (t *turnRun) lost(err error) {
	if t.silenced.Swap(true) {
		return
	}
	if errors.Is(err, ErrFenced) {
		owns := t.owns()
		t.s.log.Info("turn: worker events refused; this run stops", "turn_id", t.id, "still_owner", owns, "err", err)
		t.nak.Store(owns)
	} else {
		t.s.log.Warn("turn: worker events not stored; the turn is handed off", "turn_id", t.id, "err", err)
		t.nak.Store(true)
	}
	t.cancelF(err)
}

// owns says whether the turn's checkpoint is still the one this run wrote.
func (t *turnRun) owns() bool {
	ctx, cancel := context.WithTimeout(t.s.root, kvTimeout)
	defer cancel()
	_, rev, err := t.s.leaderState(ctx, t.id)
	return err == nil && rev == t.rev.Load()
}

// handle runs one delivered request to its end (or hand-off).
func (s *Service) handle(m jetstream.Msg) {
	defer s.turns.Done()
	defer func() { <-s.sem }()
	// ack replaces m once the request is read, so that a run does not
	// keep the request's message (requestAck).
	var ack acker = m
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("turn: panic while handling a request", "panic", p, "stack", string(debug.Stack()))
			_ = ack.Nak()
		}
	}()
	env, err := events.DecodeEnvelope(m.Headers(), m.Data())
	if err != nil {
		s.reject(m, nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err))
		return
	}
	switch env.Type {
	case events.TypeTurnSubmit:
		req, err := events.DecodeData[events.TurnRequest](env)
		if err != nil {
			s.reject(m, env, fmt.Errorf("%w: %w", ErrInvalidRequest, err))
			return
		}
		ack = newRequestAck(s.nc, m)
		s.process(ack, env, &req, nil, digest(env.Data))
	case events.TypeTurnResume:
		req, err := events.DecodeData[events.ResumeRequest](env)
		if err != nil {
			s.reject(m, env, fmt.Errorf("%w: %w", ErrInvalidRequest, err))
			return
		}
		ack = newRequestAck(s.nc, m)
		s.process(ack, env, nil, &req, "")
	default:
		s.reject(m, env, fmt.Errorf("%w: CloudEvent type %q is neither %s nor %s", ErrInvalidRequest, env.Type,
			events.TypeTurnSubmit, events.TypeTurnResume))
	}
}

// reject ends a request that cannot be read: llmw.turn.rejected
// (invalid_request) on P.turn.rejected.<turn_id>, with the turn id taken
// from the body, the CloudEvent or else the Nats-Msg-Id header ("_" when
// there is none a subject can carry). A submit of an id that has no turn
// also gets llmw.turn.failed on the turn's events, so a UI that waits there
// ends too (an existing turn's events are not disturbed). The message is
// terminated, never redelivered.
func (s *Service) reject(m jetstream.Msg, env *events.Envelope, err error) {
	var ids struct {
		TurnID    string `json:"turn_id"`
		SessionID string `json:"session_id"`
	}
	data := m.Data()
	if env != nil {
		data = env.Data
	}
	_ = json.Unmarshal(data, &ids)
	if ids.TurnID == "" && env != nil {
		ids.TurnID = env.TurnID
		if ids.TurnID == "" {
			ids.TurnID = env.Subject
		}
	}
	if ids.TurnID == "" {
		ids.TurnID = m.Headers().Get(jetstream.MsgIDHeader)
	}
	if env != nil && ids.SessionID == "" {
		ids.SessionID = env.SessionID
	}
	if !events.ValidToken(ids.SessionID) {
		ids.SessionID = ""
	}
	rj := events.TurnRejected{TurnID: ids.TurnID, Code: events.RejectInvalidRequest, Reason: err.Error()}
	if env != nil {
		rj.Request = env.Type
	}
	if events.ValidToken(ids.TurnID) && (env == nil || env.Type != events.TypeTurnResume) {
		ctx, cancel := context.WithTimeout(s.root, kvTimeout)
		_, _, gerr := s.leaderState(ctx, ids.TurnID)
		cancel()
		if errors.Is(gerr, jetstream.ErrKeyNotFound) {
			ep := s.turnEvents(ids.TurnID, ids.SessionID)
			_, perr := ep.Publish(events.TurnFailed{Reason: err.Error(), Code: CodeInvalidRequest})
			if perr == nil {
				perr = s.flush(ep)
			}
			if perr != nil {
				s.log.Warn("turn: publish failed event", "turn_id", ids.TurnID, "err", perr)
			}
		}
	}
	s.rejectRequest(m, rj)
}

// answerExisting answers a request for a turn that exists and that the
// request does not run: a resume of a turn that is not paused, or a submit
// of an id that has a turn. A submit with the same data as the turn's (a
// retried publish, a redelivery) is acknowledged without an answer: the
// turn's events answer it.
func (s *Service) answerExisting(m acker, id string, st *State, resume bool, dg string) {
	switch {
	case resume:
		s.rejectRequest(m, events.TurnRejected{TurnID: id, Request: events.TypeTurnResume, Code: events.RejectNotPaused, Status: string(st.Status),
			Reason: fmt.Sprintf("turn %q is %s, not paused: a resume applies to a paused turn once (a resume sent twice finds it running or ended)", id, st.Status)})
	case dg != "" && dg == st.RequestDigest:
		_ = m.Ack()
	default:
		reason := fmt.Sprintf("turn %q exists (%s) and was submitted with other data: a turn id names one turn, so choose a new id", id, st.Status)
		if st.Status.Finished() && s.cfg.FinishedTTL > 0 {
			reason += fmt.Sprintf(" (the id is free again %s after the turn ended)", s.cfg.FinishedTTL)
		}
		s.rejectRequest(m, events.TurnRejected{TurnID: id, Request: events.TypeTurnSubmit, Code: events.RejectTurnExists, Status: string(st.Status), Reason: reason})
	}
}

// register makes t the running turn of its id; false when this replica
// runs the turn already (a duplicate delivery).
func (s *Service) register(t *turnRun) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.running[t.id]; dup {
		return false
	}
	s.running[t.id] = t
	if at, ok := s.orphanCancels[t.id]; ok {
		delete(s.orphanCancels, t.id)
		if time.Since(at) < s.cfg.CancelTTL {
			// The turn was cancelled while no replica ran it: it ends as
			// soon as this run starts it.
			t.cancelRequested = true
			t.cancel(s.cancelCause(t.id))
		}
	}
	return true
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

func (s *Service) unregister(t *turnRun) {
	s.mu.Lock()
	if s.running[t.id] == t {
		delete(s.running, t.id)
	}
	cancelled := t.cancelRequested
	s.mu.Unlock()
	t.cancelF(nil)
	if cancelled && !t.cancelApplied.Load() {
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

// resumeRetryDelay is how long a resume waits when it arrives while this
// replica still handles its turn.
const resumeRetryDelay = 100 * time.Millisecond

// resumeWhileBusy answers a resume that arrives while this replica still
// handles its turn. If the state says paused, the run is only finishing the
// pause the resume answers (the paused state is written, and
// llmw.turn.paused published, before the run acknowledges and lets go):
// look again in a moment. Otherwise the turn really runs and is not paused.
func (s *Service) resumeWhileBusy(m acker, id string) {
	kctx, cancel := context.WithTimeout(s.root, kvTimeout)
	st, _, err := s.leaderState(kctx, id)
	cancel()
	switch {
	case err == nil && st.Status == StatusPaused:
		_ = m.NakWithDelay(resumeRetryDelay)
	case err == nil:
		s.answerExisting(m, id, st, true, "")
	default:
		_ = m.NakWithDelay(time.Second)
	}
}

// process dispatches a decoded request on the turn's checkpoint: none →
// a fresh run (a resume: unknown_turn); running → continue from the
// checkpoint when the request is redelivered (its replica died or
// stopped), else answerExisting; paused → resume (a submit:
// answerExisting); ended → answerExisting; cancelled before it started →
// the submit ends at once (abortCancelled).
func (s *Service) process(m acker, env *events.Envelope, submit *events.TurnRequest, resume *events.ResumeRequest, dg string) {
	id := ""
	if submit != nil {
		id = submit.TurnID
	} else {
		id = resume.TurnID
	}
	// The request's trace context (telemetry.Extract) parents the turn's
	// spans; a continued turn's checkpoint keeps it (worker.Checkpoint).
	ctx, cancel := context.WithCancelCause(telemetry.Extract(s.root, env))
	t := &turnRun{s: s, id: id, msg: m, cancelF: cancel}
	// Remote tool calls and hook requests go out only once the turn's
	// events are stored, fenced: proof that the turn is still this run's.
	t.ctx = fence.With(ctx, func(context.Context) error { return t.fence() })
	if !s.register(t) {
		cancel(nil)
		if resume != nil {
			s.resumeWhileBusy(m, id)
			return
		}
		s.submitWhileBusy(m, id, dg)
		return
	}
	defer s.unregister(t)

	for attempt := 0; ; attempt++ {
		st, rev, err := s.dispatchState(id, resume == nil && attempt == 0)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if resume != nil {
				s.rejectRequest(m, events.TurnRejected{TurnID: id, Request: events.TypeTurnResume, Code: events.RejectUnknownTurn,
					Reason: fmt.Sprintf("there is no turn %q to resume (it never started, or its state expired)", id)})
				return
			}
			if s.fresh(t, submit, dg) && attempt < 3 {
				continue // another replica created the turn meanwhile
			}
			return
		case err != nil:
			s.log.Warn("turn: read checkpoint", "turn_id", id, "err", err)
			_ = m.NakWithDelay(time.Second)
			return
		case st.Status == StatusCancelled:
			if resume != nil {
				s.rejectRequest(m, events.TurnRejected{TurnID: id, Request: events.TypeTurnResume, Code: events.RejectUnknownTurn,
					Reason: fmt.Sprintf("there is no turn %q to resume (it was cancelled before it started)", id)})
				return
			}
			s.abortCancelled(t, submit, rev, dg)
			return
		case st.Status.Finished():
			s.answerExisting(m, id, st, resume != nil, dg)
			return
		case st.Status == StatusPaused:
			if resume == nil {
				s.answerExisting(m, id, st, false, dg)
				return
			}
			s.resume(t, st, rev, resume)
			return
		default: // running
			// A redelivered request means the replica that ran it died or
			// stopped: continue from the checkpoint. A first delivery is
			// another request for a turn that runs elsewhere (a retried
			// submit, or a resume of a turn that is not paused): taking
			// the turn over would only repeat its work.
			if md, err := m.Metadata(); err == nil && md.NumDelivered <= 1 {
				s.answerExisting(m, id, st, resume != nil, dg)
				return
			}
			telemetry.RecordRedelivery(t.ctx, "turn", "")
			s.recover(t, st, rev)
			return
		}
	}
}

// dispatchState reads the state process dispatches on. A submit's first
// look may take the direct get (kv.Get, answered by any replica): for a
// new turn, the common case, it says there is none, and if a lagging
// replica said so wrongly the Create that follows conflicts and the next
// look goes to the leader. Whatever else it finds is read again from the
// leader, since a claim, a resume or an answer follows.
func (s *Service) dispatchState(id string, direct bool) (*State, uint64, error) {
	ctx, cancel := context.WithTimeout(s.root, kvTimeout)
	defer cancel()
	if direct {
		st, rev, err := getState(ctx, s.stateKV, id)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return st, rev, err
		}
	}
	return s.leaderState(ctx, id)
}

// submitWhileBusy answers a submit of a turn this replica runs: its own
// request delivered again is left to the run (which acknowledges it);
// another submit of the id is answered as for any existing turn.
func (s *Service) submitWhileBusy(m acker, id, dg string) {
	s.mu.Lock()
	t := s.running[id]
	s.mu.Unlock()
	if t != nil && sameMsg(t.currentMsg(), m) {
		return
	}
	kctx, cancel := context.WithTimeout(s.root, kvTimeout)
	st, _, err := s.leaderState(kctx, id)
	cancel()
	if err != nil {
		_ = m.NakWithDelay(time.Second)
		return
	}
	s.answerExisting(m, id, st, false, dg)
}

// sameMsg reports whether a and b are deliveries of one stream message.
func sameMsg(a, b acker) bool {
	if a == nil || b == nil {
		return false
	}
	ma, err1 := a.Metadata()
	mb, err2 := b.Metadata()
	return err1 == nil && err2 == nil && ma.Sequence.Stream == mb.Sequence.Stream
}

// abortCancelled ends the submit of a turn id that was cancelled before
// the submit arrived: llmw.turn.aborted (cancelled) is the turn's only
// event, and the state records the end. A final write that fails (for
// longer than Config.RetryTimeout) leaves the end to the request's next
// delivery, which finds the event stored and only writes the state.
func (s *Service) abortCancelled(t *turnRun, req *events.TurnRequest, rev uint64, dg string) {
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
		t.publish(events.TurnAborted{Reason: reason, Code: CodeCancelled})
		if t.flush() != nil {
			_ = t.msg.NakWithDelay(time.Second)
			return
		}
	}
	t.answerEnd(t.writeFinal(StatusAborted, reason, CodeCancelled), func() { _ = t.msg.Ack() })
}

// fresh starts a new turn; true means the state appeared meanwhile (the
// caller dispatches again).
func (s *Service) fresh(t *turnRun, req *events.TurnRequest, dg string) bool {
	t.session = req.SessionID
	t.ep = s.turnEvents(t.id, t.session)
	stripped := *req
	stripped.Messages = []events.Message{} // in the checkpoint; [] keeps the value valid against the turn request schema
	t.base = State{Version: StateVersion, Request: &stripped, RequestDigest: dg}

	tools, err := s.selectTools(s.root, req.Tools)
	if err != nil {
		return s.failEarly(t, CodeUnknownTool, err)
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
			return s.failEarly(t, CodeInternal, err)
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			s.log.Warn("turn: read session", "session_id", t.session, "err", err)
			_ = t.msg.NakWithDelay(time.Second)
			return false
		}
	}
	t.base.SessionPrefix = len(prefix)
	kctx, cancel := context.WithTimeout(s.root, mediaTimeout)
	err = s.offloadMedia(kctx, req.Messages)
	cancel()
	switch {
	case errors.Is(err, media.ErrTooLarge):
		return s.failEarly(t, CodeTooLarge, err)
	case err != nil:
		s.log.Warn("turn: store media", "turn_id", t.id, "err", err)
		_ = t.msg.NakWithDelay(time.Second)
		return false
	}
	t.input = req.Messages
	msgs := make([]events.Message, 0, len(prefix)+len(req.Messages))
	msgs = append(append(msgs, prefix...), req.Messages...)
	cp := &worker.Checkpoint{Version: worker.CheckpointVersion, TurnID: t.id, SessionID: t.session, Phase: worker.PhaseModel, Messages: msgs}
	st := t.base
	st.Status, st.Owner, st.Checkpoint, st.Updated = StatusRunning, s.cfg.Instance, cp, time.Now().UTC()
	b, err := s.encodeState(&st)
	if err != nil {
		return s.failEarly(t, CodeTooLarge, err)
	}
	kctx, cancel = context.WithTimeout(s.root, kvTimeout)
	rev, err := s.stateKV.Create(kctx, kvKey(t.id), b)
	cancel()
	if isConflict(err) {
		return true
	}
	if err != nil {
		s.log.Warn("turn: create checkpoint", "turn_id", t.id, "err", err)
		_ = t.msg.NakWithDelay(time.Second)
		return false
	}
	t.rev.Store(rev)
	w, err := s.newWorker(t, req, tools)
	if err != nil {
		s.failRun(t, workerCode(err), err)
		return false
	}
	res, err := w.Run(t.ctx, msgs)
	t.finish(res, err)
	return false
}

// failEarly ends a turn that cannot start (unknown tool, too large): it
// publishes llmw.turn.failed, stores the failed state (so a redelivery does
// nothing) and terminates the request.
func (s *Service) failEarly(t *turnRun, code string, err error) bool {
	t.publish(events.TurnFailed{Reason: err.Error(), Code: code})
	if t.flush() != nil {
		return false
	}
	st := t.base
	st.Status, st.Owner, st.Seq, st.Reason, st.Code, st.Updated = StatusFailed, s.cfg.Instance, t.ep.Seq(), err.Error(), code, time.Now().UTC()
	if b, merr := json.Marshal(&st); merr == nil {
		kctx, cancel := context.WithTimeout(s.root, kvTimeout)
		_, _ = s.storeState(kctx, t.id, b, 0, s.cfg.FinishedTTL)
		cancel()
	}
	_ = t.msg.TermWithReason(code)
	return false
}

// failRun ends a turn that has a state but cannot go on.
func (s *Service) failRun(t *turnRun, code string, err error) {
	t.publish(events.TurnFailed{Reason: err.Error(), Code: code})
	if t.flush() != nil {
		t.end()
		return
	}
	t.answerEnd(t.recordEnd(StatusFailed, err.Error(), code), func() { _ = t.msg.TermWithReason(code) })
}

// recover continues a running turn from its checkpoint: aborts for the
// blocks the previous replica left open, then worker.RunFrom (tool calls
// with stored results are not run again; the interrupted model call is made
// again).
func (s *Service) recover(t *turnRun, st *State, rev uint64) {
	t.rev.Store(rev)
	t.base = State{Version: StateVersion, Request: st.Request, RequestDigest: st.RequestDigest, SessionPrefix: st.SessionPrefix}
	if st.Request == nil || st.Checkpoint == nil {
		t.ep = s.turnEvents(t.id, "")
		s.failRun(t, CodeInternal, fmt.Errorf("the checkpoint of turn %q cannot be continued (no request or worker state)", t.id))
		return
	}
	t.session = st.Request.SessionID
	sc, err := s.scanEvents(s.root, t.session, t.id, st.Seq)
	if err != nil {
		// Without the stream's position the first publish cannot be
		// fenced right: leave the turn to a later delivery.
		s.log.Warn("turn: scan events of an interrupted turn", "turn_id", t.id, "err", err)
		_ = t.msg.NakWithDelay(time.Second)
		return
	}
	// Claim the checkpoint (one of the replicas a request may reach
	// wins), then the event stream (fences the replica that lost it).
	claim := *st
	claim.Owner, claim.Seq, claim.Updated = s.cfg.Instance, sc.pos.Seq, time.Now().UTC()
	if !t.write(&claim) {
		return
	}
	if !s.claimEvents(t, st, sc) {
		return
	}
	tools, err := s.selectTools(s.root, st.Request.Tools)
	if err != nil {
		s.failRun(t, CodeUnknownTool, err)
		return
	}
	w, err := s.newWorker(t, st.Request, tools)
	if err != nil {
		s.failRun(t, workerCode(err), err)
		return
	}
	res, err := w.RunFrom(t.ctx, st.Checkpoint)
	t.finish(res, err)
}

// claimAttempts bounds how often a replica continuing a turn publishes its
// claim again after a stale owner's event got in first.
const claimAttempts = 10

// claimEvents publishes the aborts of the blocks left open and
// llmw.turn.started (resumed), fenced on where the scan found the events
// to end: once stored, every later event of the replica that lost the
// turn is refused. A stale owner that published after the scan gets its
// event in first; the scan is then repeated (new open blocks, results, or
// the end of the turn, if the stale owner finished it) and the claim
// published again. false: the run is over (handled here).
func (s *Service) claimEvents(t *turnRun, st *State, sc scanned) bool {
	for attempt := 1; ; attempt++ {
		if sc.end != nil {
			// The previous owner ended the turn before the claim: record
			// the end and let the request go.
			status, reason, code := StatusCompleted, "", ""
			if sc.end.Type != events.TypeTurnCompleted {
				status = StatusFailed
				if sc.end.Type == events.TypeTurnAborted {
					status = StatusAborted
				}
				if te, err := events.DecodeData[events.TurnEnded](sc.end); err == nil {
					reason, code = te.Reason, te.Code
				}
			}
			t.ep = s.pub.Turn(t.id, t.session, sc.pos)
			t.answerEnd(t.writeFinal(status, reason, code), func() { _ = t.msg.Ack() })
			return false
		}
		t.ep = s.pub.Turn(t.id, t.session, sc.pos)
		t.results, t.started = sc.results, sc.started
		for _, a := range sc.open {
			_, _ = t.emit(a)
		}
		_, _ = t.emit(events.TurnStarted{TurnID: t.id, SessionID: t.session, Model: st.Request.Model, Resumed: true})
		ctx, cancel := context.WithTimeout(s.root, s.pub.retry+kvTimeout)
		err := t.ep.Flush(ctx)
		cancel()
		if err == nil {
			t.claimed = true
			return true
		}
		if !errors.Is(err, ErrFenced) || attempt == claimAttempts || !t.owns() {
			t.lost(err)
			t.end()
			return false
		}
		s.log.Info("turn: a replica that lost the turn published meanwhile; claiming again", "turn_id", t.id, "attempt", attempt)
		if sc, err = s.scanEvents(s.root, t.session, t.id, st.Seq); err != nil {
			s.log.Warn("turn: scan events of an interrupted turn", "turn_id", t.id, "err", err)
			t.silenced.Store(true)
			_ = t.msg.NakWithDelay(time.Second)
			return false
		}
	}
}

// resume continues a paused turn with the decisions of a resume request.
func (s *Service) resume(t *turnRun, st *State, rev uint64, req *events.ResumeRequest) {
	t.rev.Store(rev)
	t.base = State{Version: StateVersion, Request: st.Request, RequestDigest: st.RequestDigest, SessionPrefix: st.SessionPrefix}
	if st.Request == nil || st.Checkpoint == nil {
		t.ep = s.turnEvents(t.id, "")
		s.failRun(t, CodeInternal, fmt.Errorf("the checkpoint of turn %q cannot be resumed (no request or worker state)", t.id))
		return
	}
	t.session = st.Request.SessionID
	t.ep = s.turnEvents(t.id, t.session)
	claim := *st
	claim.Status, claim.Owner, claim.Updated = StatusRunning, s.cfg.Instance, time.Now().UTC()
	if !t.write(&claim) {
		_ = t.msg.Ack() // another replica took this resume
		return
	}
	tools, err := s.selectTools(s.root, st.Request.Tools)
	if err != nil {
		s.failRun(t, CodeUnknownTool, err)
		return
	}
	w, err := s.newWorker(t, st.Request, tools)
	if err != nil {
		s.failRun(t, workerCode(err), err)
		return
	}
	res, err := w.Resume(t.ctx, st.Checkpoint, req.Decisions, req.Messages...)
	if err != nil {
		// Nothing happened: the turn stays paused. Say so on its event
		// stream, with the reason the resume was refused.
		back := *st
		back.Owner, back.Updated = s.cfg.Instance, time.Now().UTC()
		back.Seq = t.ep.Seq() + 1
		if t.write(&back) {
			reason := fmt.Sprintf("resume rejected: %v; the turn is still paused", err)
			if st.Checkpoint.Pause != nil && st.Checkpoint.Pause.Reason != "" {
				reason += " (" + st.Checkpoint.Pause.Reason + ")"
			}
			hookName := ""
			if st.Checkpoint.Pause != nil {
				hookName = st.Checkpoint.Pause.Hook
			}
			pending := st.Checkpoint.Awaiting()
			if pending == nil {
				pending = []events.ToolCall{}
			}
			t.publish(events.TurnPaused{Reason: reason, Hook: hookName, Pending: pending})
		}
		s.log.Warn("turn: resume rejected", "turn_id", t.id, "err", err)
		_ = t.msg.TermWithReason("resume rejected")
		return
	}
	t.finish(res, nil)
}

// newWorker builds the worker of one turn.
func (s *Service) newWorker(t *turnRun, req *events.TurnRequest, tools []tool.Tool) (*worker.Worker, error) {
	maxSteps := req.MaxSteps
	if maxSteps == 0 {
		maxSteps = s.cfg.DefaultMaxSteps
	}
	retries := 0
	if p := req.MaxTurnEndRetries; p != nil {
		retries = *p
		if retries == 0 {
			retries = worker.NoRetries
		}
	}
	return worker.New(worker.Config{
		Provider:    s.provider,
		Model:       req.Model,
		System:      req.System,
		MaxTokens:   req.MaxTokens,
		Temperature: req.Temperature,
		Thinking:    req.Thinking,
		Tools:       tools,
		// nil ToolNames offers every tool of Tools: they were selected
		// by the request's patterns already.
		Hooks:                 s.cfg.Hooks,
		MaxSteps:              maxSteps,
		MaxTurnEndRetries:     retries,
		StepAttempts:          s.cfg.StepRetries + 1,
		RetryStep:             s.retryStep,
		TurnID:                t.id,
		SessionID:             t.session,
		Checkpoint:            t.checkpoint,
		CheckpointToolResults: s.cfg.CheckpointToolResults,
		Observer:              t,

		Options:             modelOptions(t, req),
		ToolChoiceEveryStep: req.ToolChoiceEveryStep,
		OutputRepairs:       outputRepairs(req),
		MaxToolResult:       s.maxToolResult(),
	})
}

// encodeState marshals a state and checks it fits into a KV value.
func (s *Service) encodeState(st *State) ([]byte, error) {
	b, err := marshalState(st)
	if err != nil {
		return nil, fmt.Errorf("turn: encode checkpoint: %w", err)
	}
	if limit := s.nc.MaxPayload(); limit > 0 && int64(len(b)) > limit-1024 {
		return nil, fmt.Errorf("%w: the checkpoint of turn %q is %d bytes (transcript of %d messages), more than the %d bytes a checkpoint may have (the NATS max payload of %d bytes less 1024 for the message's headers)",
			ErrTooLarge, st.Request.TurnID, len(b), len(st.Checkpoint.Messages), limit-1024, limit)
	}
	return b, nil
}

// update writes a state of the turn with the expected revision t.rev and
// returns the new revision. Failures that may pass (a timeout while the
// bucket elects a leader, no responders) are retried for the publisher's
// RetryTimeout; a revision conflict after such a failure is checked
// against the stored value, since the earlier attempt may have been
// stored with its acknowledgement lost.
func (t *turnRun) update(b []byte, ttl time.Duration) (uint64, error) {
	deadline := time.Now().Add(t.s.pub.retry)
	backoff, retried := 50*time.Millisecond, false
	for {
		kctx, cancel := context.WithTimeout(t.s.root, kvTimeout)
		rev, err := t.s.storeState(kctx, t.id, b, t.rev.Load(), ttl)
		cancel()
		if err == nil {
			return rev, nil
		}
		if isConflict(err) {
			if retried {
				gctx, cancel := context.WithTimeout(t.s.root, kvTimeout)
				cur, rev, gerr := jsread.KVLast(gctx, t.s.nc, t.s.pub.apiPrefix, events.BucketTurnState, kvKey(t.id))
				cancel()
				if gerr == nil && bytes.Equal(cur, b) {
					return rev, nil
				}
			}
			return 0, err
		}
		if t.s.root.Err() != nil || time.Now().Add(backoff).After(deadline) {
			return 0, err
		}
		retried = true
		t.s.log.Warn("turn: write checkpoint; retrying", "turn_id", t.id, "err", err)
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// write stores st with the expected revision; false means another replica
// owns the turn (the run is silenced) or the write failed (the request is
// left for redelivery).
func (t *turnRun) write(st *State) bool {
	_ = t.settle() // a checkpoint being written has the revision this one expects
	b, err := marshalState(st)
	if err == nil {
		var rev uint64
		rev, err = t.update(b, 0)
		if err == nil {
			t.rev.Store(rev)
			return true
		}
	}
	t.silenced.Store(true)
	if isConflict(err) {
		t.s.log.Info("turn: another replica owns the turn", "turn_id", t.id)
		return false
	}
	t.s.log.Warn("turn: write checkpoint", "turn_id", t.id, "err", err)
	_ = t.msg.NakWithDelay(time.Second)
	return false
}

// checkpoint is the worker's Checkpoint callback: the state is written
// with the expected revision at every step boundary, after a flush of the
// events it counts (its seq).
//
// The checkpoint before a model call is written while the call is made
// (pendingWrite): the call and the events it streams are all that go
// ahead of it. Neither needs it stored: a model call has no effect
// outside the turn, the events are fenced on their own, and a replica
// that continues from the checkpoint before makes the same call again.
// Everything else waits for it (settle): the next checkpoint — the one
// that lists a step's tool calls, which run only once it is stored — and
// every side effect outside the events stream (the run's fence, the
// session's transcript), and the run's end. A write that fails fails the
// run there as a checkpoint that failed at once would; meanwhile it
// silences the run and stops the model call. The model call no longer
// waits for two round trips (the flush and the write).
func (t *turnRun) checkpoint(_ context.Context, cp *worker.Checkpoint) error {
	if err := t.settle(); err != nil {
		return err
	}
	if t.silenced.Load() {
		return ErrOwnershipLost
	}
	// The events the checkpoint counts, which store flushes before it.
	seq := t.ep.Seq()
	st := t.base
	st.Status, st.Owner, st.Checkpoint, st.Seq, st.Updated = StatusRunning, t.s.cfg.Instance, cp, seq, time.Now().UTC()
	if cp.Phase == worker.PhasePaused {
		// The worker publishes llmw.turn.paused right after this.
		st.Status, st.Seq = StatusPaused, seq+1
	}
	b, err := t.s.encodeState(&st)
	if err != nil {
		t.mu.Lock()
		t.tooLarge = err
		t.mu.Unlock()
		return err
	}
	if cp.Phase == worker.PhaseModel && !t.s.isDraining() {
		p := &pendingWrite{done: make(chan struct{})}
		t.pending.Store(p)
		go func() {
			defer close(p.done)
			if p.err = t.store(b, seq); p.err != nil {
				t.cancelF(p.err)
			}
		}()
		return nil
	}
	if err := t.store(b, seq); err != nil {
		return err
	}
	if cp.Phase != worker.PhasePaused && t.s.isDraining() {
		t.silenced.Store(true)
		t.nak.Store(true)
		return ErrDraining
	}
	return nil
}

// pendingWrite is a checkpoint being written: err is its outcome once
// done is closed.
type pendingWrite struct {
	done chan struct{}
	err  error
}

// settle waits for the checkpoint being written, if any, and returns its
// error (again at every call after a failure, when the run is silenced).
func (t *turnRun) settle() error {
	p := t.pending.Load()
	if p == nil {
		return nil
	}
	<-p.done
	return p.err
}

// store writes the checkpoint b once the events up to seq, which it
// counts, are stored.
func (t *turnRun) store(b []byte, seq uint64) error {
	if err := t.flushTo(seq); err != nil {
		return err
	}
	rev, err := t.update(b, 0)
	if isConflict(err) {
		t.silenced.Store(true)
		t.s.log.Info("turn: another replica owns the turn; this run stops", "turn_id", t.id)
		return ErrOwnershipLost
	}
	if err != nil {
		// Not the turn's fault: hand it off, as a drain does, and let a
		// replica that reaches the bucket continue it.
		t.s.log.Warn("turn: checkpoint not stored; the turn is handed off", "turn_id", t.id, "err", err)
		t.silenced.Store(true)
		t.nak.Store(true)
		return fmt.Errorf("%w: %w", ErrStateUnavailable, err)
	}
	t.rev.Store(rev)
	return nil
}

// writeFinal stores the end of a turn (no worker state: the transcript is
// in llmw.turn.completed and the session).
//
// A revision conflict means another replica claimed the turn meanwhile
// (this run had lost it and was not fenced yet). After a run's own end,
// recordEnd decides what follows; a claimant that finds the end of a
// previous owner records it with writeFinal and, on a conflict, leaves
// the request to the replica that wrote the state.
func (t *turnRun) writeFinal(status Status, reason, code string) error {
	st := t.base
	st.Status, st.Owner, st.Seq, st.Reason, st.Code, st.Updated = status, t.s.cfg.Instance, t.ep.Seq(), reason, code, time.Now().UTC()
	b, err := json.Marshal(&st)
	if err != nil {
		return err
	}
	if t.rev.Load() == 0 {
		kctx, cancel := context.WithTimeout(t.s.root, kvTimeout)
		_, err = t.s.storeState(kctx, t.id, b, 0, t.s.cfg.FinishedTTL)
		cancel()
	} else {
		_, err = t.update(b, t.s.cfg.FinishedTTL)
	}
	if err != nil && !isConflict(err) {
		t.s.log.Warn("turn: write final state", "turn_id", t.id, "status", status, "err", err)
	} else if err == nil && status == StatusAborted && code == CodeCancelled {
		t.cancelApplied.Store(true)
	}
	return err
}

// endAttempts bounds how often recordEnd writes the end again over claims
// that keep coming (each a replica that read the state before the end).
const endAttempts = 3

// recordEnd writes the end of a turn whose events, its terminal event
// included, are stored (the run flushed them). A conflict means a replica
// claimed the turn since this run's last checkpoint, but the claim cannot
// go on: its events are fenced on where the turn's events ended when it
// scanned them, before this end, so the server refuses them, and its
// scan again finds the end. The turn is over whatever the claimant does,
// so the end is written over the claim, at the revision the leader has,
// and the request is this run's to answer. (Leaving the request to the
// claimant, as before, let the state say running for an AckWait after
// the end was published when the claimant had given up its claim.) A
// state that is finished already was recorded by another replica. A
// conflict is returned when claims keep coming or the state is neither
// running nor finished: the request is then left to whoever wrote it.
func (t *turnRun) recordEnd(status Status, reason, code string) error {
	err := t.writeFinal(status, reason, code)
	// t.rev 0: the run never wrote the state, so the conflict is with a
	// state some other run created, not with a claim of this run's.
	for attempt := 1; isConflict(err) && t.rev.Load() != 0 && attempt <= endAttempts; attempt++ {
		ctx, cancel := context.WithTimeout(t.s.root, kvTimeout)
		st, rev, rerr := t.s.leaderState(ctx, t.id)
		cancel()
		switch {
		case rerr != nil:
			t.s.log.Warn("turn: read the state of a turn claimed after its end", "turn_id", t.id, "err", rerr)
			return err
		case st.Status.Finished():
			return nil
		case st.Status != StatusRunning:
			return err
		}
		t.s.log.Info("turn: claimed after its end was stored; recording the end over the claim", "turn_id", t.id, "claimant", st.Owner)
		t.rev.Store(rev)
		err = t.writeFinal(status, reason, code)
	}
	return err
}

// finish acts on the worker's result: session, final state, ack.
func (t *turnRun) finish(res *worker.Result, err error) {
	_ = t.settle() // its failure silenced the run
	if t.silenced.Load() || t.flush() != nil {
		t.end()
		return
	}
	if err != nil {
		t.s.failRun(t, CodeInternal, fmt.Errorf("the turn could not be continued: %w", err))
		return
	}
	var werr error
	switch res.Status {
	case worker.StatusPaused:
		// The paused state was written by the checkpoint; a resume request
		// continues it.
		t.paused.Store(true)
	case worker.StatusCompleted:
		t.mu.Lock()
		ov := t.override
		t.mu.Unlock()
		if ov != nil {
			werr = t.recordEnd(StatusFailed, ov.Reason, ov.Code)
			break
		}
		werr = t.recordEnd(StatusCompleted, "", "")
	case worker.StatusAborted:
		werr = t.recordEnd(StatusAborted, res.Reason, res.Code)
	default:
		reason, code := res.Reason, res.Code
		t.mu.Lock()
		if t.tooLarge != nil {
			reason, code = t.tooLarge.Error(), CodeTooLarge
		}
		t.mu.Unlock()
		werr = t.recordEnd(StatusFailed, reason, code)
	}
	t.answerEnd(werr, func() { _ = t.msg.Ack() })
}

// answerEnd answers the request once the turn's end, stored in its
// events, was written to its state (err): done (an ack, or a term for a
// failure) when it was; nothing after a conflict, since the replica that
// wrote the state answers; and when the write failed (the bucket took no
// write for RetryTimeout), a delayed nak, so that the request's next
// delivery records the end (recover finds it in its scan; abortCancelled,
// its one event stored) instead of the state saying running for good.
func (t *turnRun) answerEnd(err error, done func()) {
	switch {
	case err == nil:
		done()
	case isConflict(err):
	default:
		_ = t.msg.NakWithDelay(time.Second)
	}
}

// Observe publishes a worker event on P.events.<session>.<turn>.<channel>.
func (t *turnRun) Observe(ev worker.Event) {
	if t.silenced.Load() {
		return
	}
	data := ev.Data
	if terminal(data) && t.settle() != nil {
		// The end waits for the checkpoint being written, so that the
		// state lags it by the final write alone, as it did when the
		// checkpoint before the model call was written first: a client
		// that sees the end and submits the id again is told the turn
		// ended. A failed write silenced the run.
		return
	}
	switch d := data.(type) {
	case events.TurnStarted:
		if d.Resumed && t.claimed {
			return // published by claimEvents
		}
		if !d.Resumed && t.input != nil {
			d.Input = t.input
			if _, err := t.emit(d); !errors.Is(err, nats.ErrMaxPayload) {
				if err != nil {
					t.failed(d, err)
				}
				return
			}
			// The question is in the checkpoint and the session; the
			// event goes out without it.
			d.Input = nil
			data = d
		}
	case events.ToolStarted:
		if t.started[d.CallID] {
			return
		}
	case events.ToolCallResult:
		if t.results[d.CallID] {
			return
		}
	case events.TurnStep:
		t.step.Store(int64(d.Step))
	case events.TurnCompleted:
		// The session is stored before the completed event goes out: a
		// client that submits the session's next turn when it sees the
		// event finds this turn's transcript.
		if t.session != "" {
			if ov := t.storeSession(d.Messages); ov != nil {
				t.mu.Lock()
				t.override = ov
				t.mu.Unlock()
				t.publish(events.TurnFailed(*ov))
				return
			}
		}
	case events.TurnFailed:
		t.mu.Lock()
		if t.tooLarge != nil {
			data = events.TurnFailed{Reason: t.tooLarge.Error(), Code: CodeTooLarge}
		}
		t.mu.Unlock()
	}
	_, err := t.emit(data)
	if err == nil {
		return
	}
	if _, ok := data.(events.TurnCompleted); ok && errors.Is(err, nats.ErrMaxPayload) {
		ov := &events.TurnEnded{Code: CodeTooLarge, Reason: fmt.Sprintf(
			"%v: the finished transcript is larger than the NATS max payload (%d bytes), so llmw.turn.completed could not be published",
			ErrTooLarge, t.s.nc.MaxPayload())}
		t.mu.Lock()
		t.override = ov
		t.mu.Unlock()
		t.publish(events.TurnFailed(*ov))
		return
	}
	t.failed(data, err)
}

// failed handles an event Publish refused.
func (t *turnRun) failed(ev events.WorkerEvent, err error) {
	if errors.Is(err, worker.ErrDetached) {
		t.lost(err)
		return
	}
	t.s.log.Warn("turn: publish event", "turn_id", t.id, "type", ev.WorkerType(), "err", err)
}

var _ worker.Observer = (*turnRun)(nil)

// terminal says whether ev ends the turn.
func terminal(ev events.WorkerEvent) bool {
	switch ev.(type) {
	case events.TurnCompleted, events.TurnFailed, events.TurnAborted:
		return true
	}
	return false
}

// end is the end of a silenced run: the request is negatively
// acknowledged when the turn is to continue elsewhere at once.
func (t *turnRun) end() {
	if t.nak.Load() {
		_ = t.msg.Nak()
	}
}

// storeSession appends the turn's messages to its session; a transcript
// too large for KV fails the turn (the returned end replaces completed).
func (t *turnRun) storeSession(msgs []events.Message) *events.TurnEnded {
	if n := t.base.SessionPrefix; n <= len(msgs) {
		msgs = msgs[n:]
	}
	kctx, cancel := context.WithTimeout(t.s.root, kvTimeout)
	defer cancel()
	err := storeSession(kctx, t.s.nc, t.s.pub.apiPrefix, t.s.sessionKV, t.session, t.id, msgs)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrTooLarge):
		return &events.TurnEnded{Reason: err.Error(), Code: CodeTooLarge}
	}
	t.s.log.Error("turn: store session transcript", "session_id", t.session, "turn_id", t.id, "err", err)
	return nil
}

func (t *turnRun) publish(ev events.WorkerEvent) {
	if _, err := t.emit(ev); err != nil {
		t.failed(ev, err)
	}
}
