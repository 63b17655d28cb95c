package ingest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// Error codes of the error events an Client stream synthesizes when
// it ends a stream itself (the stream then ends with status failed).
const (
	// CodeStreamGap: an event's seq skipped or repeated one (a message was
	// lost, e.g. dropped for a slow consumer, or delivered twice).
	CodeStreamGap = "stream_gap"
	// CodeIdleTimeout: no event arrived for ClientOptions.IdleTimeout.
	CodeIdleTimeout = "idle_timeout"
	// CodeInvalidEvent: a message on the stream subject was not a valid
	// provider stream event.
	CodeInvalidEvent = "invalid_event"
)

// Defaults of ClientOptions.
const (
	// DefaultRequestTimeout is long because ingest opens the provider call
	// before it replies (so that a provider's refusal is an error reply):
	// the reply waits for the provider's first byte, as the first stream
	// event would. A missing ingest is still reported at once (no
	// responders).
	DefaultRequestTimeout = 2 * time.Minute
	// DefaultClientIdleTimeout is how long a client waits for the next
	// event of a stream (ingest sends pings while the provider is silent).
	DefaultClientIdleTimeout = 2 * time.Minute
	DefaultStreamBuffer      = 4096
)

// ClientOptions configures a Client. The zero value works.
type ClientOptions struct {
	// Prefix is the subject prefix P.
	Prefix string
	// Source is the CloudEvents source of requests ("" = /llmw/turn/<random>).
	Source string
	// RequestTimeout bounds the wait for ingest's reply (0 = default).
	RequestTimeout time.Duration
	// IdleTimeout ends a stream as failed when no event (pings included)
	// arrives for that long (0 = DefaultClientIdleTimeout, negative = never).
	IdleTimeout time.Duration
	// Buffer is the number of messages a stream holds that its reader has
	// not taken yet (0 = DefaultStreamBuffer). Messages are queued as they
	// arrive, so memory follows the backlog, not this bound; the client's
	// subscription never blocks: a message over the bound is dropped,
	// which the reader sees as a seq gap.
	Buffer int
}

// RequestSubjectFor is how long a Client keeps subscribing to the
// per-request stream subject as well, after an ingest replied with one
// (an ingest that predates stream groups, docs/protocol.md §3).
const RequestSubjectFor = 10 * time.Minute

// Client is an llm.Provider that sends completion requests to ingest
// over NATS (docs/protocol.md, "Model calls") and reads the provider stream events back.
//
// Its requests name a stream group of its own, so that every stream it
// reads arrives through one subscription to P.llm.stream.<group>.*, whose
// callback hands each message to its stream's queue: an open stream holds
// its queued messages and a few small structures, not a subscription and
// a channel sized for the worst burst.
type Client struct {
	nc       *nats.Conn
	subjects events.Subjects
	o        ClientOptions
	group    string

	requests objects // LLMW_REQUESTS, for requests larger than a message (stored.go)

	mu     sync.Mutex
	sub    *nats.Subscription      // P.llm.stream.<group>.*, made by the first Stream
	routes map[string]*streamQueue // request id → its stream's queue
	closed bool

	// requestSubjUntil (unix nanoseconds) is when the Client stops subscribing
	// to per-request stream subjects too; set when an ingest replied with
	// one.
	requestSubjUntil atomic.Int64
}

var _ llm.Provider = (*Client)(nil)

// NewClient returns an Client on nc.
func NewClient(nc *nats.Conn, o ClientOptions) *Client {
	if o.Source == "" {
		o.Source = events.Source("turn", nuid.Next())
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultClientIdleTimeout
	}
	if o.Buffer <= 0 {
		o.Buffer = DefaultStreamBuffer
	}
	c := &Client{
		nc: nc, subjects: events.NewSubjects(o.Prefix), o: o,
		group: nuid.Next(), routes: map[string]*streamQueue{},
	}
	// jetstream.New does no I/O; LLMW_REQUESTS is opened by the first
	// request too large for a message.
	c.requests.js, c.requests.jsErr = jetstream.New(nc)
	return c
}

