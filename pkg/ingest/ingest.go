package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/media"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

type state uint8

const (
	stateNew state = iota
	stateRunning
	stateDraining
	stateStopped
)

// Service is the llmw-ingest micro service: it answers completion requests
// on P.llm.complete and publishes each stream on P.llm.stream.<request_id>.
// Its methods are safe for concurrent use.
type Service struct {
	nc     *nats.Conn
	cfg    Config
	subj   events.Subjects
	source string
	log    *slog.Logger
	idle   time.Duration
	maxPay int

	mu       sync.Mutex
	state    state
	stopping bool // Stop was called
	streams  map[string]*stream
	wg       sync.WaitGroup // one per running stream, Add under mu while running
	svc      micro.Service
	cancel   *nats.Subscription
	base     context.Context
	stopAll  context.CancelFunc

	media    media.Lazy // opened on the first request with a ref
	requests objects    // LLMW_REQUESTS, opened on the first stored request
}

// stream is one running completion.
type stream struct {
	id       string
	provider string
	model    string
	cancel   context.CancelFunc
}

// New returns a Service on nc; Start makes it serve.
func New(nc *nats.Conn, cfg Config) (*Service, error) {
	if nc == nil {
		return nil, ErrNilConn
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Providers = maps.Clone(cfg.Providers)
	if cfg.Instance == "" {
		cfg.Instance = nuid.Next()
	}
	s := &Service{
		nc:      nc,
		cfg:     cfg,
		subj:    events.NewSubjects(cfg.Prefix),
		source:  events.Source("ingest", cfg.Instance),
		log:     cfg.Logger,
		idle:    cfg.IdleTimeout,
		maxPay:  cfg.MaxPayload,
		streams: make(map[string]*stream),
	}
	// jetstream.New does no I/O; the bucket is opened when a request
	// first carries a ref.
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	s.media.JS = js
	s.requests.js = js
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("instance", cfg.Instance)
	switch {
	case s.idle == 0:
		s.idle = DefaultIdleTimeout
	case s.idle < 0:
		s.idle = 0
	}
	return s, nil
}

// Source is the CloudEvents source of the events this service publishes.
func (s *Service) Source() string { return s.source }

// Start subscribes to P.llm.cancel.* and registers the micro service with
// its endpoint complete on P.llm.complete (default queue group, so that
// replicas share the load). Streams inherit ctx's values but not its
// cancellation: they run until they end or Stop gives up waiting.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateNew {
		return ErrAlreadyStarted
	}
	s.base, s.stopAll = context.WithCancel(context.WithoutCancel(ctx))

	// Every replica listens to every cancel (no queue group): only the one
	// running the stream knows it.
	sub, err := s.nc.Subscribe(s.subj.LLMCancelAll(), s.onCancel)
	if err != nil {
		s.stopAll()
		return fmt.Errorf("ingest: subscribe %s: %w", s.subj.LLMCancelAll(), err)
	}
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        ServiceName,
		Version:     Version,
		Description: "LLM provider streams as CloudEvents (llmworker)",
		Metadata: map[string]string{
			"instance": s.cfg.Instance,
			"prefix":   s.prefix(),
		},
	})
	if err == nil {
		err = svc.AddEndpoint(EndpointName, micro.HandlerFunc(s.handle),
			micro.WithEndpointSubject(s.subj.LLMComplete()),
			micro.WithEndpointMetadata(map[string]string{"type": events.TypeLLMComplete}))
		if err != nil {
			_ = svc.Stop()
		}
	}
	if err != nil {
		_ = sub.Unsubscribe()
		s.stopAll()
		return fmt.Errorf("ingest: add micro service: %w", err)
	}
	// Push the subscriptions to the server so that a request sent right
	// after Start returns is not lost.
	if err := s.nc.Flush(); err != nil {
		_ = svc.Stop()
		_ = sub.Unsubscribe()
		s.stopAll()
		return fmt.Errorf("ingest: flush: %w", err)
	}
	s.cancel, s.svc, s.state = sub, svc, stateRunning
	s.log.Info("ingest started", "subject", s.subj.LLMComplete(), "providers", s.providerNames())
	return nil
}

