package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
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
	// Buffer is the number of stream messages buffered between the NATS
	// dispatcher and the reader (0 = DefaultStreamBuffer). The dispatcher
	// never blocks: on overflow NATS drops the message, which the reader
	// sees as a seq gap.
	Buffer int
}

// Client is an llm.Provider that sends completion requests to ingest
// over NATS (docs/protocol.md, "Model calls") and reads the provider stream events back.
type Client struct {
	nc       *nats.Conn
	subjects events.Subjects
	o        ClientOptions
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
	return &Client{nc: nc, subjects: events.NewSubjects(o.Prefix), o: o}
}

// Stream sends req (a request id is generated when req.RequestID is empty)
// and returns its stream. It subscribes to P.llm.stream.<request_id> before
// it sends the request, so no event is missed. Cancelling ctx publishes
// P.llm.cancel.<request_id> and ends the stream with status cancelled.
func (c *Client) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	if req.RequestID == "" {
		req.RequestID = nuid.Next()
	}
	if !events.ValidToken(req.RequestID) {
		return nil, fmt.Errorf("%w: request_id %q is not a subject token", events.ErrInvalid, req.RequestID)
	}
	streamSubj := c.subjects.LLMStream(req.RequestID)
	ch := make(chan *nats.Msg, c.o.Buffer)
	sub, err := c.nc.ChanSubscribe(streamSubj, ch)
	if err != nil {
		return nil, fmt.Errorf("ingest: subscribe %s: %w", streamSubj, err)
	}
	env, err := events.NewEnvelope(c.o.Source, events.TypeLLMComplete, req)
	if err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	env.Subject = req.RequestID
	telemetry.Inject(ctx, env)
	rctx, cancel := context.WithTimeout(ctx, c.o.RequestTimeout)
	reply, err := c.nc.RequestMsgWithContext(rctx, cenats.NewMsg(c.subjects.LLMComplete(), env))
	cancel()
	if err == nil {
		err = c.checkReply(reply, streamSubj)
	} else if ctx.Err() != nil {
		err = ctx.Err()
	} else if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		err = fmt.Errorf("%w on %s within %v (is ingest running?): %w", ErrNoIngest, c.subjects.LLMComplete(), c.o.RequestTimeout, err)
	} else {
		err = fmt.Errorf("ingest: request %s: %w", c.subjects.LLMComplete(), err)
	}
	if err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	s := &ingestStream{c: c, ctx: ctx, reqID: req.RequestID, sub: sub, ch: ch}
	if c.o.IdleTimeout > 0 {
		s.timer = time.NewTimer(c.o.IdleTimeout)
	}
	return s, nil
}

func (c *Client) checkReply(m *nats.Msg, streamSubj string) error {
	if m.Header.Get(micro.ErrorCodeHeader) != "" {
		_, err := DecodeReply(m)
		return err // an *Error, or ErrNoReply for a malformed code
	}
	data := m.Data
	env, err := events.DecodeEnvelope(m.Header, m.Data)
	switch {
	case err == nil:
		data = env.Data
	case !errors.Is(err, events.ErrNotCloudEvent):
		return fmt.Errorf("%w: %w", ErrBadReply, err)
	}
	r, err := events.Decode[events.CompletionReply](data)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadReply, err)
	}
	if r.StreamSubject != streamSubj {
		return fmt.Errorf("%w: stream_subject %q, want %q", ErrBadReply, r.StreamSubject, streamSubj)
	}
	return nil
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
	c     *Client
	ctx   context.Context
	reqID string
	sub   *nats.Subscription
	ch    chan *nats.Msg
	timer *time.Timer

	lastSeq  uint64
	open     []openBlock // by index; a stream has few open at once
	cur      events.Event
	pending  []events.Event
	done     bool // a terminal status was received or synthesized
	received bool // ingest itself sent the terminal status
	closed   bool
}

func (s *ingestStream) Next() bool {
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
		select {
		case m := <-s.ch:
			if ev, ok := s.handle(m); ok {
				s.cur = ev
				return true
			}
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
	_ = s.sub.Unsubscribe()
	if s.timer != nil {
		s.timer.Stop()
	}
}

func (s *ingestStream) Current() events.Event { return s.cur }

// WellFormed marks the stream as normalized: ingest normalized the events
// before publishing them, and the client ends a broken stream well-formed
// itself, so the worker's llm.Normalize passes it through.
func (s *ingestStream) WellFormed() {}

var _ llm.WellFormed = (*ingestStream)(nil)

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
	return nil
}