// Close unsubscribes the Client's stream group. Streams still open end as
// failed with an idle timeout, or when their context ends; Stream
// returns ErrClientClosed afterwards.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.sub == nil {
		return nil
	}
	return c.sub.Unsubscribe()
}

// Stream sends req (a request id is generated when req.RequestID is empty)
// and returns its stream, an llm.Warner whose Warnings are those of
// ingest's reply (the settings the provider does not have, not sent). Its stream group's subscription exists before it
// sends the request, so no event is missed. Cancelling ctx publishes
// P.llm.cancel.<request_id> and ends the stream with status cancelled.
//
// An ingest that predates stream groups replies with the per-request
// subject P.llm.stream.<request_id>, where the stream's first events may
// already have gone by: that request is cancelled and sent once more
// under the id <request_id>-l (req.RequestID is set to it), subscribed to
// both subjects, and so is every request for RequestSubjectFor after.
func (c *Client) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	if req.RequestID == "" {
		req.RequestID = nuid.Next()
	}
	if !events.ValidToken(req.RequestID) {
		return nil, fmt.Errorf("%w: request_id %q is not a subject token", events.ErrInvalid, req.RequestID)
	}
	s, retry, err := c.open(ctx, req, time.Now().UnixNano() < c.requestSubjUntil.Load())
	if retry {
		req.RequestID += "-l"
		s, _, err = c.open(ctx, req, true)
	}
	return s, err
}

// open sends one request and returns its stream; retry reports that the
// request was answered by an ingest without stream groups while only the
// group was subscribed, and was cancelled.
func (c *Client) open(ctx context.Context, req *llm.Request, perRequest bool) (_ *ingestStream, retry bool, err error) {
	s := &ingestStream{c: c, ctx: ctx, reqID: req.RequestID, q: newStreamQueue(c.o.Buffer)}
	s.q.onQueued = llm.QueuedFunc(ctx)
	if err := c.route(s); err != nil {
		return nil, false, err // not routed: nothing to release
	}
	defer func() {
		if err != nil || retry {
			s.release()
		}
	}()
	groupSubj := c.subjects.LLMGroupStream(c.group, req.RequestID)
	requestSubj := c.subjects.LLMStream(req.RequestID)
	if perRequest {
		if s.requestSub, err = c.nc.Subscribe(requestSubj, s.q.push); err != nil {
			return nil, false, fmt.Errorf("ingest: subscribe %s: %w", requestSubj, err)
		}
		_ = s.requestSub.SetPendingLimits(-1, -1) // s.q bounds it
	}
	r := *req
	r.StreamGroup = c.group
	env, err := events.NewEnvelope(c.o.Source, events.TypeLLMComplete, &r)
	if err != nil {
		return nil, false, err
	}
	env.Subject = req.RequestID
	telemetry.Inject(ctx, env)
	msg := cenats.NewMsg(c.subjects.LLMComplete(), env)
	if len(msg.Data) > c.storeLimit() {
		name, err := c.storeRequest(ctx, req.RequestID, msg)
		if err != nil {
			return nil, false, err
		}
		defer c.deleteRequest(ctx, name)
	}
	rctx, cancel := context.WithTimeout(ctx, c.o.RequestTimeout)
	reply, err := c.nc.RequestMsgWithContext(rctx, msg)
	cancel()
	var streamSubj string
	if err == nil {
		streamSubj, s.warnings, err = c.checkReply(reply, groupSubj, requestSubj)
	} else if ctx.Err() != nil {
		err = ctx.Err()
	} else if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		err = fmt.Errorf("%w on %s within %v (is ingest running?): %w", ErrNoIngest, c.subjects.LLMComplete(), c.o.RequestTimeout, err)
	} else {
		err = fmt.Errorf("ingest: request %s: %w", c.subjects.LLMComplete(), err)
	}
	if err != nil {
		return nil, false, err
	}
	switch {
	case streamSubj == requestSubj:
		c.requestSubjUntil.Store(time.Now().Add(RequestSubjectFor).UnixNano())
		if s.requestSub == nil {
			c.publishCancel(req.RequestID)
			return nil, true, nil
		}
	case s.requestSub != nil:
		_ = s.requestSub.Unsubscribe()
		s.requestSub = nil
	}
	if c.o.IdleTimeout > 0 {
		s.timer = time.NewTimer(c.o.IdleTimeout)
	}
	return s, false, nil
}

