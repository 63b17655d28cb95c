package toolexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/tool"
)

// cancelIDs reads the turn and call ids of P.tool.cancel.<turn_id>.<call_id>.
func cancelIDs(subject string) (turnID, callID string, ok bool) {
	i := strings.LastIndexByte(subject, '.')
	if i <= 0 {
		return "", "", false
	}
	j := strings.LastIndexByte(subject[:i], '.')
	turnID, callID = subject[j+1:i], subject[i+1:]
	return turnID, callID, events.ValidToken(turnID) && events.ValidToken(callID)
}

// cancelCall cancels the running call key (events.ToolMsgID), or
// remembers the cancel for a call not running here yet.
func (s *Server) cancelCall(key string, cause error) {
	s.mu.Lock()
	c := s.running[key]
	if c == nil && !s.cancelled[key] {
		if old := s.cring[s.cringPos]; old != "" {
			delete(s.cancelled, old)
		}
		s.cring[s.cringPos] = key
		s.cringPos = (s.cringPos + 1) % cancelRing
		s.cancelled[key] = true
	}
	s.mu.Unlock()
	if c != nil {
		c(cause)
	}
}

// pullExpiry is how long one pull request waits on the server: AckWait,
// kept between 1s and 30s.
func (s *Server) pullExpiry() time.Duration {
	return min(max(s.cfg.AckWait, time.Second), 30*time.Second)
}

// pull is one concurrency slot of one tool: take a call, run it, repeat.
func (s *Server) pull(ctx context.Context, h *hosted) {
	defer s.loops.Done()
	backoff := 50 * time.Millisecond
	for {
		if ctx.Err() != nil {
			return
		}
		handled, err := s.consume(ctx, h)
		switch {
		case ctx.Err() != nil, errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, jetstream.ErrConnectionClosed),
			errors.Is(err, jetstream.ErrConsumerDeleted):
			return
		case errors.Is(err, errReconnected):
			backoff = 50 * time.Millisecond
			continue // a fresh pull at once
		case handled:
			backoff = 50 * time.Millisecond
		}
		s.log.Warn("toolexec: pull", "tool", h.entry.Name, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// consume runs the calls of one standing pull until it fails or ctx ends.
// The pull asks for one call at a time, and for the next only when the
// slot asks (Next): a busy slot holds no call that an idle replica could
// run. Unlike a Fetch per call, the pull's subscription lives as long as
// the slot, so a call reaches the slot in one hand-off from the
// connection's reader, and no subscription is made and removed per call.
// Pull requests expire after about AckWait: a replica cut off from the
// network keeps its outstanding requests on the server until they expire,
// and each would take (and lose) one redelivery.
//
// A reconnect ends the pull (errReconnected), and the slot starts a new
// one with an inbox of its own. The iterator pulls again after a
// reconnect, and its requests from before stay at the server until they
// expire, with interest once the connection subscribes the inbox again:
// each could deliver a call into the iterator's buffer of one
// (PullMaxMessages) while the slot runs another, and nats.go drops the
// call beyond it (a slow consumer), which then waits for AckWait. Drain
// unsubscribes the inbox, so that the server drops those requests, and
// hands out the call already delivered, if any.
//
// handled is whether it ran at least one call.
func (s *Server) consume(ctx context.Context, h *hosted) (handled bool, err error) {
	it, err := h.cons.Messages(jetstream.PullMaxMessages(1), jetstream.PullExpiry(s.pullExpiry()))
	if err != nil {
		return false, err
	}
	defer it.Stop()
	defer context.AfterFunc(ctx, it.Stop)()
	var reconnected atomic.Bool
	status := s.nc.StatusChanged(nats.CONNECTED)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for range status { // closed by RemoveStatusListener
			if !reconnected.Swap(true) {
				it.Drain()
			}
		}
	}()
	defer func() {
		s.nc.RemoveStatusListener(status)
		<-watched
	}()
	for {
		m, err := it.Next()
		if err != nil {
			if reconnected.Load() && errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				err = errReconnected
			}
			return handled, err
		}
		handled = true
		s.handle(m, h)
	}
}

// errReconnected ends a pull whose connection reconnected (consume).
var errReconnected = errors.New("toolexec: the connection reconnected; the pull starts again")

