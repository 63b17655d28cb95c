package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natsrt"
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
	msg     jetstream.Msg
	ctx     context.Context
	cancelF context.CancelCauseFunc

	ep   *natsrt.EventPublisher
	base State // request and session prefix of the checkpoints
	rev  uint64
	step atomic.Int64

	// silenced: this run must publish and write nothing more (another
	// replica owns the turn, or it was handed off by Stop); nak says the
	// request is to be negatively acknowledged at the end.
	silenced atomic.Bool
	nak      atomic.Bool

	mu       sync.Mutex
	tooLarge error             // a checkpoint was too large
	override *events.TurnEnded // the completed event could not be published
}

func (t *turnRun) currentMsg() jetstream.Msg { return t.msg }

func (t *turnRun) cancel(cause error) { t.cancelF(cause) }

// handOff stops the run without a trace: nothing more is published or
// written, and the request is negatively acknowledged so another replica
// resumes the turn from its checkpoint.
func (t *turnRun) handOff(cause error) {
	t.silenced.Store(true)
	t.nak.Store(true)
	t.cancelF(cause)
}

// handle runs one delivered request to its end (or hand-off).
func (s *Service) handle(m jetstream.Msg) {
	defer s.turns.Done()
	defer func() { <-s.sem }()
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("turn: panic while handling a request", "panic", p, "stack", string(debug.Stack()))
			_ = m.Nak()
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
		s.process(m, &req, nil)
	case events.TypeTurnResume:
		req, err := events.DecodeData[events.ResumeRequest](env)
		if err != nil {
			s.reject(m, env, fmt.Errorf("%w: %w", ErrInvalidRequest, err))
			return
		}
		s.process(m, nil, &req)
	default:
		s.reject(m, env, fmt.Errorf("%w: CloudEvent type %q is neither %s nor %s", ErrInvalidRequest, env.Type,
			events.TypeTurnSubmit, events.TypeTurnResume))
	}
}

// reject ends a request that cannot be run: llmw.turn.failed on the turn's
// subject when a turn id can be read and the turn has no state yet (an
// existing turn's event stream is not disturbed), a log record otherwise;
// the message is terminated, never redelivered.
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
	if env != nil && ids.SessionID == "" {
		ids.SessionID = env.SessionID
	}
	if !events.ValidToken(ids.SessionID) {
		ids.SessionID = ""
	}
	s.log.Warn("turn: invalid request", "turn_id", ids.TurnID, "err", err)
	if events.ValidToken(ids.TurnID) {
		ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
		_, _, gerr := getState(ctx, s.stateKV, ids.TurnID)
		cancel()
		if errors.Is(gerr, jetstream.ErrKeyNotFound) {
			ep := s.pub.Turn(ids.TurnID, ids.SessionID, 0)
			if _, perr := ep.Publish(events.ChannelTurn, events.TypeTurnFailed,
				events.TurnEnded{Reason: err.Error(), Code: CodeInvalidRequest}); perr != nil {
				s.log.Warn("turn: publish failed event", "turn_id", ids.TurnID, "err", perr)
			}
		}
	}
	_ = m.TermWithReason("invalid turn request")
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
	return true
}

func (s *Service) unregister(t *turnRun) {
	s.mu.Lock()
	if s.running[t.id] == t {
		delete(s.running, t.id)
	}
	s.mu.Unlock()
	t.cancelF(nil)
}

// resumeRetryDelay is how long a resume waits when it arrives while this
// replica still handles its turn.
const resumeRetryDelay = 100 * time.Millisecond

// resumeWhileBusy answers a resume that arrives while this replica still
// handles its turn. If the state says paused, the run is only finishing the
// pause the resume answers (the paused state is written, and
// llmw.turn.paused published, before the run acknowledges and lets go):
// look again in a moment. Otherwise the turn really runs and is not paused.
func (s *Service) resumeWhileBusy(m jetstream.Msg, id string) {
	kctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	st, _, err := getState(kctx, s.stateKV, id)
	cancel()
	if err == nil && st.Status == StatusPaused {
		_ = m.NakWithDelay(resumeRetryDelay)
		return
	}
	s.log.Warn("turn: resume of a turn that is running here", "turn_id", id, "err", ErrNotPaused)
	_ = m.TermWithReason("turn is not paused")
}

