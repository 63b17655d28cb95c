package turn

import (
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

	"github.com/llmworker/llmworker/pkg/events"
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
	msg     *request
	ctx     context.Context
	cancelF context.CancelCauseFunc

	ep *EventPublisher
	// fenceSeq is the seq of the last event published that the run's
	// fence waits for: every event but llmw.tool.started (emit).
	fenceSeq atomic.Uint64
	base     State // request and session prefix of the checkpoints
	// rev is the revision of the state this run wrote last.
	rev  atomic.Uint64
	step atomic.Int64

	// wmu orders the run's state writes and is held while one is made
	// (put); werr is the first that failed (guarded by wmu).
	wmu  sync.Mutex
	werr error

	// silenced: this run must publish and write nothing more (another
	// replica owns the turn, or it was handed off by Stop); nak says the
	// request is to be negatively acknowledged at the end.
	silenced atomic.Bool
	nak      atomic.Bool
	// pausing: the paused state is stored; the run is ending. done is
	// closed when it stops running the turn here (unregister).
	pausing atomic.Bool
	done    chan struct{}

	// cancelRequested: P.turn.cancel arrived while the run was registered
	// (guarded by Service.mu).
	cancelRequested bool
	// cancelApplied: the run ended the turn as cancelled (writeFinal with
	// CodeCancelled), which answers the cancel.
	cancelApplied atomic.Bool

	// claimed: recover published llmw.turn.started (resumed) itself, so
	// the worker's is dropped; results, started and cancelled: calls
	// whose llmw.tool.result / llmw.tool.started / llmw.tool.cancelled
	// the previous owner published, not published again.
	claimed                     bool
	results, started, cancelled map[string]bool

	// input is the request's messages, for the turn's first
	// llmw.turn.started (nil for a turn picked up from a checkpoint).
	input []events.Message

	mu       sync.Mutex
	tooLarge error             // a checkpoint was too large
	override *events.TurnEnded // the completed event could not be published
}

func (t *turnRun) currentMsg() *request { return t.msg }

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
	if err := t.barrier(); err != nil {
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
	r := newRequest(m, s.log)
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("turn: panic while handling a request", "panic", p, "stack", string(debug.Stack()))
			r.give(nakAfter(0))
		}
	}()
	r.give(s.read(r, m))
}

// read decodes a delivered request and processes it, or rejects one that
// cannot be read; it returns the request's answer.
func (s *Service) read(r *request, m jetstream.Msg) answer {
	env, err := events.DecodeEnvelope(m.Headers(), m.Data())
	if err != nil {
		return s.invalid(m, nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err))
	}
	switch env.Type {
	case events.TypeTurnSubmit:
		req, err := events.DecodeData[events.TurnRequest](env)
		if err != nil {
			return s.invalid(m, env, fmt.Errorf("%w: %w", ErrInvalidRequest, err))
		}
		r.ack = newRequestAck(s.nc, m) // the run keeps the answer, not the message
		return s.process(r, env, &req, nil, digest(env.Data))
	case events.TypeTurnResume:
		req, err := events.DecodeData[events.ResumeRequest](env)
		if err != nil {
			return s.invalid(m, env, fmt.Errorf("%w: %w", ErrInvalidRequest, err))
		}
		r.ack = newRequestAck(s.nc, m)
		return s.process(r, env, nil, &req, "")
	}
	return s.invalid(m, env, fmt.Errorf("%w: CloudEvent type %q is neither %s nor %s", ErrInvalidRequest, env.Type,
		events.TypeTurnSubmit, events.TypeTurnResume))
}

// invalid answers a request that cannot be read: llmw.turn.rejected
// (invalid_request) on P.turn.rejected.<turn_id>, with the turn id taken
// from the body, the CloudEvent or else the Nats-Msg-Id header ("_" when
// there is none a subject can carry). A submit of an id that has no turn
// also gets llmw.turn.failed on the turn's events, so a UI that waits there
// ends too (an existing turn's events are not disturbed). The message is
// terminated, never redelivered.
func (s *Service) invalid(m jetstream.Msg, env *events.Envelope, err error) answer {
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
			t := s.owner(ids.TurnID, ids.SessionID)
			t.publishEnd(events.TurnFailed{Reason: err.Error(), Code: CodeInvalidRequest})
			if perr := s.flush(t.ep); perr != nil {
				s.log.Warn("turn: publish failed event", "turn_id", ids.TurnID, "err", perr)
			}
		}
	}
	return s.reject(rj)
}