// handle runs one delivered call: decode, skip if already answered, run,
// publish the result, ack.
func (s *Server) handle(m jetstream.Msg, h *hosted) {
	req, env, err := decodeCall(m.Headers(), m.Data())
	if err != nil {
		s.log.Warn("toolexec: undecodable call", "tool", h.entry.Name, "err", err)
		if ids, ok := callIDs(m.Headers(), m.Data()); ok {
			_ = s.publishResult(events.ToolCallResult{
				CallID: ids.CallID, TurnID: ids.TurnID, Name: h.entry.Name, IsError: true,
				Content: fmt.Sprintf("the call of tool %q could not be decoded: %v", h.entry.Name, err),
			}, ids.SessionID)
		}
		_ = m.TermWithReason("undecodable tool call")
		return
	}
	key := events.ToolMsgID(req.TurnID, req.CallID)
	var seq uint64
	redelivered := true // unless the metadata says otherwise
	if md, err := m.Metadata(); err == nil {
		seq = md.Sequence.Stream
		redelivered = md.NumDelivered > 1
		if md.NumDelivered > 1 {
			telemetry.RecordRedelivery(context.Background(), "tool_call", h.entry.Name)
		} else {
			telemetry.RecordQueueWait(context.Background(), h.entry.Name, time.Since(md.Timestamp))
		}
	}
	state, runningSeq := s.begin(key, seq)
	switch state {
	case callAnswered: // its result is published: this delivery is a duplicate
		_ = m.Ack()
		return
	case callRunning:
		if runningSeq == seq {
			// A redelivery of the message this replica runs: the running
			// delivery acknowledges it once its result is stored, or gives
			// it back. An ack here would drop the call if that result then
			// could not be stored.
			return
		}
		// Another message of the same call (published again after the
		// duplicate window): nothing would ever acknowledge it, so it comes
		// back shortly, when the running one is answered.
		_ = m.NakWithDelay(duplicateRecheck)
		return
	}
	answered := false
	defer func() { s.end(key, answered) }()
	// The first delivery of a call its turn published for the first time
	// cannot have a stored result: nothing ran it before. Every other
	// delivery may be of a call answered already (its acknowledgement
	// lost, or a message of a call the turn published again).
	if redelivered || !req.FirstPublish {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, seen, err := s.rc.StoredResult(sctx, req.TurnID, req.CallID)
		cancel()
		if err != nil {
			s.log.Warn("toolexec: stored result lookup", "call_id", req.CallID, "err", err)
		}
		if seen { // a duplicate delivery of a call that already has its result
			answered = true
			_ = m.Ack()
			return
		}
	}
	// In progress until the result is stored, publishing included: a
	// result that takes a while to store (no stream leader) must not let
	// the call be redelivered meanwhile.
	stopProgress := s.keepAlive(m)
	defer stopProgress()
	if s.log.Enabled(context.Background(), slog.LevelDebug) { // its arguments cost 3 allocations per call
		s.log.Debug("tool call started", "tool", h.entry.Name, "call_id", req.CallID, "turn_id", req.TurnID, "stream_seq", seq)
	}
	began := time.Now()
	res, stopped := s.run(env, h, req)
	if stopped {
		_ = m.Nak() // interrupted by Stop: let another replica run it
		return
	}
	h.queueCalls.Add(1)
	h.queueNanos.Add(int64(time.Since(began)))
	if res.IsError {
		h.queueErrors.Add(1)
	}
	if err := s.publishResult(res, req.SessionID); err != nil {
		s.log.Warn("toolexec: publish result", "call_id", req.CallID, "err", err)
		_ = m.Nak()
		return
	}
	answered = true
	_ = m.Ack()
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("tool call answered", "tool", h.entry.Name, "call_id", req.CallID, "turn_id", req.TurnID, "is_error", res.IsError)
	}
}

// What begin found.
const (
	callNew      = iota // not handled here: this delivery runs it
	callRunning         // running here under another delivery
	callAnswered        // answered here recently
)

// begin marks a call as handled here unless it already is (callRunning)
// or was answered recently (callAnswered).
func (s *Server) begin(callID string, seq uint64) (state int, runningSeq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answered[callID] {
		return callAnswered, 0
	}
	if rs, ok := s.handling[callID]; ok {
		return callRunning, rs
	}
	s.handling[callID] = seq
	return callNew, 0
}

func (s *Server) end(callID string, answered bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.handling, callID)
	if !answered {
		return
	}
	if old := s.ring[s.ringPos]; old != "" {
		delete(s.answered, old)
	}
	s.ring[s.ringPos] = callID
	s.ringPos = (s.ringPos + 1) % answeredRing
	s.answered[callID] = true
}

// keepAlive sends in-progress acks while a call runs so that AckWait can be
// short (fast redelivery when a replica dies) and calls still run long.
// A timer rather than a goroutine: most calls end before the first one.
func (s *Server) keepAlive(m jetstream.Msg) (stop func()) {
	every := max(s.cfg.AckWait/3, 10*time.Millisecond)
	var mu sync.Mutex // orders the acks before stop's return
	stopped := false
	var t *time.Timer
	mu.Lock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		_ = m.InProgress()
		t.Reset(every)
	})
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		t.Stop()
	}
}

