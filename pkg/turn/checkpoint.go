package turn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/worker"
)

// checkpoint is the worker's Checkpoint callback: the state is written
// with the expected revision at every step boundary, after a flush of the
// events it counts (its seq).
//
// The checkpoint before a model call is written behind (queue with behind
// set): the call and the events it streams go ahead of it. Neither needs
// it stored: a model call has no effect outside the turn, the events are
// fenced on their own, and a replica that continues from the checkpoint
// before makes the same call again. What does need it waits at the run's
// one barrier: the run's fence (fence: every tool call and hook request
// that leaves the process, the session's transcript, the run's end), and
// every later state write, which queue orders behind it. A checkpoint that
// lists tool calls, a pause and a checkpoint during a drain are written
// before the worker goes on, since an in-process tool, a client that
// resumes the pause or the replica that continues the drained turn
// relies on them, and so is a checkpoint that commits a compaction made
// for the next model call (its llmw.turn.compacted follows it). So the
// model call waits for neither the flush nor the write. The checkpoints
// the worker writes during the model call, each listing one more call
// that starts while the model streams (worker.Checkpoint.Eager), are
// written behind the same way, one after the other: the call, published
// through the run's fence, goes out once its checkpoint is stored.
func (t *turnRun) checkpoint(_ context.Context, cp *worker.Checkpoint) error {
	// The events the checkpoint counts, which store flushes before it.
	seq := t.ep.Seq()
	st := t.base
	st.Status, st.Owner, st.Checkpoint, st.Seq, st.Updated = StatusRunning, t.s.cfg.Instance, cp, seq, time.Now().UTC()
	st.Children, st.SubAgentCalls = t.noteChildren(cp), t.subAgentCalls()
	if cp.Phase == worker.PhasePaused {
		// The worker publishes llmw.turn.paused right after this.
		st.Status, st.Seq = StatusPaused, seq+1
	}
	build := func() ([]byte, error) {
		b, err := t.checkpointState(&st)
		if errors.Is(err, ErrTooLarge) {
			t.ending.setTooLarge(err)
		}
		return b, err
	}
	draining := t.s.isDraining()
	// A checkpoint that commits a compaction the turn made for its next
	// model call is stored before the worker goes on: the worker
	// announces the compaction (llmw.turn.compacted, the summary's
	// usage) right after, so the events never hold a compaction that no
	// checkpoint does, which the replica continuing the turn would make
	// (and summarize) again.
	commits := cp.Compaction != nil && cp.Compaction.Turn == t.id && cp.Compaction.Step == cp.Step+1 && cp.Compaction.ID != t.w.committed
	behind := cp.Phase == worker.PhaseModel && !draining && !commits
	if err := t.queue(build, seq, behind); err != nil {
		return err
	}
	if commits {
		t.w.committed = cp.Compaction.ID
	}
	switch {
	case behind:
	case cp.Phase == worker.PhasePaused:
		t.life.enter(phasePausing)
	case draining:
		t.life.enter(phaseHandedOff)
		return ErrDraining
	}
	return nil
}

// writeEnd writes the end of a turn whose events, its terminal event
// included, are stored (the run flushed them). A conflict means a replica
// claimed the turn since this run's last checkpoint, but the claim cannot
// go on: its events are fenced on where the turn's events ended when it
// scanned them, before this end, so the server refuses them, and its
// scan again finds the end. The turn is over whatever the claimant does,
// so the end is written over the claim, at the revision the leader has,
// and the request is this run's to answer: left to the claimant, the
// state would say running for an AckWait after the end was published
// when the claimant gave up its claim. A state that is finished already
// was recorded by another replica. A conflict is returned when claims
// keep coming or the state is neither running nor finished: the request
// is then left to whoever wrote it.
func (t *turnRun) writeEnd(status Status, reason, code string) error {
	err := t.writeEndOnce(status, reason, code)
	// t.rev 0: the run never wrote the state, so the conflict is with a
	// state some other run created, not with a claim of this run's.
	for attempt := 1; isConflict(err) && t.w.rev.Load() != 0 && attempt <= endAttempts; attempt++ {
		ctx, cancel := kvContext(t.s.root)
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
		t.w.rev.Store(rev)
		err = t.writeEndOnce(status, reason, code)
	}
	return err
}