func (s *Service) unregister(t *turnRun) {
	s.mu.Lock()
	if s.running[t.id] == t {
		delete(s.running, t.id)
	}
	cancelled := t.cancelRequested
	s.mu.Unlock()
	close(t.done)
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
		FallbackModels:        req.FallbackModels,
		Fallback:              s.fallback,
		TurnID:                t.id,
		SessionID:             t.session,
		Checkpoint:            t.checkpoint,
		CheckpointToolResults: s.cfg.CheckpointToolResults,
		NoEagerStart:          s.cfg.NoEagerStart,
		Observer:              t,

		Options:             modelOptions(t, req),
		ToolChoiceEveryStep: req.ToolChoiceEveryStep,
		OutputRepairs:       outputRepairs(req),
		MaxToolResult:       s.maxToolResult(),

		MaxTotalTokens: req.MaxTotalTokens,
		MaxCost:        req.MaxCost,
		Prices:         s.prices(),
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
	err = t.putEnd(b)
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
// and the request is this run's to answer: left to the claimant, the
// state would say running for an AckWait after the end was published
// when the claimant gave up its claim. A state that is finished already was recorded by another replica. A
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

// finish acts on the worker's result: final state, then the request's
// answer.
func (t *turnRun) finish(res *worker.Result, err error) answer {
	// The end is fenced: the checkpoints are stored, and the events.
	if t.fence() != nil || t.flush() != nil {
		return t.end()
	}
	if err != nil {
		return t.s.failRun(t, CodeInternal, fmt.Errorf("the turn could not be continued: %w", err))
	}
	var werr error
	switch res.Status {
	case worker.StatusPaused:
		// The paused state was written by the checkpoint; a resume request
		// continues it.
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
	return t.answerEnd(werr, ackAnswer)
}

// answerEnd is the request's answer once the turn's end, stored in its
// events, was written to its state (err): done (an ack, or a term for a
// failure) when it was; leave after a conflict, since the replica that
// wrote the state answers; and when the write failed (the bucket took no
// write for RetryTimeout), a delayed nak, so that the request's next
// delivery records the end (recover finds it in its scan; abortCancelled,
// its one event stored) instead of the state saying running for good.
func (t *turnRun) answerEnd(err error, done answer) answer {
	switch {
	case err == nil:
		return done
	case isConflict(err):
		return leave
	}
	return nakAfter(time.Second)
}

// Observe publishes a worker event on P.events.<session>.<turn>.<channel>.
func (t *turnRun) Observe(ev worker.Event) {
	if t.silenced.Load() {
		return
	}
	data := ev.Data
	if terminal(data) && t.fence() != nil {
		// The end is fenced: it goes out once the checkpoints are stored,
		// so that the state lags it by the final write alone (a client
		// that sees the end and submits the id again is told the turn
		// ended), and once the events before it are, before the session's
		// transcript. A run that failed it lost the turn or handed it off.
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
	case events.ToolCancelled:
		if t.cancelled[d.CallID] {
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
				t.publishEnd(events.TurnFailed(*ov))
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
	if terminal(data) {
		t.publishEnd(data)
		return
	}
	t.publish(data)
}

// publishEnd publishes the turn's terminal event (llmw.turn.completed,
// failed or aborted), the one place one is published: by the run that
// owns the turn, the replica running it or the one that ends it without
// running it (owner). A completed event too large to publish is replaced
// by llmw.turn.failed (too_large), which the turn's state then records.
func (t *turnRun) publishEnd(ev events.WorkerEvent) {
	_, err := t.emit(ev)
	if _, ok := ev.(events.TurnCompleted); ok && errors.Is(err, nats.ErrMaxPayload) {
		ov := &events.TurnEnded{Code: CodeTooLarge, Reason: fmt.Sprintf(
			"%v: the finished transcript is larger than the NATS max payload (%d bytes), so llmw.turn.completed could not be published",
			ErrTooLarge, t.s.nc.MaxPayload())}
		t.mu.Lock()
		t.override = ov
		t.mu.Unlock()
		ev = events.TurnFailed(*ov)
		_, err = t.emit(ev)
	}
	if err != nil {
		t.failed(ev, err)
	}
}

// owner is a run of turn id for a replica that ends the turn without
// running it: it answers a submit that could not be read, or wins the
// cancel of a paused turn by revision.
func (s *Service) owner(id, session string) *turnRun {
	ctx, cancel := context.WithCancelCause(s.root)
	return &turnRun{s: s, id: id, session: session, ctx: ctx, cancelF: cancel, ep: s.turnEvents(id, session), done: make(chan struct{})}
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

// end is the answer at the end of a silenced run: a negative
// acknowledgement when the turn is to continue elsewhere at once, else
// leave.
func (t *turnRun) end() answer {
	if t.nak.Load() {
		return nakAfter(0)
	}
	return leave
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