// run executes req on h and turns every failure into an error result the
// model can act on. stopped is true when Stop interrupted the call. env
// (nil for a plain JSON call) brings the caller's trace context: the
// call's span is a child of the turn's execute_tool span.
func (s *Server) run(env *events.Envelope, h *hosted, req events.ToolCallRequest) (res events.ToolCallResult, stopped bool) {
	start := time.Now()
	res = events.ToolCallResult{CallID: req.CallID, TurnID: req.TurnID, Name: h.entry.Name}
	callCtx, span := s.startSpan(env, h, req)
	defer func() { endSpan(span, res, stopped) }()
	fail := func(format string, args ...any) (events.ToolCallResult, bool) {
		res.IsError = true
		res.Content = fmt.Sprintf(format, args...)
		res.DurationMS = time.Since(start).Milliseconds()
		return res, false
	}
	if req.Name != h.entry.Name {
		return fail("unknown tool %q (this executor runs %q on this subject)", req.Name, h.entry.Name)
	}
	if !req.Deadline.IsZero() && !start.Before(req.Deadline) {
		return fail("tool %q was not run: the call's deadline %s passed before it started", h.entry.Name, req.Deadline.Format(time.RFC3339))
	}
	if err := h.validate(req.Input); err != nil {
		return fail("%v", err)
	}
	limit := time.Duration(h.entry.TimeoutMS) * time.Millisecond
	if limit <= 0 {
		limit = s.cfg.DefaultTimeout
	}
	deadline := start.Add(limit)
	if !req.Deadline.IsZero() && req.Deadline.Before(deadline) {
		deadline = req.Deadline
	}
	cctx, ccancel := context.WithCancelCause(callCtx)
	// The tool's progress reports go to the turn waiting for the call
	// (core NATS, throttled; none after the call's end).
	progress, stopProgress := tool.Throttle(func(p tool.Progress) {
		s.publishProgress(req, h.entry.Name, p)
	}, 0)
	defer stopProgress()
	ctx, cancel := context.WithDeadline(tool.WithProgress(tool.WithCall(cctx, tool.CallInfo{TurnID: req.TurnID, SessionID: req.SessionID, CallID: req.CallID}), progress), deadline)
	defer cancel()
	defer ccancel(nil)
	key := events.ToolMsgID(req.TurnID, req.CallID)
	s.mu.Lock()
	early := s.cancelled[key]
	if !early {
		s.running[key] = ccancel
	}
	s.mu.Unlock()
	if early {
		return fail("tool %q was cancelled before it started", h.entry.Name)
	}
	defer func() {
		s.mu.Lock()
		delete(s.running, key)
		s.mu.Unlock()
	}()

	type outcome struct {
		out   string
		parts tool.Content
		err   error
	}
	ch := make(chan outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("toolexec: tool panicked", "tool", h.entry.Name, "panic", p, "stack", string(debug.Stack()))
				ch <- outcome{err: &tool.ExecutionError{Tool: h.entry.Name, Err: fmt.Errorf("%w: %v", tool.ErrPanicked, p)}}
			}
		}()
		out, parts, err := tool.ExecuteContent(ctx, h.t, normalize(req.Input))
		ch <- outcome{out, parts, err}
	}()
	var o outcome
	select {
	case o = <-ch:
	case <-ctx.Done():
		// A tool that ignores its context must not hold the call past its
		// deadline: answer now, let the goroutine finish on its own.
		select {
		case o = <-ch:
		case <-time.After(100 * time.Millisecond):
			o = outcome{err: ctx.Err()}
		}
	}
	if o.err == nil { // finished: its result counts even if a cancel came late
		if o.parts != nil {
			if err := events.ValidateResultParts("content", o.parts); err != nil {
				return fail("tool %q returned an invalid result: %v", h.entry.Name, err)
			}
			if err := s.offloadMedia(o.parts); err != nil {
				return fail("tool %q returned media that could not be stored: %v", h.entry.Name, err)
			}
			if size, limit := tool.ResultSize(o.out, o.parts), s.nc.MaxPayload(); limit > 0 && int64(size) > limit-resultHeadroom {
				return fail("tool %q returned a result of %d bytes with its inline media, more than a NATS message holds (max payload %d bytes); return smaller media, or media by URL or ref",
					h.entry.Name, size, limit)
			}
			res.Parts = o.parts
		}
		res.Content = o.out
		res.DurationMS = time.Since(start).Milliseconds()
		return res, false
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errStopped):
		return res, true
	case errors.Is(cause, errCancelled):
		return fail("tool %q was %v", h.entry.Name, cause)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fail("tool %q timed out after %v", h.entry.Name, deadline.Sub(start).Round(time.Millisecond))
	}
	if errors.Is(o.err, tool.ErrPanicked) {
		return fail("%v (a bug in the tool, not in your input)", o.err)
	}
	return fail("%v", o.err)
}

