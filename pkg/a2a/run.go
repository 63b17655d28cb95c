package a2a

import (
	"context"
	"errors"
	"fmt"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
)

// runOpts say which turn run follows and how.
type runOpts struct {
	session, turnID string
	// fresh: the turn was just submitted; its submitted task goes first,
	// before any event. Otherwise the stored events are read first and
	// the task as they make it goes first.
	fresh bool
	// after is the last event stored before this request: a pause up to
	// it is the one the request answered, not the end of the run.
	after uint64
	// rejected delivers the turn service's refusal of the request (nil
	// for none).
	rejected <-chan events.TurnRejected
	// resume: the request is a resume, whose refusal is the request's
	// error (another answer came first), not the task's end.
	resume bool
	// untilStarted ends the run at the turn's first event.
	untilStarted bool
}

// item is one stored event of the followed turn.
type item struct {
	ev      events.WorkerEvent
	seq     uint64 // stream sequence in LLMW_EVENTS
	pending uint64 // stored events not yet delivered
	at      time.Time
	err     error
}

// pullBuffer is how many events a run's consumer holds.
const pullBuffer = 32

// run follows the turn's events in LLMW_EVENTS, from the first, through
// a Mapper, and yields the task (first) and its updates, until the task
// is final, or input-required with nothing stored after it, or yield
// returns false. It returns the mapper as it ended. Every replica reads
// the same events in the same order, so a run on any of them yields the
// same task and the updates after it: a client that lost its stream
// subscribes again anywhere and misses nothing, and gets nothing twice.
func (h *handler) run(ctx context.Context, o runOpts, yield func(spec.Event) bool) (*Mapper, error) {
	m := NewMapper(o.turnID, o.session)
	if !h.s.open() {
		return m, spec.NewError(spec.ErrInternalError, "the gateway is shutting down: subscribe to the task again")
	}
	defer h.s.streams.Done()
	ctx, cancel := context.WithTimeout(ctx, h.s.cfg.MaxStreamDuration)
	defer cancel()
	cons, err := h.s.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{h.s.subj.Events(o.session, o.turnID, "*")}, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return m, fmt.Errorf("a2a: follow %s: %w", o.turnID, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(pullBuffer))
	if err != nil {
		return m, fmt.Errorf("a2a: follow %s: %w", o.turnID, err)
	}
	items := make(chan item)
	quit := make(chan struct{})
	exited := make(chan struct{})
	go read(it, items, quit, exited)
	defer func() {
		close(quit)
		it.Stop()
		<-exited
	}()

	live := o.fresh // the task went out: updates follow it
	if o.fresh && !yield(m.Task(nil)) {
		return m, nil
	}
	rejected := o.rejected
	var buf []spec.Event
	for {
		select {
		case <-ctx.Done():
			return m, nil
		case <-h.s.done:
			return m, nil
		case rj, ok := <-rejected:
			if !ok {
				rejected = nil
				continue
			}
			if o.resume {
				return m, resumeRefused(rj)
			}
			buf = m.Reject(buf[:0], rj, time.Now())
			if !live {
				yield(m.Task(nil))
				return m, nil
			}
			for _, e := range buf {
				if !yield(e) {
					break
				}
			}
			return m, nil
		case x := <-items:
			if x.err != nil {
				h.s.cfg.Logger.Warn("a2a: read events", "turn_id", o.turnID, "err", x.err)
				return m, spec.NewError(spec.ErrInternalError, "reading the turn's events: "+x.err.Error())
			}
			buf = buf[:0]
			if x.ev != nil {
				buf = m.Map(buf, x.ev, x.at)
			}
			switch {
			case live:
				for _, e := range buf {
					if !yield(e) {
						return m, nil
					}
				}
			case x.pending == 0:
				// Caught up: the task as stored, then what comes.
				live = true
				if !yield(m.Task(nil)) {
					return m, nil
				}
			}
			if o.untilStarted || m.Final() || (m.Interrupted() && x.pending == 0 && x.seq > o.after) {
				if !live {
					yield(m.Task(nil))
				}
				return m, nil
			}
		}
	}
}

// resumeRefused is the error of a message to an input-required task
// whose resume the turn service refused: the turn was answered, cancelled
// or ended in between (not_paused), or the decisions were not valid.
func resumeRefused(rj events.TurnRejected) error {
	err := spec.ErrUnsupportedOperation
	if rj.Code == events.RejectInvalidRequest {
		err = spec.ErrInvalidParams
	}
	return spec.NewError(err, fmt.Sprintf("task %s: the answer was refused: %s: %s", rj.TurnID, rj.Code, rj.Reason))
}

// read delivers the consumer's events until it is stopped.
func read(it jetstream.MessagesContext, out chan<- item, quit <-chan struct{}, exited chan<- struct{}) {
	defer close(exited)
	for {
		msg, err := it.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return
		}
		var x item
		if err != nil {
			x.err = err
		} else {
			env, err := events.DecodeEnvelope(msg.Headers(), msg.Data())
			if err == nil {
				x.ev, err = events.DecodeWorkerEnvelope(env)
				if errors.Is(err, events.ErrUnknownType) {
					err = nil
				}
			}
			x.err = err
			if md, err := msg.Metadata(); err == nil {
				x.seq, x.pending, x.at = md.Sequence.Stream, md.NumPending, md.Timestamp
			}
		}
		select {
		case out <- x:
		case <-quit:
			return
		}
		if x.err != nil {
			return
		}
	}
}