// route subscribes the stream group (once) and registers s's queue under
// its request id.
func (c *Client) route(s *ingestStream) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClientClosed
	}
	if c.sub == nil {
		subj := c.subjects.LLMGroupStreams(c.group)
		sub, err := c.nc.Subscribe(subj, c.dispatch)
		if err != nil {
			return fmt.Errorf("ingest: subscribe %s: %w", subj, err)
		}
		// The callback only moves messages to their streams' queues, which
		// bound them; NATS's own limits would drop messages under a burst
		// of many streams at once.
		_ = sub.SetPendingLimits(-1, -1)
		c.sub = sub
	}
	if _, dup := c.routes[s.reqID]; dup {
		return fmt.Errorf("%w: request_id %q is already streaming on this client", ErrDuplicateRequest, s.reqID)
	}
	c.routes[s.reqID] = s.q
	return nil
}

func (c *Client) unroute(reqID string) {
	c.mu.Lock()
	delete(c.routes, reqID)
	c.mu.Unlock()
}

// dispatch is the stream group's callback: it queues a message for the
// stream of the subject's last token. Messages of streams nobody reads
// are dropped.
func (c *Client) dispatch(m *nats.Msg) {
	id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	c.mu.Lock()
	q := c.routes[id]
	c.mu.Unlock()
	if q != nil {
		q.push(m)
	}
}

// checkReply returns the stream subject and the warnings of a successful
// reply; the subject must be one of the two the request may be streamed
// on.
func (c *Client) checkReply(m *nats.Msg, groupSubj, requestSubj string) (string, []events.Warning, error) {
	if m.Header.Get(micro.ErrorCodeHeader) != "" {
		_, err := DecodeReply(m)
		return "", nil, err // an *Error, or ErrNoReply for a malformed code
	}
	data := m.Data
	env, err := events.DecodeEnvelope(m.Header, m.Data)
	switch {
	case err == nil:
		data = env.Data
	case !errors.Is(err, events.ErrNotCloudEvent):
		return "", nil, fmt.Errorf("%w: %w", ErrBadReply, err)
	}
	r, err := events.Decode[events.CompletionReply](data)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrBadReply, err)
	}
	if r.StreamSubject != groupSubj && r.StreamSubject != requestSubj {
		return "", nil, fmt.Errorf("%w: stream_subject %q, want %q", ErrBadReply, r.StreamSubject, groupSubj)
	}
	return r.StreamSubject, r.Warnings, nil
}

func (c *Client) publishCancel(reqID string) {
	env, err := events.NewEnvelope(c.o.Source, events.TypeLLMCancel, map[string]string{"request_id": reqID})
	if err != nil {
		return
	}
	env.Subject = reqID
	// Best effort: ingest also stops on its own idle/deadline handling.
	_ = c.nc.PublishMsg(cenats.NewMsg(c.subjects.LLMCancel(reqID), env))
}

// ingestStream reads one request's events. It is used by one goroutine, as
// llm.Stream requires.
type ingestStream struct {
	c          *Client
	ctx        context.Context
	reqID      string
	q          *streamQueue
	requestSub *nats.Subscription // P.llm.stream.<request_id>, only for an ingest without stream groups
	timer      *time.Timer

	// warnings are those of ingest's reply: the request's settings the
	// provider does not have, which were not sent.
	warnings []events.Warning

	lastSeq  uint64
	open     []openBlock // by index; a stream has few open at once
	cur      events.Event
	pending  []events.Event
	done     bool // a terminal status was received or synthesized
	received bool // ingest itself sent the terminal status
	closed   bool
	began    bool // Next was called
}