// endAttempts bounds how often writeEnd writes the end again over claims
// that keep coming (each a replica that read the state before the end).
const endAttempts = 3

// writeEndOnce stores the end of a turn (no worker state: the transcript is
// in llmw.turn.completed and the session).
//
// A revision conflict means another replica claimed the turn meanwhile
// (this run had lost it and was not fenced yet). After a run's own end,
// writeEnd decides what follows; a claimant that finds the end of a
// previous owner records it with writeEndOnce and, on a conflict, leaves
// the request to the replica that wrote the state.
func (t *turnRun) writeEndOnce(status Status, reason, code string) error {
	st := t.base
	st.Status, st.Owner, st.Seq, st.Reason, st.Code, st.Updated = status, t.s.cfg.Instance, t.ep.Seq(), reason, code, time.Now().UTC()
	st.Transcript = t.endTranscript()
	b, err := json.Marshal(&st)
	if err != nil {
		return err
	}
	err = t.queueEnd(b)
	if err != nil && !isConflict(err) {
		t.s.log.Warn("turn: write final state", "turn_id", t.id, "status", status, "err", err)
	} else if err == nil && status == StatusAborted && code == CodeCancelled {
		t.life.enter(phaseCancelled)
	}
	return err
}

// endTranscript is the transcript a finished turn's state names, nil for
// a run that stored none.
func (t *turnRun) endTranscript() *StateTranscript {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	if t.tx.turn.Len == 0 {
		return nil
	}
	return t.stateTranscript()
}

// queue writes the run's state, as build makes it (a checkpoint, whose
// build appends the messages it added to the turn's transcript first, or
// a claim), with the expected revision, the one the run's last write
// stored. seq > 0: the state is a checkpoint counting the events up to
// seq, which are flushed first.
//
// The run's writes go one at a time, in the order they are made: each
// takes w.mu, and a write behind (behind set) keeps it until the write is
// done, in a goroutine, while queue returns. So a write waits for the one
// before it, whose revision it expects, and barrier waits for every
// write made so far. The first write that fails silences the run and stays
// the answer of every later queue and barrier: a conflict
// (ErrOwnershipLost: another replica owns the turn) or a bucket that took
// no write for RetryTimeout (ErrStateUnavailable: the turn is handed
// off). A write behind that fails also cancels the run, which stops the
// model call.
func (t *turnRun) queue(build func() ([]byte, error), seq uint64, behind bool) error {
	t.w.mu.Lock()
	if err := t.writable(); err != nil {
		t.w.mu.Unlock()
		return err
	}
	if !behind {
		defer t.w.mu.Unlock()
		return t.commit(build, seq)
	}
	go func() {
		defer t.w.mu.Unlock()
		if err := t.commit(build, seq); err != nil {
			t.cancelF(err)
		}
	}()
	return nil
}

// queueEnd writes the end of the turn (b, kept for Config.FinishedTTL)
// after the run's other writes. Its failure is the caller's to handle
// (writeEnd): a conflict with a claim is not the end of the run.
func (t *turnRun) queueEnd(b []byte) error {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	if t.w.err != nil {
		return t.w.err
	}
	return t.casRun(b, t.s.cfg.FinishedTTL)
}

// writable is nil when the run may write its state (w.mu held).
func (t *turnRun) writable() error {
	switch {
	case t.w.err != nil:
		return t.w.err
	case t.life.load().silenced():
		return ErrOwnershipLost
	}
	return nil
}

// barrier waits for the state writes made so far and returns the first
// write that failed. It is the fence's (fence), which everything that needs
// the run's checkpoint stored goes through.
func (t *turnRun) barrier() error {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	return t.w.err
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
	if t.life.load().silenced() {
		return ErrOwnershipLost
	}
	if t.ep == nil {
		return nil
	}
	return t.flushTo(t.w.fenceSeq.Load())
}