// Stop drains the service: it stops taking requests (requests still queued
// are refused with ErrShuttingDown), waits for the running streams to end,
// then stops listening for cancels and flushes the connection. When ctx ends
// first, the remaining streams are cancelled (they end with status
// cancelled), Stop waits for that and returns ctx's error. Stop does not
// close the connection. Calling it again (also while the first call
// drains) returns nil at once.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	switch s.state {
	case stateNew:
		s.mu.Unlock()
		return ErrNotStarted
	case stateDraining, stateStopped:
		s.mu.Unlock()
		return nil
	}
	if s.stopping {
		s.mu.Unlock()
		return nil
	}
	s.stopping = true
	svc := s.svc
	s.mu.Unlock()

	// Stop the endpoint first so that the queue group sends new requests to
	// the other replicas; requests that were already delivered to us still
	// reach handle and are counted below, or refused once we drain.
	var errs []error
	if err := svc.Stop(); err != nil {
		errs = append(errs, fmt.Errorf("ingest: stop micro service: %w", err))
	}
	s.mu.Lock()
	s.state = stateDraining
	n := len(s.streams)
	s.mu.Unlock()
	s.log.Info("ingest draining", "streams", n)

	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.stopAll()
		<-done
		errs = append(errs, fmt.Errorf("ingest: drain: %w", ctx.Err()))
	}
	s.stopAll()

	if err := s.cancel.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		errs = append(errs, fmt.Errorf("ingest: unsubscribe cancel: %w", err))
	}
	if !s.nc.IsClosed() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := s.nc.FlushWithContext(fctx); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			errs = append(errs, fmt.Errorf("ingest: flush: %w", err))
		}
		cancel()
	}
	s.mu.Lock()
	s.state = stateStopped
	s.mu.Unlock()
	s.log.Info("ingest stopped")
	return errors.Join(errs...)
}

// Running returns the request ids of the streams running now, sorted.
func (s *Service) Running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.streams))
}

func (s *Service) prefix() string {
	if s.cfg.Prefix == "" {
		return events.DefaultPrefix
	}
	return s.cfg.Prefix
}

func (s *Service) providerNames() string {
	return strings.Join(slices.Sorted(maps.Keys(s.cfg.Providers)), ",")
}

func (s *Service) onCancel(m *nats.Msg) {
	id := events.LastToken(m.Subject)
	s.mu.Lock()
	st, ok := s.streams[id]
	s.mu.Unlock()
	if ok {
		s.log.Info("cancel requested", "request_id", id)
		st.cancel()
	}
}

// request is a decoded, validated completion request.
type request struct {
	env      *events.Envelope
	req      events.CompletionRequest
	provider string
	model    string
}

// parseRequest decodes and validates a completion request. It is pure so
// that it can be fuzzed.
func parseRequest(h map[string][]string, data []byte, maxPayload int) (*request, *Error) {
	if maxPayload > 0 && len(data) > maxPayload {
		return nil, newError(KindPayloadTooLarge,
			fmt.Sprintf("request body is %d bytes, the limit is %d", len(data), maxPayload), nil)
	}
	env, err := events.DecodeEnvelope(h, data)
	if err != nil {
		return nil, invalid("not a valid CloudEvent: ", err)
	}
	if env.Type != events.TypeLLMComplete {
		return nil, &Error{Kind: KindInvalidRequest, Code: 400, Field: "type",
			Message: fmt.Sprintf("CloudEvent type must be %q, got %q", events.TypeLLMComplete, env.Type)}
	}
	cr, err := events.DecodeData[events.CompletionRequest](env)
	if err != nil {
		return nil, invalid("", err)
	}
	// The request is decoded; its raw JSON (the whole transcript, and the
	// NATS message's buffer it points into) need not live as long as the
	// stream.
	env.Data = nil
	p, m := cr.Provider()
	return &request{env: env, req: cr, provider: p, model: m}, nil
}

func invalid(prefix string, err error) *Error {
	e := newError(KindInvalidRequest, prefix+err.Error(), err)
	var fe *events.FieldError
	if errors.As(err, &fe) {
		e.Field = fe.Field
	}
	return e
}

