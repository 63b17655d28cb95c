package turn

import (
	"context"
	"fmt"
	"time"

	"github.com/llmworker/llmworker/pkg/worker"
)

// checkpoint is the worker's Checkpoint callback: the state is written
// with the expected revision at every step boundary, after a flush of the
// events it counts (its seq).
//
// The checkpoint before a model call is written behind (put with behind
// set): the call and the events it streams go ahead of it. Neither needs
// it stored: a model call has no effect outside the turn, the events are
// fenced on their own, and a replica that continues from the checkpoint
// before makes the same call again. What does need it waits at the run's
// one barrier: the run's fence (fence: every tool call and hook request
// that leaves the process, the session's transcript, the run's end), and
// every later state write, which put orders behind it. A checkpoint that
// lists tool calls, a pause and a checkpoint during a drain are written
// before the worker goes on, since an in-process tool, a client that
// resumes the pause or the replica that continues the drained turn
// relies on them. So the model call waits for neither the flush nor the
// write. The checkpoints the worker writes during the model call, each
// listing one more call that starts while the model streams
// (worker.Checkpoint.Eager), are written behind the same way, one after
// the other: the call, published through the run's fence, goes out once
// its checkpoint is stored.
func (t *turnRun) checkpoint(_ context.Context, cp *worker.Checkpoint) error {
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
	draining := t.s.isDraining()
	behind := cp.Phase == worker.PhaseModel && !draining
	if err := t.put(b, seq, behind); err != nil {
		return err
	}
	switch {
	case behind:
	case cp.Phase == worker.PhasePaused:
		t.pausing.Store(true)
	case draining:
		t.silenced.Store(true)
		t.nak.Store(true)
		return ErrDraining
	}
	return nil
}

// put writes the run's state b (a checkpoint or a claim) with the
// expected revision, the one the run's last write stored. seq > 0: b is a
// checkpoint counting the events up to seq, which are flushed first.
//
// The run's writes go one at a time, in the order they are made: each
// takes wmu, and a write behind (behind set) keeps it until the write is
// done, in a goroutine, while put returns. So a write waits for the one
// before it, whose revision it expects, and barrier waits for every
// write made so far. The first put that fails silences the run and stays
// the answer of every later put and barrier: a conflict
// (ErrOwnershipLost: another replica owns the turn) or a bucket that took
// no write for RetryTimeout (ErrStateUnavailable: the turn is handed
// off). A write behind that fails also cancels the run, which stops the
// model call.
func (t *turnRun) put(b []byte, seq uint64, behind bool) error {
	t.wmu.Lock()
	if err := t.writable(); err != nil {
		t.wmu.Unlock()
		return err
	}
	if !behind {
		defer t.wmu.Unlock()
		return t.store(b, seq)
	}
	go func() {
		defer t.wmu.Unlock()
		if err := t.store(b, seq); err != nil {
			t.cancelF(err)
		}
	}()
	return nil
}

// putEnd writes the end of the turn (b, kept for Config.FinishedTTL)
// after the run's other writes. Its failure is the caller's to handle
// (recordEnd): a conflict with a claim is not the end of the run.
func (t *turnRun) putEnd(b []byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if t.werr != nil {
		return t.werr
	}
	return t.storeRev(b, t.s.cfg.FinishedTTL)
}

// writable is nil when the run may write its state (wmu held).
func (t *turnRun) writable() error {
	switch {
	case t.werr != nil:
		return t.werr
	case t.silenced.Load():
		return ErrOwnershipLost
	}
	return nil
}

// barrier waits for the state writes made so far and returns the first
// put that failed. It is the fence's (fence), which everything that needs
// the run's checkpoint stored goes through.
func (t *turnRun) barrier() error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return t.werr
}

// store makes one write for put (wmu held): the events up to seq
// flushed, then the state at the expected revision. A failure is
// recorded in werr and silences the run.
func (t *turnRun) store(b []byte, seq uint64) error {
	if seq > 0 {
		if err := t.flushTo(seq); err != nil {
			t.werr = err
			return err
		}
	}
	err := t.storeRev(b, 0)
	switch {
	case err == nil:
		return nil
	case isConflict(err):
		t.s.log.Info("turn: another replica owns the turn; this run stops", "turn_id", t.id)
		t.werr = fmt.Errorf("%w: %w", ErrOwnershipLost, err)
	default:
		// Not the turn's fault: hand it off, as a drain does, and let a
		// replica that reaches the bucket continue it.
		t.s.log.Warn("turn: state not stored; the turn is handed off", "turn_id", t.id, "err", err)
		t.nak.Store(true)
		t.werr = fmt.Errorf("%w: %w", ErrStateUnavailable, err)
	}
	t.silenced.Store(true)
	return t.werr
}

// storeRev writes b at the run's revision (created when the run has
// none) and keeps the revision it stored (wmu held).
func (t *turnRun) storeRev(b []byte, ttl time.Duration) error {
	var rev uint64
	var err error
	if t.rev.Load() == 0 {
		kctx, cancel := context.WithTimeout(t.s.root, kvTimeout)
		rev, err = t.s.storeState(kctx, t.id, b, 0, ttl)
		cancel()
	} else {
		rev, err = t.update(b, ttl)
	}
	if err == nil {
		t.rev.Store(rev)
	}
	return err
}
