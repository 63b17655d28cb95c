package hooknats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/internal/leaf/version"
	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// Handler answers the requests of one hook. A nil response with a nil
// error continues (finish at on_turn_end). An error or a panic is sent as an
// error reply, which the turn treats as a hook failure (its failure policy
// applies); so is a response that is not valid for the hook's event.
type Handler interface {
	ServeHook(ctx context.Context, req *events.HookRequest) (*events.HookResponse, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *events.HookRequest) (*events.HookResponse, error)

// ServeHook calls f.
func (f HandlerFunc) ServeHook(ctx context.Context, req *events.HookRequest) (*events.HookResponse, error) {
	return f(ctx, req)
}

var _ Handler = HandlerFunc(nil)

// Hook is a registration and the handler that answers it.
type Hook struct {
	// Registration says how the turn calls the hook. An empty Subject is
	// P.hook.<name>.
	Registration events.HookRegistration
	Handler      Handler
}

// ServiceName is the service token of the CloudEvent source
// (/llmw/hookbridge/<instance>) and the default queue group.
const ServiceName = "hookbridge"

// DefaultMaxConcurrent bounds the requests a Server handles at once when
// ServerConfig.MaxConcurrent is 0.
const DefaultMaxConcurrent = 64

// ServerConfig configures a Server. The zero value works: prefix llmw, a random
// instance, slog.Default(), queue group "hookbridge", registration on.
type ServerConfig struct {
	// Prefix is the subject prefix P ("" = events.DefaultPrefix).
	Prefix string
	// Instance names the replica in the CloudEvent source ("" = random).
	Instance string
	// Logger receives handler failures ("" = slog.Default()).
	Logger *slog.Logger
	// Hooks are served in this order (Handle adds more).
	Hooks []Hook
	// QueueGroup shared by the replicas ("" = ServiceName), so that each
	// request is answered by one replica.
	QueueGroup string
	// MaxConcurrent bounds the requests handled at once (0 =
	// DefaultMaxConcurrent); more wait in the subscription.
	MaxConcurrent int
	// NoRegister leaves LLMW_HOOKS alone (the hooks are registered by
	// someone else, e.g. by hand).
	NoRegister bool
	// UnregisterOnStop deletes the hooks from LLMW_HOOKS on Stop. Off by
	// default: with several replicas one stopping must not unregister the
	// hooks the others still serve.
	UnregisterOnStop bool
	// Provision are the options LLMW_HOOKS is created with when it does
	// not exist (the other services' options, so the configurations agree).
	Provision provision.Options
	// RecheckInterval is how often the server checks that its hooks are
	// still registered and registers the missing ones again, e.g. after the
	// NATS server lost its state (0 = DefaultRecheckInterval; negative =
	// never).
	RecheckInterval time.Duration
}

// DefaultRecheckInterval is ServerConfig.RecheckInterval's default.
const DefaultRecheckInterval = 15 * time.Second

// ServiceNameMicro is the micro service every hook server registers, so
// that $SRV.PING/INFO find hookbridge replicas like the other services.
const ServiceNameMicro = "llmw-hookbridge"

// Server serves hooks as NATS request/reply responders and registers them
// in LLMW_HOOKS. It follows the service lifecycle: New, Start, Stop.
type Server struct {
	nc     *nats.Conn
	cfg    ServerConfig
	log    *slog.Logger
	source string
	subs   events.Subjects
	sem    chan struct{}

	mu        sync.Mutex
	hooks     []Hook
	names     map[string]bool
	kv        jetstream.KeyValue
	active    []*nats.Subscription
	started   bool
	stopped   bool
	inflight  sync.WaitGroup
	ctx       context.Context // values for handlers; cancelled when Stop gives up
	cancel    context.CancelFunc
	svc       micro.Service
	recheck   chan struct{} // closed by Stop: ends the recheck loop
	rechecked chan struct{}
}

// New returns a Server for cfg's hooks. Errors match ErrInvalidHook.
func NewServer(nc *nats.Conn, cfg ServerConfig) (*Server, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: nil NATS connection", ErrInvalidHook)
	}
	if cfg.Instance == "" {
		cfg.Instance = nuid.Next()
	}
	if cfg.QueueGroup == "" {
		cfg.QueueGroup = ServiceName
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Provision.Prefix == "" {
		cfg.Provision.Prefix = cfg.Prefix
	}
	b := &Server{
		nc: nc, cfg: cfg, log: log, source: events.Source(ServiceName, cfg.Instance),
		subs: events.NewSubjects(cfg.Prefix), sem: make(chan struct{}, cfg.MaxConcurrent),
		names: map[string]bool{},
	}
	for _, h := range cfg.Hooks {
		if _, err := b.add(h); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// add validates h and appends it.
func (b *Server) add(h Hook) (Hook, error) {
	if h.Handler == nil {
		return h, fmt.Errorf("%w %q: nil handler", ErrInvalidHook, h.Registration.Name)
	}
	if h.Registration.Subject == "" && events.ValidToken(h.Registration.Name) {
		h.Registration.Subject = b.subs.Hook(h.Registration.Name)
	}
	if err := h.Registration.Validate(); err != nil {
		return h, fmt.Errorf("%w %q: %w", ErrInvalidHook, h.Registration.Name, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.names[h.Registration.Name] {
		return h, fmt.Errorf("%w: two hooks named %q", ErrInvalidHook, h.Registration.Name)
	}
	b.names[h.Registration.Name] = true
	b.hooks = append(b.hooks, h)
	return h, nil
}

// Handle adds a hook. Before Start it is served from Start on; after Start
// it is subscribed and registered at once (ctx bounds the registration).
// Errors match ErrInvalidHook, ErrStopped or ErrRegistry.
func (b *Server) Handle(ctx context.Context, reg events.HookRegistration, h Handler) error {
	b.mu.Lock()
	started, stopped := b.started, b.stopped
	b.mu.Unlock()
	if stopped {
		return ErrStopped
	}
	hk, err := b.add(Hook{Registration: reg, Handler: h})
	if err != nil || !started {
		return err
	}
	if err := b.subscribe(hk); err != nil {
		return err
	}
	if b.kv != nil {
		if _, err := Register(ctx, b.kv, hk.Registration); err != nil {
			return err
		}
	}
	return nil
}

// HandleFunc is Handle with a function.
func (b *Server) HandleFunc(ctx context.Context, reg events.HookRegistration, f HandlerFunc) error {
	return b.Handle(ctx, reg, f)
}

// Hooks returns the hooks in the order they were added, with their
// effective subjects.
func (b *Server) Hooks() []Hook {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Hook(nil), b.hooks...)
}

// Start subscribes every hook (queue group, so replicas share the load),
// then registers them in LLMW_HOOKS in the order they were added (creating
// the bucket if needed). It returns once the hooks are served. ctx's values
// (not its cancellation) reach the handlers.
func (b *Server) Start(ctx context.Context) error {
	b.mu.Lock()
	if b.started || b.stopped {
		b.mu.Unlock()
		return ErrStarted
	}
	b.started = true
	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	hooks := append([]Hook(nil), b.hooks...)
	b.mu.Unlock()

	for _, h := range hooks {
		if err := b.subscribe(h); err != nil {
			b.unsubscribeAll()
			return err
		}
	}
	if b.cfg.NoRegister {
		return nil
	}
	kv, err := b.bucket(ctx)
	if err != nil {
		b.unsubscribeAll()
		return err
	}
	b.mu.Lock()
	b.kv = kv
	b.mu.Unlock()
	regs := make([]events.HookRegistration, len(hooks))
	for i, h := range hooks {
		regs[i] = h.Registration
	}
	if _, err := RegisterOrdered(ctx, kv, regs...); err != nil {
		b.unsubscribeAll()
		return err
	}
	names := make([]string, len(regs))
	for i, r := range regs {
		names[i] = r.Name
	}
	svc, err := micro.AddService(b.nc, micro.Config{
		Name:        ServiceNameMicro,
		Version:     version.String(),
		Description: "llmworker hook responders (request/reply on P.hook.<name>)",
		Metadata:    map[string]string{"instance": b.cfg.Instance, "prefix": b.subs.P(), "hooks": strings.Join(names, ",")},
	})
	if err != nil {
		b.unsubscribeAll()
		return fmt.Errorf("hooknats: micro service: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.svc = svc
	if every := b.cfg.RecheckInterval; every >= 0 {
		if every == 0 {
			every = DefaultRecheckInterval
		}
		b.recheck, b.rechecked = make(chan struct{}), make(chan struct{})
		go b.recheckLoop(every, regs, b.recheck, b.rechecked)
	}
	return nil
}

// recheckLoop registers this server's hooks again when they went missing
// from LLMW_HOOKS (a NATS server that lost its state, a bucket deleted by
// hand): without it the turns would stop calling hooks that still serve.
func (b *Server) recheckLoop(every time.Duration, regs []events.HookRegistration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		kv, err := b.bucket(ctx)
		missing := 0
		if err == nil {
			for _, r := range regs {
				if _, gerr := kv.Get(ctx, r.Name); errors.Is(gerr, jetstream.ErrKeyNotFound) {
					missing++
				}
			}
			if missing > 0 {
				_, err = RegisterOrdered(ctx, kv, regs...)
			}
		}
		cancel()
		switch {
		case err != nil:
			b.log.Warn("hooknats: cannot check the hook registrations", "err", err)
		case missing > 0:
			b.mu.Lock()
			b.kv = kv
			b.mu.Unlock()
			b.log.Warn("hooknats: hooks were missing from LLMW_HOOKS and are registered again", "missing", missing, "hooks", len(regs))
		}
	}
}

// bucket opens LLMW_HOOKS, creating it as provision.Provision would; its
// Get asks the leader (see Bucket).
func (b *Server) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	js, err := jetstream.New(b.nc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRegistry, err)
	}
	kv, err := js.KeyValue(ctx, events.BucketHooks)
	if err == nil {
		return jsread.KeyValue(js, kv), nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: %w", ErrRegistry, err)
	}
	for _, c := range provision.BucketConfigs(b.cfg.Provision) {
		if c.Bucket == events.BucketHooks {
			kv, err = js.CreateOrUpdateKeyValue(ctx, c)
			if err != nil {
				return nil, fmt.Errorf("%w: create %s: %w", ErrRegistry, c.Bucket, err)
			}
			return jsread.KeyValue(js, kv), nil
		}
	}
	return nil, fmt.Errorf("%w: no configuration for %s", ErrRegistry, events.BucketHooks)
}

func (b *Server) subscribe(h Hook) error {
	sub, err := b.nc.QueueSubscribe(h.Registration.Subject, b.cfg.QueueGroup, func(m *nats.Msg) {
		b.dispatch(h, m)
	})
	if err != nil {
		return fmt.Errorf("hooknats: subscribe %s: %w", h.Registration.Subject, err)
	}
	b.mu.Lock()
	b.active = append(b.active, sub)
	b.mu.Unlock()
	return nil
}

func (b *Server) unsubscribeAll() {
	b.mu.Lock()
	subs := b.active
	b.active = nil
	b.mu.Unlock()
	for _, s := range subs {
		_ = s.Unsubscribe()
	}
}

// dispatch runs a request on its own goroutine (bounded by the semaphore)
// so that one slow hook call does not hold the other turns' calls.
func (b *Server) dispatch(h Hook, m *nats.Msg) {
	b.sem <- struct{}{}
	b.inflight.Add(1)
	go func() {
		defer func() {
			<-b.sem
			b.inflight.Done()
		}()
		b.serve(h, m)
	}()
}

func (b *Server) serve(h Hook, m *nats.Msg) {
	reg := h.Registration
	req, env, err := decodeRequest(m.Header, m.Data)
	if err == nil && req.Event != reg.Event {
		err = fmt.Errorf("%w: request for %s sent to the %s hook %q", events.ErrInvalid, req.Event, reg.Event, reg.Name)
	}
	if err != nil {
		b.log.Warn("hook request refused", "hook", reg.Name, "err", err)
		b.replyError(m, "400", err.Error())
		return
	}
	// The turn's hook span (its traceparent travels in the request) is
	// the parent of this server's span.
	ctx, span := startSpan(telemetry.Extract(b.ctx, env), reg, req)
	defer span.End()
	if reg.TimeoutMS > 0 {
		// The turn gives up after timeout_ms; so does the handler.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(reg.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	resp, err := safeServe(ctx, h.Handler, req)
	if err == nil {
		if resp == nil {
			resp = &events.HookResponse{}
		}
		if verr := resp.ValidateFor(reg.Event); verr != nil {
			err = fmt.Errorf("%w: %w", ErrInvalidResponse, verr)
		}
	}
	if err != nil {
		telemetry.Fail(span, "hook_failed", err)
		b.log.WarnContext(ctx, "hook failed", "hook", reg.Name, "event", reg.Event, "turn_id", req.TurnID, "err", err)
		b.replyError(m, "500", err.Error())
		return
	}
	span.SetAttributes(telemetry.HookDecision.String(string(resp.Result)))
	renv, err := events.NewEnvelope(b.source, events.TypeHookResponse, resp)
	if err != nil {
		b.replyError(m, "500", err.Error())
		return
	}
	renv.Subject, renv.TurnID, renv.SessionID = req.TurnID, req.TurnID, req.SessionID
	out := cenats.NewMsg(m.Reply, renv)
	if err := m.RespondMsg(out); err != nil {
		b.log.Warn("hook reply not sent", "hook", reg.Name, "err", err)
	}
}

// safeServe turns a handler panic into an error.
func safeServe(ctx context.Context, h Handler, req *events.HookRequest) (resp *events.HookResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrPanic, r, debug.Stack())
		}
	}()
	return h.ServeHook(ctx, req)
}

func (b *Server) replyError(m *nats.Msg, code, text string) {
	if m.Reply == "" {
		return
	}
	// Header values are one line.
	if len(text) > 1024 {
		text = text[:1024]
	}
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' || text[i] == '\r' {
			text = text[:i]
			break
		}
	}
	out := &nats.Msg{Subject: m.Reply, Header: nats.Header{}}
	out.Header.Set(HeaderError, text)
	out.Header.Set(HeaderErrorCode, code)
	_ = m.RespondMsg(out)
}