// process dispatches a decoded request on the turn's checkpoint: none →
// a fresh run; running → continue from the checkpoint (a replica died or
// stopped); paused → resume (or nothing for a repeated submit); finished →
// nothing (the request is acknowledged: idempotent).
func (s *Service) process(m jetstream.Msg, submit *events.TurnRequest, resume *events.ResumeRequest) {
	id := ""
	if submit != nil {
		id = submit.TurnID
	} else {
		id = resume.TurnID
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &turnRun{s: s, id: id, msg: m, ctx: ctx, cancelF: cancel}
	if !s.register(t) {
		cancel(nil)
		if resume != nil {
			s.resumeWhileBusy(m, id)
		}
		return // a duplicate of the request the running turn will acknowledge
	}
	defer s.unregister(t)

	for attempt := 0; ; attempt++ {
		kctx, kcancel := context.WithTimeout(context.Background(), kvTimeout)
		st, rev, err := getState(kctx, s.stateKV, id)
		kcancel()
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if resume != nil {
				t.ep = s.pub.Turn(id, "", 0)
				t.publish(events.ChannelTurn, events.TypeTurnFailed, events.TurnEnded{
					Reason: fmt.Sprintf("there is no turn %q to resume (it never started, or its state expired)", id), Code: CodeUnknownTurn})
				_ = m.TermWithReason("unknown turn")
				return
			}
			if s.fresh(t, submit) && attempt < 3 {
				continue // another replica created the turn meanwhile
			}
			return
		case err != nil:
			s.log.Warn("turn: read checkpoint", "turn_id", id, "err", err)
			_ = m.NakWithDelay(time.Second)
			return
		case st.Status.Finished():
			_ = m.Ack()
			return
		case st.Status == StatusPaused:
			if resume == nil {
				_ = m.Ack() // the submit of a turn that paused: acknowledged before
				return
			}
			s.resume(t, st, rev, resume)
			return
		default: // running
			// A redelivered request means the replica that ran it died or
			// stopped: continue from the checkpoint. A first delivery is
			// another request for a turn that runs elsewhere (a late
			// duplicate, or a resume of a turn that is not paused): taking
			// the turn over would only repeat its work.
			if md, err := m.Metadata(); err == nil && md.NumDelivered <= 1 {
				s.log.Warn("turn: request for a turn that is running on another replica", "turn_id", id, "err", ErrNotPaused)
				_ = m.TermWithReason("turn is running")
				return
			}
			s.recover(t, st, rev)
			return
		}
	}
}

