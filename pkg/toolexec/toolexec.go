package toolexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natsrt"
	"github.com/llmworker/llmworker/pkg/tool"
)

// ServiceName is the micro service every toolexec replica registers.
const ServiceName = "llmw-toolexec"

// Defaults of Config.
const (
	DefaultConcurrency    = 8
	DefaultAckWait        = 30 * time.Second
	DefaultTimeout        = 5 * time.Minute
	DefaultServiceVersion = "1.0.0"
)

// Config configures a Server. The zero value works: prefix llmw, a random
// instance id, no logging, 8 concurrent calls per tool.
type Config struct {
	// Prefix is the subject prefix P.
	Prefix string
	// Instance names this replica in the CloudEvents source
	// (/llmw/toolexec/<instance>) and the micro metadata ("" = random).
	Instance string
	// Logger receives operational logs (nil = discarded).
	Logger *slog.Logger
	// Concurrency is the number of calls of one tool this replica runs at
	// once (0 = DefaultConcurrency). Each slot pulls one call at a time, so a
	// busy replica leaves calls to idle ones instead of hoarding them.
	Concurrency int
	// AckWait of the tool consumers (0 = DefaultAckWait): how long a call
	// taken by a replica that died stays invisible before it is
	// redelivered. Running calls send in-progress acks every AckWait/3.
	AckWait time.Duration
	// MaxDeliver bounds redeliveries of one call (0 = unlimited).
	MaxDeliver int
	// DefaultTimeout bounds a call whose request has no deadline and whose
	// tool declares no timeout (0 = DefaultTimeout).
	DefaultTimeout time.Duration
	// Version of the micro service ("" = DefaultServiceVersion; SemVer).
	Version string
	// Provision configures the streams and buckets Start creates if
	// missing; its Prefix is taken from Prefix.
	Provision natsrt.ProvisionOptions
}

// Server hosts tool.Tool values: it publishes their catalog entries and
// micro endpoints and runs the calls it pulls from their durable consumers
// (DESIGN.md §6).
type Server struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	cfg      Config
	subjects events.Subjects
	source   string
	log      *slog.Logger
	rc       *natsrt.ToolClient // stored-result lookups

	mu      sync.Mutex
	tools   map[string]*hosted
	order   []string
	started bool
	stopped bool
	running map[string]context.CancelCauseFunc
	// handling and answered remember call ids this replica is handling
	// or answered recently: a duplicate delivery racing the first one's
	// result into LLMW_TOOLRESULTS is caught here without a lookup.
	handling map[string]bool
	answered map[string]bool
	ring     [answeredRing]string
	ringPos  int
	// cancelled remembers cancels that arrived before their call ran
	// here (a cancel can overtake the call's delivery).
	cancelled map[string]bool
	cring     [cancelRing]string
	cringPos  int
	runStop   context.CancelFunc // stops the pull loops
	callStop  context.CancelCauseFunc
	callCtx   context.Context
	loops     sync.WaitGroup
	invokes   sync.WaitGroup
	svc       micro.Service
	cancelSb  *nats.Subscription
}

type hosted struct {
	t        tool.Tool
	entry    events.ToolCatalogEntry
	validate func(json.RawMessage) error
	cons     jetstream.Consumer
}

// answeredRing is how many answered call ids a replica remembers.
const answeredRing = 4096

// cancelRing is how many early cancels a replica remembers.
const cancelRing = 1024

var (
	errCancelled = errors.New("cancelled by P.tool.cancel")
	errStopped   = errors.New("executor stopped")
)

// New returns a Server on nc. Register tools, then Start.
func New(nc *nats.Conn, cfg Config) (*Server, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("toolexec: jetstream: %w", err)
	}
	if cfg.Instance == "" {
		cfg.Instance = nuid.Next()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = DefaultAckWait
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = DefaultTimeout
	}
	if cfg.Version == "" {
		cfg.Version = DefaultServiceVersion
	}
	cfg.Provision.Prefix = cfg.Prefix
	s := &Server{
		nc: nc, js: js, cfg: cfg, subjects: events.NewSubjects(cfg.Prefix),
		source: events.Source("toolexec", cfg.Instance), log: cfg.Logger,
		tools: map[string]*hosted{}, running: map[string]context.CancelCauseFunc{},
		handling: map[string]bool{}, answered: map[string]bool{}, cancelled: map[string]bool{},
	}
	s.rc = natsrt.NewToolClient(nc, js, natsrt.ToolClientOptions{Prefix: cfg.Prefix, Source: s.source})
	return s, nil
}