// isKind reports whether err is a provider error of kind k.
func isKind(err error, k llm.ErrorKind) bool {
	var pe llm.ProviderError
	return errors.As(err, &pe) && pe.Kind() == k
}

// resolve finds the provider of a request.
func (s *Service) resolve(r *request) (llm.Provider, *Error) {
	f, ok := s.cfg.Providers[r.provider]
	if !ok || f == nil {
		known := s.providerNames()
		if known == "" {
			known = "none"
		}
		return nil, newError(KindUnknownProvider,
			fmt.Sprintf("unknown provider %q in model %q (configured: %s)", r.provider, r.req.Model, known), nil)
	}
	p, err := f(r.model)
	switch {
	case errors.Is(err, ErrUnknownModel):
		return nil, newError(KindUnknownModel, fmt.Sprintf("provider %s: %v", r.provider, err), err)
	case errors.Is(err, ErrMissingAPIKey) || isKind(err, llm.KindMissingAPIKey):
		return nil, newError(KindMissingAPIKey, fmt.Sprintf("provider %s: %v", r.provider, err), err)
	case err != nil:
		return nil, newError(KindProviderSetup, fmt.Sprintf("provider %s: %v", r.provider, err), err)
	case p == nil:
		return nil, newError(KindProviderSetup, fmt.Sprintf("provider %s: factory returned no provider", r.provider), nil)
	}
	return p, nil
}

func (s *Service) maxPayload() int {
	if s.maxPay > 0 {
		return s.maxPay
	}
	return int(s.nc.MaxPayload())
}

// handle is the micro handler of P.llm.complete. It runs on the endpoint's
// subscription goroutine, so it only validates, replies and hands the
// stream to its own goroutine; a request whose data waits in LLMW_REQUESTS
// is read on a goroutine of its own (stored.go).
func (s *Service) handle(mr micro.Request) {
	if name := mr.Headers().Get(events.HeaderRequestObject); name != "" {
		s.handleStored(mr, name)
		return
	}
	s.admit(map[string][]string(mr.Headers()), mr.Data(), s.maxPayload(), mr.Reply(),
		func(r *request, e *Error) { s.refuse(mr, r, e) })
}

// admit validates a request whose data is at most limit bytes and starts
// its stream; refuse answers it when it cannot be served.
func (s *Service) admit(h map[string][]string, data []byte, limit int, replyTo string, refuse func(*request, *Error)) {
	r, rerr := parseRequest(h, data, limit)
	var p llm.Provider
	if rerr == nil {
		p, rerr = s.resolve(r)
	}
	if rerr == nil {
		p = s.limited(p, r, len(data))
	}
	if rerr != nil {
		refuse(r, rerr)
		return
	}
	id := r.req.RequestID
	s.mu.Lock()
	if s.state != stateRunning {
		s.mu.Unlock()
		refuse(r, newError(KindShuttingDown, "ingest instance "+s.cfg.Instance+" is shutting down; retry", nil))
		return
	}
	if _, dup := s.streams[id]; dup {
		s.mu.Unlock()
		refuse(r, newError(KindDuplicateRequest, fmt.Sprintf("request_id %q is already streaming", id), nil))
		return
	}
	ctx, cancel := context.WithCancel(s.base)
	st := &stream{id: id, provider: r.provider, model: r.model, cancel: cancel}
	s.streams[id] = st
	s.wg.Add(1)
	s.mu.Unlock()

	// The stream goroutine replies by publishing to the reply subject: a
	// micro.Request must not be used once the handler returned (see
	// refuseLate).
	go s.run(ctx, st, p, r, replyTo)
}

func (s *Service) refuse(mr micro.Request, r *request, e *Error) {
	body, _ := json.Marshal(e)
	hdr := micro.Headers{HeaderErrorKind: []string{string(e.Kind)}}
	attrs := []any{"kind", e.Kind, "code", e.Code, "reason", e.Message}
	if r != nil {
		attrs = append(attrs, "request_id", r.req.RequestID, "model", r.req.Model)
	}
	s.log.Warn("request refused", attrs...)
	// Header values cannot hold line breaks; FieldError messages have none,
	// but provider errors might.
	desc := oneLine(e.Message)
	if err := mr.Error(fmt.Sprint(e.Code), desc, body, micro.WithHeaders(hdr)); err != nil {
		s.log.Warn("error reply failed", "err", err)
	}
}