// commit makes one write for queue (w.mu held): the events up to seq
// flushed and the state built (the transcript appended), then the state
// written at the expected revision. A failure is recorded in w.err and
// silences the run, but a state too large to write, which the turn
// fails for.
//
// The flush and the build go side by side when events are still on
// their way: the one waits on the events stream, the other on
// LLMW_TRANSCRIPTS, and neither needs the other; the state, which names
// both, is written once both are stored. An append made while the flush
// fails is off the transcript's chain, as one of a run that lost the
// turn (appendOwn).
func (t *turnRun) commit(build func() ([]byte, error), seq uint64) error {
	var (
		b   []byte
		err error
	)
	switch {
	case seq > 0 && !t.ep.StoredTo(seq):
		flushed := make(chan error, 1)
		go func() { flushed <- t.flushTo(seq) }()
		b, err = build()
		if ferr := <-flushed; ferr != nil {
			t.w.err = ferr
			return ferr
		}
	case seq > 0:
		if ferr := t.flushTo(seq); ferr != nil { // an error already recorded
			t.w.err = ferr
			return ferr
		}
		fallthrough
	default:
		b, err = build()
	}
	if err == nil {
		err = t.casRun(b, 0)
	} else if !errors.Is(err, errTranscriptWrite) {
		return err
	}
	switch {
	case err == nil:
		return nil
	case isConflict(err):
		t.s.log.Info("turn: another replica owns the turn; this run stops", "turn_id", t.id)
		t.w.err = fmt.Errorf("%w: %w", ErrOwnershipLost, err)
		t.life.enter(phaseLost)
	default:
		// Not the turn's fault: hand it off, as a drain does, and let a
		// replica that reaches the bucket continue it.
		t.s.log.Warn("turn: state not stored; the turn is handed off", "turn_id", t.id, "err", err)
		t.w.err = fmt.Errorf("%w: %w", ErrStateUnavailable, err)
		t.life.enter(phaseHandedOff)
	}
	return t.w.err
}

// casRun writes b at the run's revision (created when the run has
// none) and keeps the revision it stored (w.mu held).
func (t *turnRun) casRun(b []byte, ttl time.Duration) error {
	var rev uint64
	var err error
	if t.w.rev.Load() == 0 {
		kctx, cancel := kvContext(t.s.root)
		rev, err = t.s.casState(kctx, t.id, b, 0, ttl)
		cancel()
	} else {
		rev, err = t.casRetry(b, ttl)
	}
	if err == nil {
		t.w.rev.Store(rev)
	}
	return err
}

// casRetry writes a state of the turn with the expected revision t.rev and
// returns the new revision. Failures that may pass (a timeout while the
// bucket elects a leader, no responders) are retried (retrier) until the
// run is handed off (a Stop whose drain ran out): nothing it writes
// counts then. A revision conflict after such a failure is checked
// against the stored value, since the earlier attempt may have been
// stored with its acknowledgement lost.
func (t *turnRun) casRetry(b []byte, ttl time.Duration) (uint64, error) {
	r, retried := t.s.retrier(), false
	for {
		kctx, cancel := kvContext(t.s.root)
		rev, err := t.s.casState(kctx, t.id, b, t.w.rev.Load(), ttl)
		cancel()
		if err == nil {
			return rev, nil
		}
		if isConflict(err) {
			if retried {
				gctx, cancel := kvContext(t.s.root)
				cur, rev, gerr := jsread.KVLast(gctx, t.s.nc, t.s.pub.APIPrefix(), events.BucketTurnState, kvKey(t.id))
				cancel()
				if gerr == nil && bytes.Equal(cur, b) {
					return rev, nil
				}
			}
			return 0, err
		}
		if t.life.load().silenced() || !r.again(t.s.root) {
			return 0, err
		}
		retried = true
		t.s.log.Warn("turn: write checkpoint; retrying", "turn_id", t.id, "err", err)
	}
}