func (s *ingestStream) Next() bool {
	if !s.began {
		// A queued status's callback ends before the stream's first event.
		s.began = true
		s.q.queuedWG.Wait()
	}
	for {
		if len(s.pending) > 0 {
			s.cur, s.pending = s.pending[0], s.pending[1:]
			return true
		}
		if s.done {
			s.release()
			return false
		}
		var idle <-chan time.Time
		if s.timer != nil {
			idle = s.timer.C
		}
		if m := s.q.pop(); m != nil {
			if ev, ok := s.handle(m); ok {
				s.cur = ev
				return true
			}
			continue
		}
		select {
		case <-s.q.ready:
		case <-s.ctx.Done():
			s.c.publishCancel(s.reqID)
			s.end(events.StatusCancelled, "cancelled", nil)
		case <-idle:
			s.c.publishCancel(s.reqID)
			s.end(events.StatusFailed, "idle timeout", &events.ErrorEvent{
				Code: CodeIdleTimeout, Message: fmt.Sprintf("no event from ingest for %v on request %s", s.c.o.IdleTimeout, s.reqID),
			})
		}
	}
}

// handle decodes one message; false means the stream was ended instead.
func (s *ingestStream) handle(m *nats.Msg) (events.Event, bool) {
	if s.timer != nil {
		s.timer.Reset(s.c.o.IdleTimeout)
	}
	env, err := events.DecodeEnvelope(m.Header, m.Data)
	var ev events.Event
	if err == nil {
		ev, err = events.DecodeStreamEvent(env.Type, env.Data)
	}
	if err != nil {
		s.c.publishCancel(s.reqID)
		s.end(events.StatusFailed, "invalid event", &events.ErrorEvent{
			Code: CodeInvalidEvent, Message: fmt.Sprintf("invalid provider stream event on request %s: %v", s.reqID, err),
		})
		return nil, false
	}
	if env.Seq != 0 { // a stream without seq cannot be checked
		if want := s.lastSeq + 1; env.Seq != want {
			what := "gap"
			if env.Seq < want {
				what = "duplicate"
			}
			s.c.publishCancel(s.reqID)
			s.end(events.StatusFailed, "stream "+what, &events.ErrorEvent{
				Code:    CodeStreamGap,
				Message: fmt.Sprintf("stream %s on request %s: got seq %d, want %d (events were lost or repeated)", what, s.reqID, env.Seq, want),
			})
			return nil, false
		}
		s.lastSeq = env.Seq
	}
	switch e := ev.(type) {
	case events.BlockStart:
		s.setOpen(e.Index, e.BlockType)
	case events.BlockStop:
		s.closeBlock(e.Index)
	case events.BlockAbort:
		s.closeBlock(e.Index)
	case events.StatusEvent:
		if e.Status.Terminal() {
			s.done, s.received = true, true
		}
	}
	return ev, true
}

// end synthesizes a well-formed end: aborts of the open blocks, the error
// event if any, the terminal status.
func (s *ingestStream) end(st events.StreamStatus, reason string, errEv *events.ErrorEvent) {
	slices.SortFunc(s.open, func(a, b openBlock) int { return cmp.Compare(a.index, b.index) })
	for _, b := range s.open {
		s.pending = append(s.pending, events.BlockAbort{Index: b.index, BlockType: b.typ, Reason: reason})
	}
	s.open = nil
	if errEv != nil {
		s.pending = append(s.pending, *errEv)
	}
	s.pending = append(s.pending, events.StatusEvent{Status: st})
	s.done = true
	s.release()
}

type openBlock struct {
	index int
	typ   events.BlockType
}

// setOpen records block index as open with type typ (a repeated start
// replaces the type).
func (s *ingestStream) setOpen(index int, typ events.BlockType) {
	for i := range s.open {
		if s.open[i].index == index {
			s.open[i].typ = typ
			return
		}
	}
	s.open = append(s.open, openBlock{index, typ})
}

func (s *ingestStream) closeBlock(index int) {
	s.open = slices.DeleteFunc(s.open, func(b openBlock) bool { return b.index == index })
}

func (s *ingestStream) release() {
	if s.closed {
		return
	}
	s.closed = true
	s.c.unroute(s.reqID)
	if s.requestSub != nil {
		_ = s.requestSub.Unsubscribe()
	}
	s.q.clear()
	if s.timer != nil {
		s.timer.Stop()
	}
}

func (s *ingestStream) Current() events.Event { return s.cur }