// refuseLate sends an error reply after the micro handler has returned.
// micro.Request.Error records the error on the request for the endpoint's
// statistics, which the handler wrapper reads when the handler returns, so
// calling it later is a data race; the reply is published directly instead,
// in the same micro error format.
func (s *Service) refuseLate(reply string, r *request, e *Error) {
	attrs := []any{"kind", e.Kind, "code", e.Code, "reason", e.Message}
	if r != nil {
		attrs = append(attrs, "request_id", r.req.RequestID, "model", r.req.Model)
	}
	s.log.Warn("request refused", attrs...)
	if reply == "" {
		return
	}
	body, _ := json.Marshal(e)
	h := nats.Header{
		micro.ErrorHeader:     []string{oneLine(e.Message)},
		micro.ErrorCodeHeader: []string{fmt.Sprint(e.Code)},
		HeaderErrorKind:       []string{string(e.Kind)},
	}
	if err := s.nc.PublishMsg(&nats.Msg{Subject: reply, Header: h, Data: body}); err != nil {
		s.log.Warn("error reply failed", "err", err)
	}
}

// oneLine makes a message fit a header value.
func oneLine(m string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(m) }

// run streams one completion and publishes its events.
func (s *Service) run(ctx context.Context, st *stream, p llm.Provider, r *request, replyTo string) {
	start := time.Now()
	defer s.wg.Done()
	ctx, span := s.startSpan(ctx, st, r)
	defer span.End()
	defer func() {
		s.mu.Lock()
		delete(s.streams, st.id)
		s.mu.Unlock()
		st.cancel()
	}()

	// What only another provider reads (a part whose origin names it: a
	// thinking signature, encrypted reasoning) is left out here, on the
	// way to every adapter, which then sees only data it can read.
	r.req.Messages = llm.ForProvider(r.req.Messages, r.provider)
	// Media the request carries as refs become bytes here, the one place
	// that sends them on: the requester's messages held only the refs.
	if err := s.resolveMedia(ctx, &r.req); err != nil {
		telemetry.Fail(span, string(err.Kind), err)
		s.refuseLate(replyTo, r, err)
		return
	}
	// Open the provider call before replying: a refusal before the first
	// byte (unknown model, rejected key, outage after retries) is an error
	// reply the requester can act on, not a stream that fails at once.
	ps, err := s.open(ctx, p, &r.req)
	if err != nil {
		e := classifyOpenError(r, err)
		telemetry.Fail(span, string(e.Kind), err)
		s.refuseLate(replyTo, r, e)
		return
	}
	subject := s.subj.LLMStream(st.id)
	if g := r.req.StreamGroup; g != "" {
		subject = s.subj.LLMGroupStream(g, st.id)
	}
	// The settings the provider does not have were not sent: the
	// requester learns it from the reply (docs/protocol.md §3).
	var warnings []events.Warning
	if w, ok := ps.(llm.Warner); ok {
		warnings = w.Warnings()
	}
	reply, _ := json.Marshal(events.CompletionReply{RequestID: st.id, StreamSubject: subject, Warnings: warnings})
	// Without a reply subject the requester listens on the stream subject
	// only; a failed reply does not stop the stream for the same reason.
	if replyTo != "" {
		if err := s.nc.Publish(replyTo, reply); err != nil {
			s.log.Warn("reply failed", "request_id", st.id, "err", err)
		}
	}

	tmpl := events.Envelope{
		Source:      s.source,
		Subject:     r.env.TurnID,
		TurnID:      r.env.TurnID,
		SessionID:   r.env.SessionID,
		TraceParent: r.env.TraceParent,
	}
	pub := newPublisher(s.nc, subject, tmpl, s.cfg.Structured, s.cfg.KeepDeltas)

	// One normalization where the stream is consumed: a no-op for the
	// built-in adapters, whose streams are normalized already.
	ns := llm.Normalize(ctx, ps, llm.NormalizeOptions{IdleTimeout: s.idle})
	// What the stream has read ahead decides whether a delta may wait for
	// the next one (publisher.send).
	buffered, _ := ns.(llm.Buffered)

	outcome := ""
	var errCode, errMsg string
	var pubErr error
	for ns.Next() {
		ev := ns.Current()
		switch e := ev.(type) {
		case events.StatusEvent:
			outcome = string(e.Status)
		case events.ErrorEvent:
			errCode, errMsg = e.Code, e.Message
		}
		// Only a delta may wait for the next event, and only when the
		// stream has more read ahead: asked per delta, not per event.
		_, isDelta := ev.(events.BlockDelta)
		more := isDelta && !s.cfg.KeepDeltas && buffered != nil && buffered.Buffered() > 0
		if pubErr = pub.send(ev, more); pubErr != nil {
			// Nobody can receive the rest; stop the provider call.
			st.cancel()
			break
		}
	}
	if pubErr == nil {
		// A well-formed stream ends with a status, which sent any held
		// delta; this only keeps a delta from being dropped if it did not.
		pubErr = pub.flush()
	}
	// The stream is over: end the provider call before Close waits for it.
	st.cancel()
	_ = ns.Close()
	attrs := []any{
		"request_id", st.id, "provider", st.provider, "model", st.model,
		"duration", time.Since(start), "events", pub.seq, "outcome", outcome,
	}
	if r.env.TurnID != "" {
		attrs = append(attrs, "turn_id", r.env.TurnID)
	}
	if errCode != "" || errMsg != "" {
		attrs = append(attrs, "error_code", errCode, "error", errMsg)
	}
	endSpan(span, outcome, errCode, errMsg, pubErr, ns.Err())
	switch {
	case pubErr != nil:
		s.log.ErrorContext(ctx, "stream publish failed", append(attrs, "err", pubErr)...)
	case ns.Err() != nil:
		s.log.ErrorContext(ctx, "stream ended", append(attrs, "err", ns.Err())...)
	case outcome == string(events.StatusFailed):
		s.log.WarnContext(ctx, "stream ended", attrs...)
	default:
		s.log.InfoContext(ctx, "stream ended", attrs...)
	}
}