// DecodeRequest reads a hook request: a llmw.hook.request CloudEvent in
// binary or structured mode, or a bare JSON request object. Errors match
// events.ErrInvalid.
func DecodeRequest(h map[string][]string, body []byte) (*events.HookRequest, error) {
	req, _, err := decodeRequest(h, body)
	return req, err
}

// decodeRequest is DecodeRequest that also returns the CloudEvent (nil for
// a bare JSON request), for its trace context.
func decodeRequest(h map[string][]string, body []byte) (*events.HookRequest, *events.Envelope, error) {
	data := body
	env, err := events.DecodeEnvelope(h, body)
	switch {
	case errors.Is(err, events.ErrNotCloudEvent):
		env = nil
	case err != nil:
		return nil, nil, err
	case env.Type != events.TypeHookRequest:
		return nil, nil, fmt.Errorf("%w: CloudEvent type is %q, want %q", events.ErrInvalid, env.Type, events.TypeHookRequest)
	default:
		data = env.Data
	}
	req, err := events.Decode[events.HookRequest](data)
	if err != nil {
		return nil, nil, err
	}
	return &req, env, nil
}

// Stop drains: no new requests are taken, requests in flight finish
// (bounded by ctx; then their contexts are cancelled), then the
// subscriptions end. With ServerConfig.UnregisterOnStop the hooks are removed
// from LLMW_HOOKS first, so turns stop calling them.
func (b *Server) Stop(ctx context.Context) error {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return nil
	}
	b.stopped = true
	subs, kv, hooks, started, svc := b.active, b.kv, b.hooks, b.started, b.svc
	recheck, rechecked := b.recheck, b.rechecked
	b.active = nil
	b.mu.Unlock()
	if !started {
		return nil
	}
	if recheck != nil {
		close(recheck)
		<-rechecked
	}
	if svc != nil {
		_ = svc.Stop()
	}
	var errs []error
	if b.cfg.UnregisterOnStop && kv != nil {
		for _, h := range hooks {
			if err := Unregister(ctx, kv, h.Registration.Name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, s := range subs {
		if err := s.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			errs = append(errs, err)
		}
	}
	// Wait for the subscriptions to hand over their pending messages, then
	// for the handlers.
	for _, s := range subs {
		for s.IsValid() {
			select {
			case <-ctx.Done():
				b.cancel()
				return errors.Join(append(errs, fmt.Errorf("hooknats: drain: %w", ctx.Err()))...)
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
	done := make(chan struct{})
	go func() {
		b.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		b.cancel()
		<-done
		errs = append(errs, fmt.Errorf("hooknats: drain: %w", ctx.Err()))
	}
	b.cancel()
	return errors.Join(errs...)
}

// Serve runs a Server for hooks on nc until ctx ends, then stops it
// (waiting up to 10 seconds for requests in flight). It returns nil after
// a clean stop.
func Serve(ctx context.Context, nc *nats.Conn, hooks ...Hook) error {
	b, err := NewServer(nc, ServerConfig{Hooks: hooks})
	if err != nil {
		return err
	}
	if err := b.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return b.Stop(sctx)
}

// Respond is a helper for handlers: a response with result and reason.
func Respond(result events.HookResultKind, reason string) *events.HookResponse {
	return &events.HookResponse{Result: result, Reason: reason}
}
