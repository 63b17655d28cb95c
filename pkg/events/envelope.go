package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nuid"
)

// Header names of binary content mode (the NATS protocol binding: attributes
// as "ce-" headers, datacontenttype as "content-type").
const (
	HeaderSpecVersion = "ce-specversion"
	HeaderID          = "ce-id"
	HeaderSource      = "ce-source"
	HeaderType        = "ce-type"
	HeaderSubject     = "ce-subject"
	HeaderTime        = "ce-time"
	HeaderContentType = "content-type"
	HeaderTurnID      = "ce-turnid"
	HeaderSessionID   = "ce-sessionid"
	HeaderSeq         = "ce-seq"
	HeaderTraceParent = "ce-traceparent"
	HeaderTraceState  = "ce-tracestate"
	// HeaderMsgID is JetStream's de-duplication header.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderCancelForwardedBy marks a turn cancel that a turn service
	// replica passes on to the replica running the turn; its value is the
	// forwarding replica's instance. Replicas apply such a cancel to a run
	// they have and answer nothing else for it (docs/protocol.md, Cancel).
	HeaderCancelForwardedBy = "Llmw-Cancel-Forwarded-By"
	// HeaderRequestObject marks a completion request whose data is too
	// large for one NATS message: the message has no data, and the value
	// names the object of the LLMW_REQUESTS object store that holds it
	// (docs/protocol.md, Completion request).
	HeaderRequestObject = "Llmw-Request-Object"

	// ContentTypeJSON is the datacontenttype of every llmworker event.
	ContentTypeJSON = "application/json"
	// ContentTypeStructured marks a structured-mode CloudEvent body.
	ContentTypeStructured = "application/cloudevents+json"
	// SpecVersion is the CloudEvents version written and accepted.
	SpecVersion = "1.0"
)

// Envelope is one CloudEvent of llmworker: its attributes, the llmworker
// extensions and the JSON data.
type Envelope struct {
	ID        string
	Source    string
	Type      string
	Subject   string
	Time      time.Time
	TurnID    string
	SessionID string
	Seq       uint64
	// TraceParent and TraceState are the W3C trace context of the
	// CloudEvents distributed-tracing extension, as the W3C propagator
	// writes them (pkg/telemetry injects and extracts them).
	TraceParent string
	TraceState  string
	// Data is the JSON payload.
	Data []byte
}

// NewID returns a unique event id.
func NewID() string { return nuid.Next() }

// Source returns the source attribute /llmw/<service>/<instance>.
func Source(service, instance string) string { return "/llmw/" + service + "/" + instance }

// NewEnvelope marshals data and returns an envelope with a fresh id and the
// current time. data may be []byte or json.RawMessage (used as is), a
// BlockDelta or WorkerBlockDelta (marshalled without reflection), or any
// value encoding/json marshals.
func NewEnvelope(source, typ string, data any) (*Envelope, error) {
	b, err := MarshalData(data)
	if err != nil {
		return nil, fmt.Errorf("events: marshal %s: %w", typ, err)
	}
	return &Envelope{ID: NewID(), Source: source, Type: typ, Time: time.Now(), Data: b}, nil
}

// MarshalData returns the JSON encoding of an event payload.
func MarshalData(data any) ([]byte, error) {
	switch d := data.(type) {
	case nil:
		return []byte("{}"), nil
	case []byte:
		return d, nil
	case json.RawMessage:
		return d, nil
	case BlockDelta:
		return d.AppendJSON(nil), nil
	case WorkerBlockDelta:
		return d.AppendJSON(nil), nil
	case *CompletionRequest: // sent at every step, with the whole transcript
		r := *d
		r.Messages = nil
		return MarshalWithMessages(&r, d.Messages)
	}
	return json.Marshal(data)
}

// Validate checks the required CloudEvents attributes.
func (e *Envelope) Validate() error {
	switch {
	case e.ID == "":
		return missing("id")
	case e.Source == "":
		return missing("source")
	case e.Type == "":
		return missing("type")
	}
	return nil
}

// BinaryHeader returns the binary-mode headers of e. The map can be used as
// a nats.Header (nats.Header(h)). The header values share one backing array
// so that encoding costs few allocations.
func (e *Envelope) BinaryHeader() map[string][]string {
	h := make(map[string][]string, 12)
	e.WriteBinaryHeader(h)
	return h
}