// Register adds tools; call it before Start.
func (s *Server) Register(tools ...tool.Tool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStarted
	}
	for _, t := range tools {
		if t == nil {
			return fmt.Errorf("%w: nil tool", ErrInvalidTool)
		}
		e := tool.CatalogEntry(t)
		if err := e.Validate(); err != nil {
			return fmt.Errorf("%w: %q: %w", ErrInvalidTool, t.Name(), err)
		}
		if _, dup := s.tools[e.Name]; dup {
			return fmt.Errorf("%w: %q registered twice", ErrInvalidTool, e.Name)
		}
		h := &hosted{t: t, entry: e}
		if iv, ok := t.(tool.InputValidator); ok {
			h.validate = iv.ValidateInput
		} else {
			v, err := tool.NewValidator(e.InputSchema)
			if err != nil {
				return fmt.Errorf("%w: %q: %w", ErrInvalidTool, e.Name, err)
			}
			name := e.Name
			h.validate = func(in json.RawMessage) error {
				err := v.Validate(in)
				var ia *tool.InvalidArgumentError
				if errors.As(err, &ia) && ia.Tool == "" {
					c := *ia
					c.Tool = name
					return &c
				}
				return err
			}
		}
		s.tools[e.Name] = h
		s.order = append(s.order, e.Name)
	}
	return nil
}

// Tools returns the catalog entries of the registered tools.
func (s *Server) Tools() []events.ToolCatalogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]events.ToolCatalogEntry, 0, len(s.order))
	for _, n := range s.order {
		out = append(out, s.tools[n].entry)
	}
	return out
}

// ConsumerName is the durable consumer all replicas hosting a tool share.
func ConsumerName(toolName string) string { return "tool_" + toolName }

// InvokeSubject is the subject of a tool's micro endpoint,
// P.tool.invoke.<name>: a direct request/reply call (data: a
// llmw.tool.call, reply: a llmw.tool.result) that bypasses JetStream, for
// discovery tools and quick checks. Durable calls go through
// P.tool.call.<name>.
func InvokeSubject(prefix, toolName string) string {
	if prefix == "" {
		prefix = events.DefaultPrefix
	}
	return prefix + ".tool.invoke." + toolName
}

// Start provisions the streams and buckets (idempotently), publishes the
// catalog entries and micro endpoints, creates or updates the durable
// consumers and starts pulling calls.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStarted
	}
	if len(s.tools) == 0 {
		return ErrNoTools
	}
	if err := natsrt.Provision(ctx, s.js, s.cfg.Provision); err != nil {
		return fmt.Errorf("toolexec: %w", err)
	}
	cat, err := natsrt.OpenCatalog(ctx, s.js)
	if err != nil {
		return fmt.Errorf("toolexec: %w", err)
	}
	for _, n := range s.order {
		h := s.tools[n]
		if err := cat.Put(ctx, h.entry); err != nil {
			return fmt.Errorf("toolexec: %w", err)
		}
		h.cons, err = s.js.CreateOrUpdateConsumer(ctx, events.StreamToolCalls, jetstream.ConsumerConfig{
			Durable:       ConsumerName(n),
			Description:   "llmworker calls of tool " + n,
			FilterSubject: s.subjects.ToolCall(n),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       s.cfg.AckWait,
			MaxDeliver:    s.cfg.MaxDeliver,
			MaxAckPending: -1,
		})
		if err != nil {
			return fmt.Errorf("toolexec: consumer %s: %w", ConsumerName(n), err)
		}
	}
	s.cancelSb, err = s.nc.Subscribe(s.subjects.ToolCancelAll(), func(m *nats.Msg) {
		s.cancelCall(events.LastToken(m.Subject), errCancelled)
	})
	if err != nil {
		return fmt.Errorf("toolexec: subscribe cancel: %w", err)
	}
	if err := s.addService(); err != nil {
		_ = s.cancelSb.Unsubscribe()
		return err
	}
	runCtx, runStop := context.WithCancel(context.Background())
	s.callCtx, s.callStop = context.WithCancelCause(context.Background())
	s.runStop = runStop
	for _, n := range s.order {
		for range s.cfg.Concurrency {
			s.loops.Add(1)
			go s.pull(runCtx, s.tools[n])
		}
	}
	s.started = true
	s.log.Info("toolexec started", "instance", s.cfg.Instance, "tools", s.order)
	return nil
}

