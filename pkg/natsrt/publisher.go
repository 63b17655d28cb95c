package natsrt

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/events"
)

// PublisherOptions configures a Publisher. The zero value publishes under
// events.DefaultPrefix with source /llmw/turn/<random instance>.
type PublisherOptions struct {
	// Prefix is the subject prefix P.
	Prefix string
	// Service and Instance make the source /llmw/<service>/<instance>
	// ("" = "turn" and a random id).
	Service, Instance string
}

// Publisher publishes CloudEvents in binary content mode with core NATS
// publishes; the streams of DESIGN.md capture them. It is safe for
// concurrent use.
type Publisher struct {
	nc       *nats.Conn
	subjects events.Subjects
	source   string
}

// NewPublisher returns a Publisher on nc.
func NewPublisher(nc *nats.Conn, o PublisherOptions) *Publisher {
	if o.Service == "" {
		o.Service = "turn"
	}
	if o.Instance == "" {
		o.Instance = nuid.Next()
	}
	return &Publisher{nc: nc, subjects: events.NewSubjects(o.Prefix), source: events.Source(o.Service, o.Instance)}
}

// Source is the source attribute this publisher stamps.
func (p *Publisher) Source() string { return p.source }

// Subjects is the subject builder of the publisher's prefix.
func (p *Publisher) Subjects() events.Subjects { return p.subjects }

// Publish sends e to subject in binary content mode. An empty e.Source is
// filled with the publisher's source, an empty id and time likewise.
func (p *Publisher) Publish(subject string, e *events.Envelope) error {
	if e.Source == "" {
		e.Source = p.source
	}
	if e.ID == "" {
		e.ID = events.NewID()
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	m := &nats.Msg{Subject: subject, Header: nats.Header(e.BinaryHeader()), Data: e.Data}
	if err := p.nc.PublishMsg(m); err != nil {
		return fmt.Errorf("natsrt: publish %s: %w", subject, err)
	}
	return nil
}

// Turn returns the EventPublisher of one turn. lastSeq is the seq of the
// last event already published for the turn (0 for a new turn; after a
// crash, LastEventSeq reads it from LLMW_EVENTS) so that seq goes on
// without a gap or a repeat.
func (p *Publisher) Turn(turnID, sessionID string, lastSeq uint64) *EventPublisher {
	ep := &EventPublisher{p: p, turnID: turnID, sessionID: sessionID, seq: lastSeq, hdr: make(nats.Header, 12)}
	for i, ch := range channels {
		ep.subjects[i] = p.subjects.Events(sessionID, turnID, ch)
	}
	return ep
}

var channels = [...]events.Channel{
	events.ChannelTurn, events.ChannelText, events.ChannelThinking,
	events.ChannelTool, events.ChannelHook, events.ChannelUsage,
}

// EventPublisher publishes the worker events of one turn on
// P.events.<session>.<turn>.<channel>, stamping source, turnid, sessionid,
// subject (= the turn id) and a seq that counts per turn across channels.
// It is safe for concurrent use; seq order equals publish order.
type EventPublisher struct {
	p                 *Publisher
	turnID, sessionID string
	subjects          [len(channels)]string

	mu  sync.Mutex
	seq uint64
	buf []byte
	hdr nats.Header
	msg nats.Msg
}

// TurnID is the turn the publisher belongs to.
func (ep *EventPublisher) TurnID() string { return ep.turnID }

// Seq returns the seq of the last event published.
func (ep *EventPublisher) Seq() uint64 {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.seq
}

func (ep *EventPublisher) subject(ch events.Channel) string {
	for i, c := range channels {
		if c == ch {
			return ep.subjects[i]
		}
	}
	return ep.p.subjects.Events(ep.sessionID, ep.turnID, ch)
}

// Publish marshals data (see events.MarshalData) and publishes it as an
// event of type typ on channel ch. It returns the event's seq.
func (ep *EventPublisher) Publish(ch events.Channel, typ string, data any) (uint64, error) {
	switch d := data.(type) {
	case events.WorkerBlockDelta:
		return ep.Delta(ch, d)
	case *events.WorkerBlockDelta:
		return ep.Delta(ch, *d)
	}
	b, err := events.MarshalData(data)
	if err != nil {
		return 0, fmt.Errorf("natsrt: marshal %s: %w", typ, err)
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.publishLocked(ch, typ, b)
}

// Delta publishes a llmw.block.delta on channel ch (events.BlockChannel of
// the block's type) without reflection, reusing the publisher's buffers: it
// is the hot path of every streamed token.
func (ep *EventPublisher) Delta(ch events.Channel, d events.WorkerBlockDelta) (uint64, error) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.buf = d.AppendJSON(ep.buf[:0])
	return ep.publishLocked(ch, events.TypeBlockDelta, ep.buf)
}

func (ep *EventPublisher) publishLocked(ch events.Channel, typ string, data []byte) (uint64, error) {
	seq := ep.seq + 1
	env := events.Envelope{
		ID: events.NewID(), Source: ep.p.source, Type: typ, Subject: ep.turnID, Time: time.Now(),
		TurnID: ep.turnID, SessionID: ep.sessionID, Seq: seq, Data: data,
	}
	clear(ep.hdr)
	env.WriteBinaryHeader(ep.hdr)
	// nats.Conn copies header and data into its write buffer before
	// PublishMsg returns, so both can be reused for the next event.
	ep.msg = nats.Msg{Subject: ep.subject(ch), Header: ep.hdr, Data: data}
	if err := ep.p.nc.PublishMsg(&ep.msg); err != nil {
		return 0, fmt.Errorf("natsrt: publish %s seq %d: %w", typ, seq, err)
	}
	ep.seq = seq
	return seq, nil
}

// LastEventSeq returns the seq of the last worker event of a turn stored in
// LLMW_EVENTS (0 when there is none), so that a replica resuming the turn
// continues the sequence: Publisher.Turn(turnID, sessionID, seq).
func LastEventSeq(ctx context.Context, js jetstream.JetStream, prefix, sessionID, turnID string) (uint64, error) {
	st, err := js.Stream(ctx, events.StreamEvents)
	if err != nil {
		return 0, fmt.Errorf("natsrt: stream %s: %w", events.StreamEvents, err)
	}
	s := events.NewSubjects(prefix)
	subj := s.Events(sessionID, turnID, "*")
	m, err := st.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("natsrt: last event of turn %s: %w", turnID, err)
	}
	v := m.Header.Get(events.HeaderSeq)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("natsrt: last event of turn %s: bad seq %q: %w", turnID, v, err)
	}
	return n, nil
}