// WriteBinaryHeader writes the binary-mode headers of e into h.
func (e *Envelope) WriteBinaryHeader(h map[string][]string) {
	vals := make([]string, 0, 11)
	set := func(k, v string) {
		vals = append(vals, v)
		n := len(vals)
		h[k] = vals[n-1 : n : n]
	}
	set(HeaderSpecVersion, SpecVersion)
	set(HeaderID, e.ID)
	set(HeaderSource, e.Source)
	set(HeaderType, e.Type)
	if e.Subject != "" {
		set(HeaderSubject, e.Subject)
	}
	if !e.Time.IsZero() {
		set(HeaderTime, e.Time.UTC().Format(time.RFC3339Nano))
	}
	set(HeaderContentType, ContentTypeJSON)
	if e.TurnID != "" {
		set(HeaderTurnID, e.TurnID)
	}
	if e.SessionID != "" {
		set(HeaderSessionID, e.SessionID)
	}
	if e.Seq != 0 {
		set(HeaderSeq, strconv.FormatUint(e.Seq, 10))
	}
	if e.TraceParent != "" {
		set(HeaderTraceParent, e.TraceParent)
	}
	if e.TraceState != "" {
		set(HeaderTraceState, e.TraceState)
	}
}

// CloudEvent returns e as a cloudevents/sdk-go event.
func (e *Envelope) CloudEvent() cloudevents.Event {
	ce := cloudevents.New(SpecVersion)
	ce.SetID(e.ID)
	ce.SetSource(e.Source)
	ce.SetType(e.Type)
	if e.Subject != "" {
		ce.SetSubject(e.Subject)
	}
	if !e.Time.IsZero() {
		ce.SetTime(e.Time)
	}
	if e.TurnID != "" {
		ce.SetExtension("turnid", e.TurnID)
	}
	if e.SessionID != "" {
		ce.SetExtension("sessionid", e.SessionID)
	}
	if e.Seq != 0 {
		if e.Seq <= 1<<31-1 {
			ce.SetExtension("seq", int32(e.Seq))
		} else {
			ce.SetExtension("seq", strconv.FormatUint(e.Seq, 10))
		}
	}
	if e.TraceParent != "" {
		ce.SetExtension("traceparent", e.TraceParent)
	}
	if e.TraceState != "" {
		ce.SetExtension("tracestate", e.TraceState)
	}
	ce.SetDataContentType(ContentTypeJSON)
	ce.DataEncoded = e.Data
	return ce
}

// StructuredBody returns e as a structured-mode JSON CloudEvent; publish it
// with the header content-type: application/cloudevents+json.
func (e *Envelope) StructuredBody() ([]byte, error) {
	ce := e.CloudEvent()
	return json.Marshal(ce)
}

// FromCloudEvent converts a cloudevents/sdk-go event. The data must be JSON.
func FromCloudEvent(ce cloudevents.Event) (*Envelope, error) {
	if err := ce.Validate(); err != nil {
		return nil, &FieldError{Problem: "invalid CloudEvent: " + err.Error()}
	}
	if ct := ce.DataContentType(); ct != "" && !isJSONContentType(ct) {
		return nil, invalidf("datacontenttype", "must be application/json, got %q", ct)
	}
	e := &Envelope{
		ID: ce.ID(), Source: ce.Source(), Type: ce.Type(), Subject: ce.Subject(), Time: ce.Time(),
		Data: ce.Data(),
	}
	ext := ce.Extensions()
	var err error
	if e.TurnID, err = extString(ext, "turnid"); err != nil {
		return nil, err
	}
	if e.SessionID, err = extString(ext, "sessionid"); err != nil {
		return nil, err
	}
	if e.TraceParent, err = extString(ext, "traceparent"); err != nil {
		return nil, err
	}
	if e.TraceState, err = extString(ext, "tracestate"); err != nil {
		return nil, err
	}
	if v, ok := ext["seq"]; ok {
		s, err := types.Format(v)
		if err != nil {
			return nil, invalidf("seq", "must be a positive integer")
		}
		if e.Seq, err = strconv.ParseUint(s, 10, 64); err != nil {
			return nil, invalidf("seq", "must be a positive integer, got %q", s)
		}
	}
	return e, nil
}

func extString(ext map[string]any, name string) (string, error) {
	v, ok := ext[name]
	if !ok {
		return "", nil
	}
	s, err := types.Format(v)
	if err != nil {
		return "", invalidf(name, "must be a string")
	}
	return s, nil
}