// fresh starts a new turn; true means the state appeared meanwhile (the
// caller dispatches again).
func (s *Service) fresh(t *turnRun, req *events.TurnRequest) bool {
	t.session = req.SessionID
	t.ep = s.pub.Turn(t.id, t.session, 0)
	stripped := *req
	stripped.Messages = []events.Message{} // in the checkpoint; [] keeps the value valid against the turn request schema
	t.base = State{Version: StateVersion, Request: &stripped}

	tools, err := s.selectTools(context.Background(), req.Tools)
	if err != nil {
		return s.failEarly(t, CodeUnknownTool, err)
	}
	var prefix []events.Message
	if t.session != "" {
		kctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
		sess, _, err := getSession(kctx, s.sessionKV, t.session)
		cancel()
		switch {
		case err == nil:
			prefix = sess.Messages
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			s.log.Warn("turn: read session", "session_id", t.session, "err", err)
			_ = t.msg.NakWithDelay(time.Second)
			return false
		}
	}
	t.base.SessionPrefix = len(prefix)
	msgs := make([]events.Message, 0, len(prefix)+len(req.Messages))
	msgs = append(append(msgs, prefix...), req.Messages...)
	cp := &worker.Checkpoint{Version: worker.CheckpointVersion, TurnID: t.id, SessionID: t.session, Phase: worker.PhaseModel, Messages: msgs}
	st := t.base
	st.Status, st.Owner, st.Checkpoint, st.Updated = StatusRunning, s.cfg.Instance, cp, time.Now().UTC()
	b, err := s.encodeState(&st)
	if err != nil {
		return s.failEarly(t, CodeTooLarge, err)
	}
	kctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
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
	t.rev = rev
	w, err := s.newWorker(t, req, tools)
	if err != nil {
		s.failRun(t, CodeInternal, err)
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
	t.publish(events.ChannelTurn, events.TypeTurnFailed, events.TurnEnded{Reason: err.Error(), Code: code})
	st := t.base
	st.Status, st.Owner, st.Seq, st.Reason, st.Code, st.Updated = StatusFailed, s.cfg.Instance, t.ep.Seq(), err.Error(), code, time.Now().UTC()
	if b, merr := json.Marshal(&st); merr == nil {
		kctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
		_, _ = s.stateKV.Create(kctx, kvKey(t.id), b)
		cancel()
	}
	_ = t.msg.TermWithReason(code)
	return false
}

// failRun ends a turn that has a state but cannot go on.
func (s *Service) failRun(t *turnRun, code string, err error) {
	t.publish(events.ChannelTurn, events.TypeTurnFailed, events.TurnEnded{Reason: err.Error(), Code: code})
	t.writeFinal(StatusFailed, err.Error(), code)
	_ = t.msg.TermWithReason(code)
}

// recover continues a running turn from its checkpoint: aborts for the
// blocks the previous replica left open, then worker.RunFrom (tool calls
// with stored results are not run again; the interrupted model call is made
// again).
func (s *Service) recover(t *turnRun, st *State, rev uint64) {
	t.rev = rev
	t.base = State{Version: StateVersion, Request: st.Request, SessionPrefix: st.SessionPrefix}
	if st.Request == nil || st.Checkpoint == nil {
		t.ep = s.pub.Turn(t.id, "", st.Seq)
		s.failRun(t, CodeInternal, fmt.Errorf("the checkpoint of turn %q cannot be continued (no request or worker state)", t.id))
		return
	}
	t.session = st.Request.SessionID
	last, open, err := s.scanEvents(context.Background(), t.session, t.id, st.Seq)
	if err != nil {
		s.log.Warn("turn: scan events of an interrupted turn", "turn_id", t.id, "err", err)
		last = st.Seq
	}
	t.ep = s.pub.Turn(t.id, t.session, last)
	// Claim the turn before publishing anything.
	claim := *st
	claim.Owner, claim.Seq, claim.Updated = s.cfg.Instance, last, time.Now().UTC()
	if !t.write(&claim) {
		return
	}
	for _, a := range open {
		t.publish(events.BlockChannel(a.BlockType), events.TypeBlockAbort, a)
	}
	tools, err := s.selectTools(context.Background(), st.Request.Tools)
	if err != nil {
		s.failRun(t, CodeUnknownTool, err)
		return
	}
	w, err := s.newWorker(t, st.Request, tools)
	if err != nil {
		s.failRun(t, CodeInternal, err)
		return
	}
	res, err := w.RunFrom(t.ctx, st.Checkpoint)
	t.finish(res, err)
}

// resume continues a paused turn with the decisions of a resume request.
func (s *Service) resume(t *turnRun, st *State, rev uint64, req *events.ResumeRequest) {
	t.rev = rev
	t.base = State{Version: StateVersion, Request: st.Request, SessionPrefix: st.SessionPrefix}
	if st.Request == nil || st.Checkpoint == nil {
		t.ep = s.pub.Turn(t.id, "", st.Seq)
		s.failRun(t, CodeInternal, fmt.Errorf("the checkpoint of turn %q cannot be resumed (no request or worker state)", t.id))
		return
	}
	t.session = st.Request.SessionID
	t.ep = s.pub.Turn(t.id, t.session, st.Seq)
	claim := *st
	claim.Status, claim.Owner, claim.Updated = StatusRunning, s.cfg.Instance, time.Now().UTC()
	if !t.write(&claim) {
		_ = t.msg.Ack() // another replica took this resume
		return
	}
	tools, err := s.selectTools(context.Background(), st.Request.Tools)
	if err != nil {
		s.failRun(t, CodeUnknownTool, err)
		return
	}
	w, err := s.newWorker(t, st.Request, tools)
	if err != nil {
		s.failRun(t, CodeInternal, err)
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
			t.publish(events.ChannelTurn, events.TypeTurnPaused, events.TurnPaused{Reason: reason, Hook: hookName, Pending: pending})
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
		Provider:    &retryProvider{t: t, p: s.provider},
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
		StepAttempts:          1, // retries are the retryProvider's
		TurnID:                t.id,
		SessionID:             t.session,
		Checkpoint:            t.checkpoint,
		CheckpointToolResults: s.cfg.CheckpointToolResults,
		Observer:              t,
	})
}