// WellFormed marks the stream as normalized: ingest normalized the events
// before publishing them, and the client ends a broken stream well-formed
// itself, so the worker's llm.Normalize passes it through.
func (s *ingestStream) WellFormed() {}

// Warnings implements llm.Warner with the warnings of ingest's reply.
func (s *ingestStream) Warnings() []events.Warning { return s.warnings }

var (
	_ llm.WellFormed = (*ingestStream)(nil)
	_ llm.Warner     = (*ingestStream)(nil)
)

// Err is nil: every failure is reported in-stream as an error event and
// status failed, so that the stream stays well-formed.
func (s *ingestStream) Err() error { return nil }

// Close stops reading. Closing before the terminal status tells ingest to
// cancel the provider call.
func (s *ingestStream) Close() error {
	if !s.received && !s.done {
		s.c.publishCancel(s.reqID)
	}
	s.done = true
	s.pending = nil
	s.release()
	s.q.queuedWG.Wait()
	return nil
}

// streamQueue holds one stream's messages between the subscription's
// callback, which never blocks, and the stream's reader. It grows with the
// backlog up to max messages; a message beyond that is dropped, which the
// reader sees as a seq gap.
type streamQueue struct {
	mu    sync.Mutex
	msgs  []*nats.Msg
	head  int
	max   int
	ready chan struct{} // signalled when msgs becomes non-empty

	// onQueued takes the queued statuses (llm.WithQueued) instead of
	// the reader; queuedWG counts the calls still running.
	onQueued func(events.StatusEvent)
	queuedWG sync.WaitGroup
}

func newStreamQueue(max int) *streamQueue {
	return &streamQueue{max: max, ready: make(chan struct{}, 1)}
}

func (q *streamQueue) push(m *nats.Msg) {
	if q.onQueued != nil && q.takeQueued(m) {
		return
	}
	q.mu.Lock()
	n := len(q.msgs) - q.head
	if n < q.max {
		q.msgs = append(q.msgs, m)
	}
	q.mu.Unlock()
	if n == 0 {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
}

// queuedValue is in the JSON of a queued status (binary data or
// structured body) and, since quotes inside a JSON string are escaped, in
// no string that only contains the word.
var queuedValue = []byte(`"` + events.StatusQueued + `"`)

// takeQueued passes m to onQueued, on a goroutine of its own so that the
// subscription's callback never waits for it, when m is a queued status;
// it reports whether it was one. The status arrives while the requester
// still waits for ingest's reply, which comes once the call may start.
func (q *streamQueue) takeQueued(m *nats.Msg) bool {
	if t := m.Header[events.HeaderType]; len(t) > 0 && (t[0] != events.TypeLLMStatus || len(m.Header[events.HeaderSeq]) > 0) {
		return false // binary mode: anything but a status without seq
	}
	if !bytes.Contains(m.Data, queuedValue) {
		return false
	}
	env, err := events.DecodeEnvelope(m.Header, m.Data)
	if err != nil || env.Type != events.TypeLLMStatus || env.Seq != 0 {
		return false
	}
	ev, err := events.DecodeStreamEvent(env.Type, env.Data)
	st, ok := ev.(events.StatusEvent)
	if err != nil || !ok || st.Status != events.StatusQueued {
		return false
	}
	q.queuedWG.Add(1)
	go func() {
		defer q.queuedWG.Done()
		q.onQueued(st)
	}()
	return true
}

// pop returns the oldest queued message, or nil.
func (q *streamQueue) pop() *nats.Msg {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.msgs) {
		return nil
	}
	m := q.msgs[q.head]
	q.msgs[q.head] = nil
	q.head++
	if q.head == len(q.msgs) {
		// Emptied: start over at the front, and let a burst's backing
		// array go rather than keep it for the rest of the stream.
		q.head = 0
		if cap(q.msgs) > 64 {
			q.msgs = nil
		} else {
			q.msgs = q.msgs[:0]
		}
	}
	return m
}

// clear drops what is queued (the stream was released).
func (q *streamQueue) clear() {
	q.mu.Lock()
	q.msgs, q.head = nil, 0
	q.mu.Unlock()
}
