package turn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// ClientOptions configures a Client. The zero value works: prefix llmw,
// source /llmw/client/<random>.
type ClientOptions struct {
	// Prefix is the subject prefix P ("" = events.DefaultPrefix).
	Prefix string
	// Source is the CloudEvents source of requests ("" = /llmw/client/<random>).
	Source string
	// PublishTimeout bounds the wait for JetStream's acknowledgement of a
	// submit or resume when ctx has no earlier deadline (0 = 10 s).
	PublishTimeout time.Duration
}

// Client is the requesting side of the turn protocol (docs/protocol.md,
// "Turns"): it submits, resumes and cancels turns and follows their worker
// events. It is safe for concurrent use.
//
// Follow a turn before submitting it, so that none of its events is
// missed: the package Example submits and follows a turn,
// ExampleClient_Resume settles a turn paused for approval and
// ExampleClient_Cancel stops a running one.
type Client struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	subjects events.Subjects
	o        ClientOptions
}

// NewClient returns a Client on nc.
func NewClient(nc *nats.Conn, o ClientOptions) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("turn: jetstream: %w", err)
	}
	if o.Source == "" {
		o.Source = events.Source("client", nuid.Next())
	}
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = 10 * time.Second
	}
	return &Client{nc: nc, js: js, subjects: events.NewSubjects(o.Prefix), o: o}, nil
}

// Subjects is the subject builder of the client's prefix.
func (c *Client) Subjects() events.Subjects { return c.subjects }

// Submit publishes a turn request to LLMW_TURNS with Nats-Msg-Id = the turn
// id, so that a repeated submit of the same turn is stored once. It
// returns once JetStream stored it; ErrNotProvisioned when no stream
// captures the subject.
func (c *Client) Submit(ctx context.Context, req *events.TurnRequest) error {
	return c.request(ctx, c.subjects.TurnSubmit(), events.TypeTurnSubmit, req.TurnID, req.SessionID, req.TurnID, req)
}

// Resume publishes the decisions for a paused turn. Every resume gets its
// own de-duplication id ("<turn>-resume-<random>"): a turn may pause more
// than once.
func (c *Client) Resume(ctx context.Context, req *events.ResumeRequest) error {
	return c.request(ctx, c.subjects.TurnResume(), events.TypeTurnResume, req.TurnID, "", req.TurnID+"-resume-"+nuid.Next(), req)
}

// Cancel asks whichever replica runs the turn to cancel it (core NATS on
// P.turn.cancel.<turn>), and flushes so that the request has left when it
// returns. ctx bounds the flush; without a deadline it gets
// ClientOptions.PublishTimeout.
func (c *Client) Cancel(ctx context.Context, turnID string) error {
	e, err := events.NewEnvelope(c.o.Source, events.TypeTurnCancel, map[string]string{"turn_id": turnID})
	if err != nil {
		return err
	}
	e.Subject, e.TurnID = turnID, turnID
	if err := c.nc.PublishMsg(cenats.NewMsg(c.subjects.TurnCancel(turnID), e)); err != nil {
		return fmt.Errorf("turn: publish cancel of %s: %w", turnID, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.o.PublishTimeout)
		defer cancel()
	}
	if err := c.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("turn: flush cancel of %s: %w", turnID, err)
	}
	return nil
}

