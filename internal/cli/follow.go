package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
)

// item is one worker event read by a follower.
type item struct {
	env *events.Envelope
	err error
	// caughtUp is true when no more stored messages were pending when this
	// one was delivered.
	caughtUp bool
}

// follower reads worker events of LLMW_EVENTS in order, from the start,
// with an ordered consumer filtered by subject.
type follower struct {
	mc   jetstream.MessagesContext
	ch   chan item
	done chan struct{}
	exit chan struct{}
}

// follow starts an ordered consumer on LLMW_EVENTS for subject (e.g.
// P.events.*.<turn>.>), replaying from the first stored event.
func follow(ctx context.Context, js jetstream.JetStream, subject string) (*follower, error) {
	cons, err := js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: no stream %s (start one with `llmworker up`, or check --prefix)", ErrNotProvisioned, events.StreamEvents)
	}
	if err != nil {
		return nil, fmt.Errorf("follow %s: %w", subject, err)
	}
	mc, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("follow %s: %w", subject, err)
	}
	f := &follower{mc: mc, ch: make(chan item), done: make(chan struct{}), exit: make(chan struct{})}
	go f.run()
	return f, nil
}

func (f *follower) run() {
	defer close(f.exit)
	for {
		m, err := f.mc.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return
		}
		var it item
		if err != nil {
			it.err = err
		} else {
			it.env, it.err = events.DecodeEnvelope(m.Headers(), m.Data())
			if md, err := m.Metadata(); err == nil {
				it.caughtUp = md.NumPending == 0
			}
		}
		select {
		case f.ch <- it:
		case <-f.done:
			return
		}
	}
}

// C delivers the events.
func (f *follower) C() <-chan item { return f.ch }

// Stop ends the consumer and waits for the reader.
func (f *follower) Stop() {
	select {
	case <-f.done:
		return
	default:
	}
	close(f.done)
	f.mc.Stop()
	<-f.exit
}
