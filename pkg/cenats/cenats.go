package cenats

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/events"
)

// NewMsg returns a message on subject carrying e in binary content mode.
// An empty id or time is filled in (a fresh id, now), so callers set only
// what they know. e.Data is used as the body without a copy.
func NewMsg(subject string, e *events.Envelope) *nats.Msg {
	if e.ID == "" {
		e.ID = events.NewID()
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	return &nats.Msg{Subject: subject, Header: nats.Header(e.BinaryHeader()), Data: e.Data}
}

// Decode reads the CloudEvent of a message in binary or structured mode
// (events.DecodeEnvelope). Errors match events.ErrInvalid or
// events.ErrNotCloudEvent.
func Decode(m *nats.Msg) (*events.Envelope, error) {
	return events.DecodeEnvelope(m.Header, m.Data)
}

// Options configures a Writer. The zero value writes binary content mode.
type Options struct {
	// Structured writes structured-mode messages instead.
	Structured bool
}

// Writer writes a stream of CloudEvents that share source, subject and
// extensions (Template) with reused buffers. It is not safe for concurrent
// use: a publisher that is shared guards it with its own lock.
type Writer struct {
	msg        nats.Msg
	structured bool
	tmpl       events.Envelope

	idPrefix []byte // "<nuid>." – unique per writer, so prefix + seq is unique
	idv      [1]string
	typv     [1]string
	timev    [1]string
	seqv     [1]string

	data []byte
	buf  []byte
	body []byte // structured mode
}

// NewWriter returns a Writer for events with tmpl's source, subject,
// turnid, sessionid, traceparent and tracestate; tmpl's id, type, time, seq and data
// are ignored.
func NewWriter(tmpl events.Envelope, o Options) *Writer {
	tmpl.ID, tmpl.Type, tmpl.Time, tmpl.Seq, tmpl.Data = "", "", time.Time{}, 0, nil
	w := &Writer{structured: o.Structured, tmpl: tmpl}
	w.idPrefix = append(append(make([]byte, 0, 40), nuid.Next()...), '.')
	return w
}

// headerPool holds the binary-mode header maps of released writers
// (Release), emptied: a map sized for a whole event's attributes is most of
// a writer's memory, and a writer that waits (a turn waiting on its model)
// does not need one.
var headerPool = sync.Pool{New: func() any { return make(nats.Header, 12) }}

// header makes the message's header map: every attribute the stream
// carries, written through the events codec, with the per-event ones
// pointing at the writer's own arrays, which Msg overwrites in place.
func (w *Writer) header() {
	if w.structured {
		w.msg.Header = nats.Header{events.HeaderContentType: []string{events.ContentTypeStructured}}
		return
	}
	h := headerPool.Get().(nats.Header)
	t := w.tmpl
	// id and type are placeholders, time and seq left out: Msg sets all
	// four per event, so rendering them here would only allocate.
	t.ID, t.Type, t.Time, t.Seq = "-", "-", time.Time{}, 0
	t.WriteBinaryHeader(h)
	h[events.HeaderID] = w.idv[:]
	h[events.HeaderType] = w.typv[:]
	h[events.HeaderTime] = w.timev[:]
	h[events.HeaderSeq] = w.seqv[:]
	w.msg.Header = h
}

// Release lets go of the writer's header map and buffers until its next
// event, which makes them again: for a writer that may wait long between
// events. The message of the last Msg must not be used after it.
func (w *Writer) Release() {
	if h := w.msg.Header; h != nil && !w.structured {
		clear(h)
		headerPool.Put(h)
	}
	w.msg = nats.Msg{}
	w.idv[0], w.typv[0], w.timev[0], w.seqv[0] = "", "", "", ""
	w.data, w.buf, w.body = nil, nil, nil
}

// Buffer returns the writer's data buffer emptied, for the caller to
// append the next event's JSON to and pass to Msg; it saves a copy.
func (w *Writer) Buffer() []byte {
	if w.data == nil {
		w.data = make([]byte, 0, 256)
	}
	return w.data[:0]
}

// Msg returns the message of the next event: type typ, seq seq (> 0) and
// JSON data on subject. The message, its header and its body are reused
// by the next call: publish it (nats.Conn.PublishMsg copies both before it
// returns) before calling Msg again.
func (w *Writer) Msg(subject, typ string, seq uint64, data []byte) *nats.Msg {
	if w.msg.Header == nil {
		w.header()
	}
	w.data = data[:0] // keep the larger buffer for the next event
	now := time.Now()
	w.msg.Subject = subject
	if w.structured {
		w.buf = strconv.AppendUint(append(w.buf[:0], w.idPrefix...), seq, 10)
		w.body = appendStructured(w.body[:0], &w.tmpl, string(w.buf), typ, now, seq, data)
		w.msg.Data = w.body
		return &w.msg
	}
	// id, time and seq share one string: one allocation per event.
	b := strconv.AppendUint(append(w.buf[:0], w.idPrefix...), seq, 10)
	i := len(b)
	b = now.UTC().AppendFormat(b, time.RFC3339Nano)
	j := len(b)
	b = strconv.AppendUint(b, seq, 10)
	w.buf = b
	all := string(b)
	w.idv[0], w.timev[0], w.seqv[0] = all[:i], all[i:j], all[j:]
	w.typv[0] = typ
	w.msg.Data = data
	return &w.msg
}

// ID is the CloudEvents id the writer gives the event with seq seq: the
// writer's random prefix and seq, unique per writer.
func (w *Writer) ID(seq uint64) string {
	return string(strconv.AppendUint(append(make([]byte, 0, len(w.idPrefix)+20), w.idPrefix...), seq, 10))
}

// Publish writes the next event (see Msg) and publishes it on nc.
func (w *Writer) Publish(nc *nats.Conn, subject, typ string, seq uint64, data []byte) error {
	if err := nc.PublishMsg(w.Msg(subject, typ, seq, data)); err != nil {
		return fmt.Errorf("cenats: publish %s seq %d on %s: %w", typ, seq, subject, err)
	}
	return nil
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
	if tmpl.TraceState != "" {
		b = str(b, "tracestate", tmpl.TraceState)
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