// resolveMedia replaces the request's media refs with their bytes
// (media.Resolve). A ref the bucket does not hold, or whose bytes are not
// its part's size or media_type, is the requester's error, named by its
// field; a store that cannot be read is unavailable.
func (s *Service) resolveMedia(ctx context.Context, req *llm.Request) *Error {
	if !media.HasRefs(req.Messages) {
		return nil
	}
	g, err := s.mediaGetter(ctx)
	if err != nil {
		return newError(KindUnavailable, "media store: "+err.Error(), err)
	}
	msgs, err := media.Resolve(ctx, g, req.Messages)
	var re *media.RefError
	switch {
	case err == nil:
		req.Messages = msgs
		return nil
	case errors.As(err, &re) && (errors.Is(err, media.ErrNotFound) || errors.Is(err, media.ErrInvalidRef) || errors.Is(err, media.ErrCorrupt) || errors.Is(err, media.ErrMediaType)):
		e := newError(KindInvalidRequest, err.Error(), err)
		e.Field = re.Field
		return e
	}
	return newError(KindUnavailable, "media store: "+err.Error(), err)
}

// mediaGetter returns Config.Media, or LLMW_MEDIA opened once.
func (s *Service) mediaGetter(ctx context.Context) (media.Getter, error) {
	if s.cfg.Media != nil {
		return s.cfg.Media, nil
	}
	return s.media.Store(ctx)
}

// open calls the provider, turning a panic into an error: one bad adapter
// must not take the service down.
func (s *Service) open(ctx context.Context, p llm.Provider, req *llm.Request) (st llm.Stream, err error) {
	defer func() {
		if v := recover(); v != nil {
			st, err = nil, fmt.Errorf("ingest: provider panicked: %v", v)
		}
	}()
	st, err = p.Stream(ctx, req)
	if err == nil && st == nil {
		err = errors.New("ingest: provider returned no stream")
	}
	return st, err
}