func isJSONContentType(ct string) bool {
	ct, _, _ = strings.Cut(ct, ";")
	ct = strings.TrimSpace(strings.ToLower(ct))
	return ct == ContentTypeJSON || strings.HasSuffix(ct, "+json") || ct == "text/json"
}

func headerGet(h map[string][]string, k string) string {
	if v := h[k]; len(v) > 0 {
		return v[hID]
	}
	// Some clients canonicalise header names (Ce-Id); accept them too.
	for hk, v := range h {
		if len(v) > 0 && strings.EqualFold(hk, k) {
			return v[hID]
		}
	}
	return ""
}

// binaryHeaders are the headers decodeBinary reads, indexed by the h*
// constants.
var binaryHeaders = [...]string{hID: HeaderID, hSource: HeaderSource, hType: HeaderType, hSubject: HeaderSubject,
	hTurnID: HeaderTurnID, hSessionID: HeaderSessionID, hTraceParent: HeaderTraceParent, hTraceState: HeaderTraceState,
	hContentType: HeaderContentType, hTime: HeaderTime, hSeq: HeaderSeq}

const (
	hID = iota
	hSource
	hType
	hSubject
	hTurnID
	hSessionID
	hTraceParent
	hTraceState
	hContentType
	hTime
	hSeq
)

// ceHeaders are the values of binaryHeaders in one message.
type ceHeaders [len(binaryHeaders)]string

// readHeaders looks every header of binaryHeaders up by its exact name,
// and only when some are missing (optional ones usually are) scans the
// message's headers once for differently cased names: headerGet per
// missing header would scan them once each, on every streamed token.
func readHeaders(h map[string][]string) (v ceHeaders) {
	missing := 0
	for i, k := range binaryHeaders {
		if hv := h[k]; len(hv) > 0 {
			v[i] = hv[hID]
		} else {
			missing++
		}
	}
	if missing == 0 || len(h) == 0 {
		return v
	}
	for hk, hv := range h {
		if len(hv) == 0 {
			continue
		}
		for i, k := range binaryHeaders {
			if v[i] == "" && len(hk) == len(k) && hk != k && strings.EqualFold(hk, k) {
				v[i] = hv[hID]
			}
		}
	}
	return v
}

// DecodeEnvelope reads a CloudEvent from NATS message headers and body, in
// binary content mode (ce- headers) or structured mode (a JSON CloudEvent
// body). Errors match ErrInvalid or ErrNotCloudEvent.
func DecodeEnvelope(h map[string][]string, body []byte) (*Envelope, error) {
	if sv := headerGet(h, HeaderSpecVersion); sv != "" {
		return decodeBinary(h, body, sv)
	}
	b := bytes.TrimSpace(body)
	if len(b) == 0 || b[0] != '{' || !bytes.Contains(b, []byte(`"specversion"`)) {
		return nil, fmt.Errorf("%w: no %s header and the body is not a structured CloudEvent", ErrNotCloudEvent, HeaderSpecVersion)
	}
	if err := checkDepth(b); err != nil {
		return nil, err
	}
	var ce cloudevents.Event
	if err := json.Unmarshal(b, &ce); err != nil {
		return nil, &FieldError{Problem: "invalid structured CloudEvent: " + err.Error()}
	}
	return FromCloudEvent(ce)
}

func decodeBinary(h map[string][]string, body []byte, sv string) (*Envelope, error) {
	if sv != SpecVersion {
		return nil, invalidf("specversion", "must be %q, got %q", SpecVersion, sv)
	}
	v := readHeaders(h)
	e := &Envelope{
		ID:          v[hID],
		Source:      v[hSource],
		Type:        v[hType],
		Subject:     v[hSubject],
		TurnID:      v[hTurnID],
		SessionID:   v[hSessionID],
		TraceParent: v[hTraceParent],
		TraceState:  v[hTraceState],
		Data:        body,
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	if ct := v[hContentType]; ct != "" && !isJSONContentType(ct) {
		return nil, invalidf("datacontenttype", "must be application/json, got %q", ct)
	}
	if t := v[hTime]; t != "" {
		tm, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			return nil, invalidf("time", "must be an RFC 3339 timestamp, got %q", t)
		}
		e.Time = tm
	}
	if s := v[hSeq]; s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, invalidf("seq", "must be a positive integer, got %q", s)
		}
		e.Seq = n
	}
	return e, nil
}

// DecodeData decodes the envelope's data into a T (see Decode).
func DecodeData[T any](e *Envelope) (T, error) { return Decode[T](e.Data) }
