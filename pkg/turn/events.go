package turn

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/emit"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/worker"
)

// turnEvents returns the EventPublisher of a turn positioned where its
// events in LLMW_EVENTS end (a new turn's when they cannot be read: its
// first publish is then refused if the turn has events).
func (s *Service) turnEvents(turnID, sessionID string) *emit.EventPublisher {
	ctx, cancel := kvContext(s.root)
	defer cancel()
	pos, err := emit.LastEvent(ctx, s.nc, s.cfg.Prefix, sessionID, turnID)
	if err != nil {
		s.log.Warn("turn: read the last event of a turn", "turn_id", turnID, "err", err)
	}
	return s.pub.Turn(turnID, sessionID, pos)
}

// flush waits for a publisher's events to be stored.
func (s *Service) flush(ep *emit.EventPublisher) error {
	ctx, cancel := s.flushContext(s.root)
	defer cancel()
	return ep.Flush(ctx)
}

// flush waits until the turn's events are stored (see
// EventPublisher.Flush): before a checkpoint, a side effect outside the
// events stream and the request's acknowledgement. An error silences the
// run (lost).
func (t *turnRun) flush() error { return t.flushTo(math.MaxUint64) }

// flushTo is flush for the events up to seq (EventPublisher.FlushTo).
func (t *turnRun) flushTo(seq uint64) error {
	ctx, cancel := t.s.flushContext(t.s.root)
	defer cancel()
	err := t.ep.FlushTo(ctx, seq)
	if err != nil {
		t.lost(err)
	}
	return err
}

// emit publishes ev and, unless it is a llmw.tool.started, records its
// seq as the one the run's fence waits for.
func (t *turnRun) emit(ev events.WorkerEvent) (uint64, error) {
	seq, err := t.ep.Publish(ev)
	if _, started := ev.(events.ToolStarted); err == nil && !started {
		t.w.fenceSeq.Store(seq)
	}
	return seq, err
}

// lost ends a run whose events were not stored: refused because another
// replica published for the turn (ErrFenced: the request is negatively
// acknowledged only if the checkpoint still says this run owns the turn —
// the one that published was a stale owner), or not acknowledged in time
// (handed off). Nothing more is published or written. The first call
// decides (a run lost already is not looked at again).
func (t *turnRun) lost(err error) {
	if !t.life.enter(phaseLost) {
		return
	}
	if errors.Is(err, ErrFenced) {
		owns := t.owns()
		t.s.log.Info("turn: worker events refused; this run stops", "turn_id", t.id, "still_owner", owns, "err", err)
		if owns {
			t.life.enter(phaseHandedOff)
		}
	} else {
		t.s.log.Warn("turn: worker events not stored; the turn is handed off", "turn_id", t.id, "err", err)
		t.life.enter(phaseHandedOff)
	}
	t.cancelF(err)
}

// owns says whether the turn's checkpoint is still the one this run wrote.
func (t *turnRun) owns() bool {
	ctx, cancel := kvContext(t.s.root)
	defer cancel()
	_, rev, err := t.s.leaderState(ctx, t.id)
	return err == nil && rev == t.w.rev.Load()
}

