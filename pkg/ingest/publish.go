package ingest

import (
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/events"
)

// publisher publishes the events of one stream. It is the hot path of
// ingest (one call per streamed token), so it keeps one nats.Msg, one header
// map and its buffers for the whole stream: the header map is written once
// and its four per-event values (id, type, time, seq) alias small arrays
// that publish overwrites in place, which is safe because PublishMsg encodes
// the headers and copies the data before it returns. A delta's data is
// appended without reflection (BlockDelta.AppendJSON); there is no flush per
// event, the connection's flusher batches writes.
type publisher struct {
	nc         *nats.Conn
	msg        nats.Msg
	structured bool
	tmpl       events.Envelope
	seq        uint64

	idPrefix []byte // "<nuid>." – unique per stream, so id = prefix + seq is unique
	idv      [1]string
	typv     [1]string
	timev    [1]string
	seqv     [1]string

	data []byte
	buf  []byte
	body []byte // structured mode
}

// newPublisher prepares a publisher on subject. tmpl holds the attributes
// that are the same for every event of the stream (source, subject and the
// extensions); id, type, time and seq are set per event.
func newPublisher(nc *nats.Conn, subject string, tmpl events.Envelope, structured bool) *publisher {
	p := &publisher{nc: nc, structured: structured, tmpl: tmpl}
	p.msg.Subject = subject
	p.idPrefix = append(append(make([]byte, 0, 40), nuid.Next()...), '.')
	p.data = make([]byte, 0, 256)
	p.buf = make([]byte, 0, 64)
	if structured {
		p.msg.Header = nats.Header{events.HeaderContentType: []string{events.ContentTypeStructured}}
		return p
	}
	h := make(nats.Header, 12)
	// Write every attribute the stream will carry through the events
	// codec, then point the per-event ones at our own arrays.
	t := tmpl
	t.ID, t.Type, t.Time, t.Seq = "-", "-", time.Now(), 1
	t.WriteBinaryHeader(h)
	h[events.HeaderID] = p.idv[:]
	h[events.HeaderType] = p.typv[:]
	h[events.HeaderTime] = p.timev[:]
	h[events.HeaderSeq] = p.seqv[:]
	p.msg.Header = h
	return p
}

// publish sends ev as the next event of the stream.
func (p *publisher) publish(ev events.Event) error {
	p.seq++
	var err error
	if d, ok := ev.(events.BlockDelta); ok {
		p.data = d.AppendJSON(p.data[:0])
	} else if p.data, err = appendEvent(p.data[:0], ev); err != nil {
		return fmt.Errorf("ingest: marshal %s: %w", ev.EventType(), err)
	}
	now := time.Now()
	if p.structured {
		p.buf = strconv.AppendUint(append(p.buf[:0], p.idPrefix...), p.seq, 10)
		p.body = appendStructured(p.body[:0], &p.tmpl, string(p.buf), ev.EventType(), now, p.seq, p.data)
		p.msg.Data = p.body
	} else {
		// id, time and seq share one string: one allocation per event.
		b := strconv.AppendUint(append(p.buf[:0], p.idPrefix...), p.seq, 10)
		i := len(b)
		b = now.UTC().AppendFormat(b, time.RFC3339Nano)
		j := len(b)
		b = strconv.AppendUint(b, p.seq, 10)
		p.buf = b
		all := string(b)
		p.idv[0], p.timev[0], p.seqv[0] = all[:i], all[i:j], all[j:]
		p.typv[0] = ev.EventType()
		p.msg.Data = p.data
	}
	if err := p.nc.PublishMsg(&p.msg); err != nil {
		return fmt.Errorf("ingest: publish %s: %w", p.msg.Subject, err)
	}
	return nil
}

// appendEvent appends the JSON data of a non-delta stream event.
func appendEvent(b []byte, ev events.Event) ([]byte, error) {
	data, err := events.MarshalEvent(ev)
	if err != nil {
		return b, err
	}
	return append(b, data...), nil
}

// appendStructured appends a structured-mode CloudEvent (the JSON that
// Envelope.StructuredBody produces, written without reflection): the
// attributes of tmpl plus id, type, time and seq, and data as JSON.
func appendStructured(b []byte, tmpl *events.Envelope, id, typ string, t time.Time, seq uint64, data []byte) []byte {
	str := func(b []byte, key, v string) []byte {
		b = append(b, ',', '"')
		b = append(b, key...)
		b = append(b, '"', ':')
		return events.AppendJSONString(b, v)
	}
	b = append(b, `{"specversion":"1.0"`...)
	b = str(b, "id", id)
	b = str(b, "source", tmpl.Source)
	b = str(b, "type", typ)
	if tmpl.Subject != "" {
		b = str(b, "subject", tmpl.Subject)
	}
	b = append(b, `,"time":"`...)
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","datacontenttype":"application/json"`...)
	if tmpl.TurnID != "" {
		b = str(b, "turnid", tmpl.TurnID)
	}
	if tmpl.SessionID != "" {
		b = str(b, "sessionid", tmpl.SessionID)
	}
	if tmpl.TraceParent != "" {
		b = str(b, "traceparent", tmpl.TraceParent)
	}
	// seq is a JSON number, as the events codec writes it (an int32
	// extension); past int32 it is a string.
	if seq <= 1<<31-1 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, seq, 10)
	} else {
		b = append(b, `,"seq":"`...)
		b = strconv.AppendUint(b, seq, 10)
		b = append(b, '"')
	}
	b = append(b, `,"data":`...)
	b = append(b, data...)
	return append(b, '}')
}