// encodeState marshals a state and checks it fits into a KV value.
func (s *Service) encodeState(st *State) ([]byte, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("turn: encode checkpoint: %w", err)
	}
	if limit := s.nc.MaxPayload(); limit > 0 && int64(len(b)) > limit-1024 {
		return nil, fmt.Errorf("%w: the checkpoint of turn %q is %d bytes (transcript of %d messages), more than the NATS max payload (%d bytes) allows",
			ErrTooLarge, st.Request.TurnID, len(b), len(st.Checkpoint.Messages), limit)
	}
	return b, nil
}

// write stores st with the expected revision; false means another replica
// owns the turn (the run is silenced) or the write failed (the request is
// left for redelivery).
func (t *turnRun) write(st *State) bool {
	b, err := json.Marshal(st)
	if err == nil {
		kctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
		var rev uint64
		rev, err = t.s.stateKV.Update(kctx, kvKey(t.id), b, t.rev)
		cancel()
		if err == nil {
			t.rev = rev
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
// with the expected revision at every step boundary.
func (t *turnRun) checkpoint(_ context.Context, cp *worker.Checkpoint) error {
	if t.silenced.Load() {
		return ErrOwnershipLost
	}
	st := t.base
	st.Status, st.Owner, st.Checkpoint, st.Seq, st.Updated = StatusRunning, t.s.cfg.Instance, cp, t.ep.Seq(), time.Now().UTC()
	if cp.Phase == worker.PhasePaused {
		// The worker publishes llmw.turn.paused right after this.
		st.Status, st.Seq = StatusPaused, st.Seq+1
	}
	b, err := t.s.encodeState(&st)
	if err != nil {
		t.mu.Lock()
		t.tooLarge = err
		t.mu.Unlock()
		return err
	}
	kctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	rev, err := t.s.stateKV.Update(kctx, kvKey(t.id), b, t.rev)
	cancel()
	if isConflict(err) {
		t.silenced.Store(true)
		t.s.log.Info("turn: another replica owns the turn; this run stops", "turn_id", t.id)
		return ErrOwnershipLost
	}
	if err != nil {
		return fmt.Errorf("turn: write checkpoint: %w", err)
	}
	t.rev = rev
	if cp.Phase != worker.PhasePaused && t.s.isDraining() {
		t.silenced.Store(true)
		t.nak.Store(true)
		return ErrDraining
	}
	return nil
}

// writeFinal stores the end of a turn (no worker state: the transcript is
// in llmw.turn.completed and the session).
func (t *turnRun) writeFinal(status Status, reason, code string) {
	st := t.base
	st.Status, st.Owner, st.Seq, st.Reason, st.Code, st.Updated = status, t.s.cfg.Instance, t.ep.Seq(), reason, code, time.Now().UTC()
	b, err := json.Marshal(&st)
	if err != nil {
		return
	}
	kctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	defer cancel()
	if t.rev == 0 {
		_, err = t.s.stateKV.Create(kctx, kvKey(t.id), b)
	} else {
		_, err = t.s.stateKV.Update(kctx, kvKey(t.id), b, t.rev)
	}
	if err != nil {
		t.s.log.Warn("turn: write final state", "turn_id", t.id, "status", status, "err", err)
	}
}

// finish acts on the worker's result: session, final state, ack.
func (t *turnRun) finish(res *worker.Result, err error) {
	if t.silenced.Load() {
		if t.nak.Load() {
			_ = t.msg.Nak()
		}
		return
	}
	if err != nil {
		t.s.failRun(t, CodeInternal, fmt.Errorf("the turn could not be continued: %w", err))
		return
	}
	switch res.Status {
	case worker.StatusPaused:
		// The paused state was written by the checkpoint; a resume request
		// continues it.
	case worker.StatusCompleted:
		t.mu.Lock()
		ov := t.override
		t.mu.Unlock()
		if ov != nil {
			t.writeFinal(StatusFailed, ov.Reason, ov.Code)
			break
		}
		t.writeFinal(StatusCompleted, "", "")
	case worker.StatusAborted:
		t.writeFinal(StatusAborted, res.Reason, res.Code)
	default:
		reason, code := res.Reason, res.Code
		t.mu.Lock()
		if t.tooLarge != nil {
			reason, code = t.tooLarge.Error(), CodeTooLarge
		}
		t.mu.Unlock()
		t.writeFinal(StatusFailed, reason, code)
	}
	_ = t.msg.Ack()
}

// Observe publishes a worker event on P.events.<session>.<turn>.<channel>.
func (t *turnRun) Observe(ev worker.Event) {
	if t.silenced.Load() {
		return
	}
	switch ev.Type {
	case events.TypeTurnStep:
		if d, ok := ev.Data.(events.TurnStep); ok {
			t.step.Store(int64(d.Step))
		}
	case events.TypeTurnCompleted:
		// The session is stored before the completed event goes out: a
		// client that submits the session's next turn when it sees the
		// event finds this turn's transcript.
		if d, ok := ev.Data.(events.TurnCompleted); ok && t.session != "" {
			if ov := t.storeSession(d.Messages); ov != nil {
				t.mu.Lock()
				t.override = ov
				t.mu.Unlock()
				t.publish(events.ChannelTurn, events.TypeTurnFailed, *ov)
				return
			}
		}
	case events.TypeTurnFailed:
		t.mu.Lock()
		if t.tooLarge != nil {
			ev.Data = events.TurnEnded{Reason: t.tooLarge.Error(), Code: CodeTooLarge}
		}
		t.mu.Unlock()
	}
	_, err := t.ep.Publish(ev.Channel, ev.Type, ev.Data)
	if err == nil {
		return
	}
	if ev.Type == events.TypeTurnCompleted && errors.Is(err, nats.ErrMaxPayload) {
		ov := &events.TurnEnded{Code: CodeTooLarge, Reason: fmt.Sprintf(
			"%v: the finished transcript is larger than the NATS max payload (%d bytes), so llmw.turn.completed could not be published",
			ErrTooLarge, t.s.nc.MaxPayload())}
		t.mu.Lock()
		t.override = ov
		t.mu.Unlock()
		t.publish(events.ChannelTurn, events.TypeTurnFailed, *ov)
		return
	}
	t.s.log.Warn("turn: publish event", "turn_id", t.id, "type", ev.Type, "err", err)
}

var _ worker.Observer = (*turnRun)(nil)

// storeSession appends the turn's messages to its session; a transcript
// too large for KV fails the turn (the returned end replaces completed).
func (t *turnRun) storeSession(msgs []events.Message) *events.TurnEnded {
	if n := t.base.SessionPrefix; n <= len(msgs) {
		msgs = msgs[n:]
	}
	kctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	defer cancel()
	err := storeSession(kctx, t.s.sessionKV, t.s.nc.MaxPayload(), t.session, t.id, msgs)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrTooLarge):
		return &events.TurnEnded{Reason: err.Error(), Code: CodeTooLarge}
	}
	t.s.log.Error("turn: store session transcript", "session_id", t.session, "turn_id", t.id, "err", err)
	return nil
}

func (t *turnRun) publish(ch events.Channel, typ string, data any) {
	if _, err := t.ep.Publish(ch, typ, data); err != nil {
		t.s.log.Warn("turn: publish event", "turn_id", t.id, "type", typ, "err", err)
	}
}

// publishStep announces a retry of the current model call.
func (t *turnRun) publishStep(attempt int) {
	if t.silenced.Load() {
		return
	}
	t.publish(events.ChannelTurn, events.TypeTurnStep, events.TurnStep{Step: int(t.step.Load()), Attempt: attempt})
}