func (s *Server) addService() error {
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        ServiceName,
		Version:     s.cfg.Version,
		Description: "llmworker tool executor",
		Metadata:    map[string]string{"instance": s.cfg.Instance, "prefix": s.subjects.Prefix},
	})
	if err != nil {
		return fmt.Errorf("toolexec: micro service: %w", err)
	}
	for _, n := range s.order {
		h := s.tools[n]
		md := map[string]string{
			"description":  h.entry.Description,
			"input_schema": string(h.entry.InputSchema),
			"call_subject": s.subjects.ToolCall(n),
		}
		if h.entry.TimeoutMS > 0 {
			md["timeout_ms"] = strconv.FormatInt(h.entry.TimeoutMS, 10)
		}
		if h.entry.Version != "" {
			md["version"] = h.entry.Version
		}
		err := svc.AddEndpoint(n, micro.HandlerFunc(func(r micro.Request) { s.invoke(h, r) }),
			micro.WithEndpointSubject(InvokeSubject(s.cfg.Prefix, n)), micro.WithEndpointMetadata(md))
		if err != nil {
			_ = svc.Stop()
			return fmt.Errorf("toolexec: endpoint %s: %w", n, err)
		}
	}
	s.svc = svc
	return nil
}

// Stop stops pulling new calls and waits for the running ones to finish,
// publish their results and ack (drain). When ctx ends first, running calls
// are cancelled and left unacknowledged (negatively acknowledged when the
// connection still works) so that another replica runs them; Stop then
// returns ctx's error.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	if !s.started {
		s.mu.Unlock()
		return ErrNotStarted
	}
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.mu.Unlock()

	s.runStop()
	_ = s.svc.Stop()
	done := make(chan struct{})
	go func() {
		s.loops.Wait()
		s.invokes.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.callStop(errStopped)
		<-done
	}
	s.callStop(errStopped)
	_ = s.cancelSb.Unsubscribe()
	s.log.Info("toolexec stopped", "instance", s.cfg.Instance)
	return err
}

// Serve hosts tools on nc until ctx ends, then drains (up to 30 s). It is
// the few-lines way to host typed tools in one's own binary.
func Serve(ctx context.Context, nc *nats.Conn, tools ...tool.Tool) error {
	return ServeConfig(ctx, nc, Config{}, tools...)
}

// ServeConfig is Serve with a Config.
func ServeConfig(ctx context.Context, nc *nats.Conn, cfg Config, tools ...tool.Tool) error {
	s, err := New(nc, cfg)
	if err != nil {
		return err
	}
	if err := s.Register(tools...); err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Stop(sctx)
}