// Observe publishes a worker event on P.events.<session>.<turn>.<channel>.
func (t *turnRun) Observe(ev worker.Event) {
	if t.life.load().silenced() {
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
	if terminal(data) {
		t.life.ending.Store(true)
	}
	switch d := data.(type) {
	case events.TurnStarted:
		d = t.withParent(d)
		if d.Resumed && t.obs.claimed {
			return // published by claimEvents
		}
		if !d.Resumed {
			d.Input = t.obs.input
		}
		if err := t.emitStarted(d); err != nil {
			t.failed(d, err)
		}
		return
	case events.ToolStarted:
		if t.obs.started[d.CallID] {
			return
		}
	case events.ToolCallResult:
		if t.obs.results[d.CallID] {
			return
		}
	case events.ToolCancelled:
		if t.obs.cancelled[d.CallID] {
			return
		}
	case events.TurnCompacted:
		if t.obs.compacted[d.ID] {
			return
		}
	case events.UsageReport:
		if d.Compaction != "" && t.obs.summaries[d.Compaction] {
			return
		}
		data = t.withChildUsage(d)
	case events.TurnCompleted:
		// The session is stored before the completed event goes out: a
		// client that submits the session's next turn when it sees the
		// event finds this turn's transcript. The turn's own transcript
		// gets the messages of its last step first.
		t.storeEnd(d.Messages)
		if t.session != "" {
			if ov := t.storeSession(d.Messages); ov != nil {
				t.ending.set(ov)
				t.publishEnd(events.TurnFailed(*ov))
				return
			}
		}
		data = t.ownMessages(t.withChildren(d))
	case events.TurnFailed:
		if tl, _ := t.ending.load(); tl != nil {
			data = events.TurnFailed{Reason: tl.Error(), Code: CodeTooLarge}
		}
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
// running it (endingRun). A completed event whose messages do not fit one
// NATS message carries the last of them alone (messages_truncated), or
// none; one too large even so is replaced by llmw.turn.failed
// (too_large), which the turn's state then records.
func (t *turnRun) publishEnd(ev events.WorkerEvent) {
	_, err := t.emit(ev)
	if c, ok := ev.(events.TurnCompleted); ok && errors.Is(err, nats.ErrMaxPayload) && !c.MessagesTruncated {
		// The turn's messages are in its transcript: the event carries
		// the answer alone, or nothing of them.
		c.MessagesTruncated = true
		c.Messages = c.Messages[max(len(c.Messages)-1, 0):]
		if _, err = t.emit(c); errors.Is(err, nats.ErrMaxPayload) {
			c.Messages = []events.Message{}
			_, err = t.emit(c)
		}
		ev = c
	}
	if _, ok := ev.(events.TurnCompleted); ok && errors.Is(err, nats.ErrMaxPayload) {
		ov := &events.TurnEnded{Code: CodeTooLarge, Reason: fmt.Sprintf(
			"%v: the turn's messages are larger than the NATS max payload (%d bytes), so llmw.turn.completed could not be published",
			ErrTooLarge, t.s.nc.MaxPayload())}
		t.ending.set(ov)
		ev = events.TurnFailed(*ov)
		_, err = t.emit(ev)
	}
	if err != nil {
		t.failed(ev, err)
	}
}

// endingRun is a run of turn id for a replica that ends the turn without
// running it: it answers a submit that could not be read, or wins the
// cancel of a paused turn by revision.
func (s *Service) endingRun(id, session string) *turnRun {
	ctx, cancel := context.WithCancelCause(s.root)
	return &turnRun{s: s, id: id, session: session, ctx: ctx, cancelF: cancel, ep: s.turnEvents(id, session), life: newRunLife()}
}

// failed handles an event Publish refused.
func (t *turnRun) failed(ev events.WorkerEvent, err error) {
	if errors.Is(err, worker.ErrDetached) {
		t.lost(err)
		return
	}
	t.s.log.Warn("turn: publish event", "turn_id", t.id, "type", ev.WorkerType(), "err", err)
}

// terminal says whether ev ends the turn.
func terminal(ev events.WorkerEvent) bool {
	switch ev.(type) {
	case events.TurnCompleted, events.TurnFailed, events.TurnAborted:
		return true
	}
	return false
}

func (t *turnRun) publish(ev events.WorkerEvent) {
	if _, err := t.emit(ev); err != nil {
		t.failed(ev, err)
	}
}

// emitStarted publishes a turn's llmw.turn.started; one whose input
// makes it larger than the max payload goes out without it (the
// question is in the checkpoint and the session).
func (t *turnRun) emitStarted(d events.TurnStarted) error {
	_, err := t.emit(d)
	if errors.Is(err, nats.ErrMaxPayload) && d.Input != nil {
		d.Input = nil
		_, err = t.emit(d)
	}
	return err
}

// flushContext bounds a wait for events to be stored: the publisher's
// retries for RetryTimeout, then one more acknowledgement.
func (s *Service) flushContext(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, s.pub.RetryTimeout()+kvTimeout)
}

// publishEndAlone publishes the terminal event of turn id for a replica
// that ends the turn without running it (endingRun) and waits until it
// is stored.
func (s *Service) publishEndAlone(id, session string, ev events.WorkerEvent) error {
	t := s.endingRun(id, session)
	t.publishEnd(ev)
	return t.flush()
}
