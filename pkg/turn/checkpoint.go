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
// The checkpoint before a model call is written while the call is made
// (pendingWrite): the call and the events it streams are all that go
// ahead of it. Neither needs it stored: a model call has no effect
// outside the turn, the events are fenced on their own, and a replica
// that continues from the checkpoint before makes the same call again.
// So are the checkpoints written during the model call, each listing a
// call that starts while the model streams (worker.Checkpoint.Eager): the
// stream goes on, and the call, published through the run's fence, goes
// out once its checkpoint is stored.
// Everything else waits for it (settle): the next checkpoint — the one
// that lists a step's tool calls, which run only once it is stored — and
// every side effect outside the events stream (the run's fence, the
// session's transcript), and the run's end. A write that fails fails the
// run there as a checkpoint that failed at once would; meanwhile it
// silences the run and stops the model call. So the model call waits
// for neither the flush nor the write.
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
	if cp.Phase == worker.PhasePaused {
		t.pausing.Store(true)
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