func (s *Server) cancelCall(callID string, cause error) {
	s.mu.Lock()
	c := s.running[callID]
	if c == nil && !s.cancelled[callID] {
		if old := s.cring[s.cringPos]; old != "" {
			delete(s.cancelled, old)
		}
		s.cring[s.cringPos] = callID
		s.cringPos = (s.cringPos + 1) % cancelRing
		s.cancelled[callID] = true
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
		// Pull requests expire after about AckWait: a replica cut off from
		// the network keeps its outstanding requests on the server until
		// they expire, and each would take (and lose) one redelivery.
		pctx, cancel := context.WithTimeout(ctx, s.pullExpiry())
		m, err := h.cons.Next(jetstream.FetchContext(pctx))
		cancel()
		if err != nil {
			switch {
			case ctx.Err() != nil, errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, jetstream.ErrConsumerDeleted):
				return
			case errors.Is(err, nats.ErrTimeout), errors.Is(err, jetstream.ErrNoMessages), errors.Is(err, context.DeadlineExceeded):
				backoff = 50 * time.Millisecond
				continue
			}
			s.log.Warn("toolexec: pull", "tool", h.entry.Name, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		s.handle(m, h)
	}
}

// handle runs one delivered call: decode, skip if already answered, run,
// publish the result, ack.
func (s *Server) handle(m jetstream.Msg, h *hosted) {
	req, err := decodeCall(m.Headers(), m.Data())
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
	if !s.begin(key) { // this replica has it: the other delivery answers
		_ = m.Ack()
		return
	}
	answered := false
	defer func() { s.end(key, answered) }()
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
	stopProgress := s.keepAlive(m)
	res, stopped := s.run(h, req)
	stopProgress()
	if stopped {
		_ = m.Nak() // interrupted by Stop: let another replica run it
		return
	}
	if err := s.publishResult(res, req.SessionID); err != nil {
		s.log.Warn("toolexec: publish result", "call_id", req.CallID, "err", err)
		_ = m.Nak()
		return
	}
	answered = true
	_ = m.Ack()
}

// begin marks a call as handled here; false if it already is or was
// answered recently.
func (s *Server) begin(callID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handling[callID] || s.answered[callID] {
		return false
	}
	s.handling[callID] = true
	return true
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
func (s *Server) keepAlive(m jetstream.Msg) (stop func()) {
	every := max(s.cfg.AckWait/3, 10*time.Millisecond)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// run executes req on h and turns every failure into an error result the
// model can act on. stopped is true when Stop interrupted the call.
func (s *Server) run(h *hosted, req events.ToolCallRequest) (res events.ToolCallResult, stopped bool) {
	start := time.Now()
	res = events.ToolCallResult{CallID: req.CallID, TurnID: req.TurnID, Name: h.entry.Name}
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
	cctx, ccancel := context.WithCancelCause(s.callCtx)
	ctx, cancel := context.WithDeadline(natsrt.WithCall(cctx, natsrt.CallInfo{TurnID: req.TurnID, SessionID: req.SessionID, CallID: req.CallID}), deadline)
	defer cancel()
	defer ccancel(nil)
	s.mu.Lock()
	early := s.cancelled[req.CallID]
	if !early {
		s.running[req.CallID] = ccancel
	}
	s.mu.Unlock()
	if early {
		return fail("tool %q was cancelled before it started", h.entry.Name)
	}
	defer func() {
		s.mu.Lock()
		delete(s.running, req.CallID)
		s.mu.Unlock()
	}()

	type outcome struct {
		out string
		err error
	}
	ch := make(chan outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("toolexec: tool panicked", "tool", h.entry.Name, "panic", p, "stack", string(debug.Stack()))
				ch <- outcome{err: &tool.ExecutionError{Tool: h.entry.Name, Err: fmt.Errorf("%w: %v", tool.ErrPanicked, p)}}
			}
		}()
		out, err := h.t.Execute(ctx, normalize(req.Input))
		ch <- outcome{out, err}
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
		res.Content = o.out
		res.DurationMS = time.Since(start).Milliseconds()
		return res, false
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errStopped):
		return res, true
	case errors.Is(cause, errCancelled):
		return fail("tool %q was cancelled", h.entry.Name)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fail("tool %q timed out after %v", h.entry.Name, deadline.Sub(start).Round(time.Millisecond))
	}
	if errors.Is(o.err, tool.ErrPanicked) {
		return fail("%v (a bug in the tool, not in your input)", o.err)
	}
	return fail("%v", o.err)
}

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
	_, err = s.js.PublishMsg(ctx, &nats.Msg{
		Subject: s.subjects.ToolResult(r.TurnID, r.CallID), Header: nats.Header(env.BinaryHeader()), Data: env.Data,
	}, jetstream.WithMsgID(events.ToolMsgID(r.TurnID, r.CallID)))
	return err
}

func decodeCall(h nats.Header, data []byte) (events.ToolCallRequest, error) {
	env, err := events.DecodeEnvelope(h, data)
	if err != nil {
		return events.ToolCallRequest{}, err
	}
	if env.Type != events.TypeToolCall {
		return events.ToolCallRequest{}, fmt.Errorf("%w: type %q, want %q", events.ErrInvalid, env.Type, events.TypeToolCall)
	}
	return events.DecodeData[events.ToolCallRequest](env)
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
		req, err := decodeCall(nats.Header(r.Headers()), r.Data())
		if errors.Is(err, events.ErrNotCloudEvent) {
			req, err = events.Decode[events.ToolCallRequest](r.Data())
		}
		if err != nil {
			_ = r.Error("400", "invalid tool call: "+err.Error(), nil)
			return
		}
		res, stopped := s.run(h, req)
		if stopped {
			_ = r.Error("503", "executor stopping", nil)
			return
		}
		env, err := events.NewEnvelope(s.source, events.TypeToolResult, res)
		if err != nil {
			_ = r.Error("500", err.Error(), nil)
			return
		}
		env.Subject, env.TurnID, env.SessionID = req.TurnID, req.TurnID, req.SessionID
		_ = r.Respond(env.Data, micro.WithHeaders(micro.Headers(env.BinaryHeader())))
	}()
}
