package ingest

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
)

// MaxJoinedDelta bounds the data (JSON, escaped) of a delta that joins
// several provider deltas (see Config.KeepDeltas): a burst is cut into
// messages of about this size, so that one message never approaches the
// server's max payload and a receiver's buffers stay small. A single
// provider delta larger than this is sent whole.
const MaxJoinedDelta = 16 << 10

// publisher publishes the events of one stream. It is the hot path of
// ingest (one call per streamed token): a cenats.Writer keeps the message,
// header map and buffers for the whole stream, a delta's data is appended
// without reflection (BlockDelta.AppendJSON), and there is no flush per
// event: the connection's flusher batches writes.
//
// A delta may be held while more events are already waiting (send's more):
// the deltas of the same block and kind that follow are joined to it in
// the writer's data buffer, and it is published when an event that does
// not continue it comes, when nothing more is waiting, or when it reaches
// MaxJoinedDelta. Each piece is escaped on its own, exactly as in a message
// of its own, so the text a receiver assembles is the same either way.
type publisher struct {
	nc      *nats.Conn
	subject string
	w       *cenats.Writer
	seq     uint64
	keep    bool // Config.KeepDeltas: never hold a delta

	held  []byte // the held delta's data without its closing `"}`; nil when none is held
	index int    // the held delta's block index
	kind  events.DeltaKind
}

// newPublisher prepares a publisher on subject. tmpl holds the attributes
// that are the same for every event of the stream (source, subject and the
// extensions); id, type, time and seq are set per event.
func newPublisher(nc *nats.Conn, subject string, tmpl events.Envelope, structured, keepDeltas bool) *publisher {
	return &publisher{nc: nc, subject: subject, w: cenats.NewWriter(tmpl, cenats.Options{Structured: structured}), keep: keepDeltas}
}

// send publishes ev as the next event of the stream, or holds it when it
// is a delta and more (events already read from the provider and waiting)
// is set. Any other event first publishes the held delta.
func (p *publisher) send(ev events.Event, more bool) error {
	d, ok := ev.(events.BlockDelta)
	if !ok || p.keep {
		if err := p.flush(); err != nil {
			return err
		}
		return p.publish(ev)
	}
	if p.held != nil && !p.join(d) {
		if err := p.flush(); err != nil {
			return err
		}
	}
	if p.held == nil {
		p.hold(d)
	}
	if more {
		return nil
	}
	return p.flush()
}

// hold starts a held delta with d.
func (p *publisher) hold(d events.BlockDelta) {
	// An empty delta, `{"index":N,"text":""}`, cut after its opening
	// quote, then the content.
	head := events.BlockDelta{Index: d.Index, Kind: d.Kind}.AppendJSON(p.w.Buffer())
	p.held = events.AppendJSONEscaped(head[:len(head)-2], d.Content)
	p.index, p.kind = d.Index, d.Kind
}

// join appends d's content to the held delta when d continues it and the
// result stays within MaxJoinedDelta.
func (p *publisher) join(d events.BlockDelta) bool {
	if d.Index != p.index || d.Kind != p.kind {
		return false
	}
	n := len(p.held)
	grown := events.AppendJSONEscaped(p.held, d.Content)
	if len(grown)+2 > MaxJoinedDelta {
		p.held = grown[:n]
		return false
	}
	p.held = grown
	return true
}

// flush publishes the held delta, if any.
func (p *publisher) flush() error {
	if p.held == nil {
		return nil
	}
	data := append(p.held, '"', '}')
	p.held = nil
	return p.emit(events.TypeLLMBlockDelta, data)
}

// publish sends ev as the next event of the stream.
func (p *publisher) publish(ev events.Event) error {
	data := p.w.Buffer()
	if d, ok := ev.(events.BlockDelta); ok {
		data = d.AppendJSON(data)
	} else {
		b, err := events.MarshalEvent(ev)
		if err != nil {
			return fmt.Errorf("ingest: marshal %s: %w", ev.EventType(), err)
		}
		data = append(data, b...)
	}
	return p.emit(ev.EventType(), data)
}

func (p *publisher) emit(typ string, data []byte) error {
	p.seq++
	if err := p.w.Publish(p.nc, p.subject, typ, p.seq, data); err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	return nil
}
