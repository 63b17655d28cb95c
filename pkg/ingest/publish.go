package ingest

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
)

// publisher publishes the events of one stream. It is the hot path of
// ingest (one call per streamed token): a cenats.Writer keeps the message,
// header map and buffers for the whole stream, a delta's data is appended
// without reflection (BlockDelta.AppendJSON), and there is no flush per
// event: the connection's flusher batches writes.
type publisher struct {
	nc      *nats.Conn
	subject string
	w       *cenats.Writer
	seq     uint64
}

// newPublisher prepares a publisher on subject. tmpl holds the attributes
// that are the same for every event of the stream (source, subject and the
// extensions); id, type, time and seq are set per event.
func newPublisher(nc *nats.Conn, subject string, tmpl events.Envelope, structured bool) *publisher {
	return &publisher{nc: nc, subject: subject, w: cenats.NewWriter(tmpl, cenats.Options{Structured: structured})}
}

// publish sends ev as the next event of the stream.
func (p *publisher) publish(ev events.Event) error {
	p.seq++
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
	if err := p.w.Publish(p.nc, p.subject, ev.EventType(), p.seq, data); err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	return nil
}