// resultHeadroom is what a result message needs besides its content:
// the CloudEvent headers, ids and JSON punctuation.
const resultHeadroom = 4 << 10

func normalize(in json.RawMessage) json.RawMessage {
	if len(in) == 0 {
		return json.RawMessage(`{}`)
	}
	return in
}

func (s *Server) publishResult(r events.ToolCallResult, sessionID string) error {
	env, err := events.NewEnvelope(s.source, events.TypeToolResult, r)
	if err != nil {
		return err
	}
	env.Subject, env.TurnID, env.SessionID = r.TurnID, r.TurnID, sessionID
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = s.js.PublishMsg(ctx, cenats.NewMsg(s.subjects.ToolResult(r.TurnID, r.CallID), env),
		jetstream.WithMsgID(events.ToolMsgID(r.TurnID, r.CallID)))
	return err
}

// publishProgress sends a progress report of a running call on
// P.tool.progress.<turn_id>.<call_id> (core NATS, best effort: a report
// is a hint for a UI, not part of the call's record).
func (s *Server) publishProgress(req events.ToolCallRequest, name string, p tool.Progress) {
	env, err := events.NewEnvelope(s.source, events.TypeToolProgress, events.ToolProgress{
		CallID: req.CallID, Name: name, Progress: p.Progress, Total: p.Total, Message: p.Message})
	if err != nil {
		return
	}
	env.Subject, env.TurnID, env.SessionID = req.TurnID, req.TurnID, req.SessionID
	if err := s.nc.PublishMsg(cenats.NewMsg(s.subjects.ToolProgress(req.TurnID, req.CallID), env)); err != nil {
		s.log.Debug("toolexec: publish progress", "call_id", req.CallID, "err", err)
	}
}

func decodeCall(h nats.Header, data []byte) (events.ToolCallRequest, *events.Envelope, error) {
	env, err := events.DecodeEnvelope(h, data)
	if err != nil {
		return events.ToolCallRequest{}, nil, err
	}
	if env.Type != events.TypeToolCall {
		return events.ToolCallRequest{}, nil, fmt.Errorf("%w: type %q, want %q", events.ErrInvalid, env.Type, events.TypeToolCall)
	}
	req, err := events.DecodeData[events.ToolCallRequest](env)
	return req, env, err
}

type ids struct {
	CallID    string `json:"call_id"`
	TurnID    string `json:"turn_id"`
	SessionID string `json:"session_id"`
}

// callIDs reads the ids of an otherwise undecodable call, so that its
// caller still gets an error result instead of waiting for its deadline.
func callIDs(h nats.Header, data []byte) (ids, bool) {
	// In binary mode the body is the data even when an attribute is bad.
	if env, err := events.DecodeEnvelope(h, data); err == nil {
		data = env.Data
	}
	var v ids
	if json.Unmarshal(data, &v) != nil {
		return ids{}, false
	}
	return v, events.ValidToken(v.CallID) && events.ValidToken(v.TurnID)
}

// invoke serves the micro endpoint: a direct call answered by reply.
func (s *Server) invoke(h *hosted, r micro.Request) {
	// Add under mu and only before Stop: Stop waits on invokes after it set
	// stopped under mu, so no Add can race with that Wait.
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		_ = r.Error("503", "executor stopping", nil)
		return
	}
	s.invokes.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.invokes.Done()
		req, env, err := decodeCall(nats.Header(r.Headers()), r.Data())
		if errors.Is(err, events.ErrNotCloudEvent) {
			req, err = events.Decode[events.ToolCallRequest](r.Data())
		}
		if err != nil {
			_ = r.Error("400", "invalid tool call: "+err.Error(), nil)
			return
		}
		res, stopped := s.run(env, h, req)
		if stopped {
			_ = r.Error("503", "executor stopping", nil)
			return
		}
		out, err := events.NewEnvelope(s.source, events.TypeToolResult, res)
		if err != nil {
			_ = r.Error("500", err.Error(), nil)
			return
		}
		out.Subject, out.TurnID, out.SessionID = req.TurnID, req.TurnID, req.SessionID
		_ = r.Respond(out.Data, micro.WithHeaders(micro.Headers(cenats.NewMsg("", out).Header)))
	}()
}