// Rejections subscribes to the answers to requests of turnID that the
// turn service does not run (llmw.turn.rejected on
// P.turn.rejected.<turn_id>). Subscribe before publishing the request:
// answers are not stored. stop ends the subscription and closes the
// channel.
func (c *Client) Rejections(turnID string) (answers <-chan events.TurnRejected, stop func(), err error) {
	ch := make(chan events.TurnRejected, 8)
	var mu sync.Mutex
	closed := false
	sub, err := c.nc.Subscribe(c.subjects.TurnRejected(turnID), func(m *nats.Msg) {
		env, err := events.DecodeEnvelope(m.Header, m.Data)
		if err != nil || env.Type != events.TypeTurnRejected {
			return
		}
		rj, err := events.DecodeData[events.TurnRejected](env)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !closed {
			select {
			case ch <- rj:
			default: // nobody reads: the first answers are what matter
			}
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("turn: subscribe %s: %w", c.subjects.TurnRejected(turnID), err)
	}
	if err := c.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, nil, fmt.Errorf("turn: subscribe %s: %w", c.subjects.TurnRejected(turnID), err)
	}
	return ch, func() {
		_ = sub.Unsubscribe()
		mu.Lock()
		defer mu.Unlock()
		if !closed {
			closed = true
			close(ch)
		}
	}, nil
}

func (c *Client) request(ctx context.Context, subject, typ, turnID, sessionID, msgID string, data any) error {
	e, err := events.NewEnvelope(c.o.Source, typ, data)
	if err != nil {
		return err
	}
	e.Subject, e.TurnID, e.SessionID = turnID, turnID, sessionID
	telemetry.Inject(ctx, e)
	m := cenats.NewMsg(subject, e)
	m.Header.Set(events.HeaderMsgID, msgID)
	pctx, cancel := context.WithTimeout(ctx, c.o.PublishTimeout)
	defer cancel()
	_, err = c.js.PublishMsg(pctx, m)
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%w: nothing captures %s (no %s stream; start `llmworker up`, or check --prefix)", ErrNotProvisioned, subject, events.StreamTurns)
	}
	if err != nil {
		return fmt.Errorf("turn: publish %s: %w", subject, err)
	}
	return nil
}

// Item is one event read by a Follower: the envelope and its typed worker
// event (nil for a CloudEvent type that is no worker event), or the error
// that kept it from being read.
type Item struct {
	Env   *events.Envelope
	Event events.WorkerEvent
	Err   error
	// CaughtUp is true when no more stored events were pending when this
	// one was delivered.
	CaughtUp bool
}

// Follower reads worker events from LLMW_EVENTS in order, from the first
// stored one, then live.
type Follower struct {
	mc   jetstream.MessagesContext
	ch   chan Item
	done chan struct{}
	exit chan struct{}
}

// Follow starts an ordered consumer on LLMW_EVENTS for subject (e.g.
// Subjects().EventsOfTurn(id)), replaying from the first stored event; a
// follower started before the turn is submitted sees all of it. Stop ends
// it. ErrNotProvisioned when there is no such stream.
func (c *Client) Follow(ctx context.Context, subject string) (*Follower, error) {
	cons, err := c.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: no stream %s (start one with `llmworker up`, or check --prefix)", ErrNotProvisioned, events.StreamEvents)
	}
	if err != nil {
		return nil, fmt.Errorf("turn: follow %s: %w", subject, err)
	}
	mc, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("turn: follow %s: %w", subject, err)
	}
	f := &Follower{mc: mc, ch: make(chan Item), done: make(chan struct{}), exit: make(chan struct{})}
	go f.run()
	return f, nil
}

func (f *Follower) run() {
	defer close(f.exit)
	for {
		m, err := f.mc.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return
		}
		var it Item
		if err != nil {
			it.Err = err
		} else {
			it.Env, it.Err = events.DecodeEnvelope(m.Headers(), m.Data())
			if it.Err == nil {
				it.Event, it.Err = events.DecodeWorkerEnvelope(it.Env)
				if errors.Is(it.Err, events.ErrUnknownType) {
					it.Err = nil // another kind of event: Event stays nil
				}
			}
			if md, err := m.Metadata(); err == nil {
				it.CaughtUp = md.NumPending == 0
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
func (f *Follower) C() <-chan Item { return f.ch }

// Stop ends the consumer and waits for the reader.
func (f *Follower) Stop() {
	select {
	case <-f.done:
		return
	default:
	}
	close(f.done)
	f.mc.Stop()
	<-f.exit
}
