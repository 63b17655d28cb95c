package toolexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/metric"

	"github.com/llmworker/llmworker/internal/leaf/version"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/media"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/tool"
)

// ServiceName is the micro service every toolexec replica registers.
const ServiceName = "llmw-toolexec"

// Defaults of Config.
const (
	DefaultConcurrency = 8
	DefaultAckWait     = 30 * time.Second
	DefaultTimeout     = 5 * time.Minute
	DefaultCatalogTTL  = 30 * time.Second
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
	// MaxDeliver bounds redeliveries of one call (0 = the default:
	// unlimited).
	MaxDeliver int
	// DefaultTimeout bounds a call whose request has no deadline and whose
	// tool declares no timeout (0 = DefaultTimeout).
	DefaultTimeout time.Duration
	// CatalogTTL is how long the catalog (KV LLMW_TOOLS) keeps listing
	// this replica's tools after its last heartbeat, i.e. after it died
	// without Stop (0 = DefaultCatalogTTL; at least MinCatalogTTL). The
	// replica renews its claims every CatalogTTL/3, and a renewal that
	// failed (no acknowledgement within CatalogTTL/9) again at once until
	// it succeeds; Stop withdraws them at once. Renewals unanswered for
	// CatalogTTL/6 move the connection to another server. The TTL must
	// exceed CatalogTTL/3 plus leaving a cut-off node (natsutil.DeadAfter
	// by pings, or CatalogTTL/6 by the heartbeat), the bucket's leader
	// election and a retry (at most CatalogTTL/9): the default leaves
	// them 20 s.
	CatalogTTL time.Duration
	// Version of the micro service ("" = llmworker's version; SemVer).
	Version string
	// Provision configures the streams and buckets Start creates if
	// missing; its Prefix is taken from Prefix.
	Provision provision.Options
}

// Server hosts tool.Tool values: it publishes their catalog entries and
// micro endpoints and runs the calls it pulls from their durable consumers
// (docs/protocol.md §6).
type Server struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	gauge    metric.Registration // the queue gauge's callback, from Start to Stop
	cfg      Config
	subjects events.Subjects
	source   string
	log      *slog.Logger
	rc       *Client // stored-result lookups
	host     string  // this replica's host id in the catalog claims
	cat      *Catalog

	media media.Lazy // opened by the first result with large media (media.go)

	mu      sync.Mutex
	tools   map[string]*hosted
	order   []string
	started bool
	stopped bool
	// running, cancelled, handling and answered are keyed by
	// events.ToolMsgID (<turn id>.<call id>): call ids repeat across turns.
	running map[string]context.CancelCauseFunc
	// handling and answered remember call ids this replica is handling
	// or answered recently: a duplicate delivery racing the first one's
	// result into LLMW_TOOLRESULTS is caught here without a lookup.
	handling map[string]uint64 // → stream sequence of the running delivery
	answered map[string]bool
	ring     [answeredRing]string
	ringPos  int
	// cancelled remembers cancels that arrived before their call ran
	// here (a cancel can overtake the call's delivery).
	cancelled map[string]bool
	cring     [cancelRing]string
	cringPos  int
	runStop   context.CancelFunc // stops the pull loops
	runCtx    context.Context    // the pull loops' parent, from Start
	// dyn serializes Add, Remove and Stop, which change the hosted tools.
	dyn sync.Mutex
	// endpoints are the tools with a micro endpoint: micro cannot remove
	// one, so a tool removed and added again keeps its first.
	endpoints map[string]bool
	callStop  context.CancelCauseFunc
	callCtx   context.Context
	loops     sync.WaitGroup
	invokes   sync.WaitGroup
	svc       micro.Service
	cancelSb  *nats.Subscription
	beatStop  context.CancelFunc // stops the catalog heartbeat
	beats     sync.WaitGroup
}

type hosted struct {
	t        tool.Tool
	entry    events.ToolCatalogEntry
	validate func(json.RawMessage) error
	cons     jetstream.Consumer
	// The calls run from the queue: micro counts only the direct invokes
	// of the endpoint, so $SRV.STATS reports these in the endpoint's data.
	queueCalls, queueErrors, queueNanos atomic.Int64
	// stop ends the tool's pull loops (Remove, Stop); loops counts them.
	stop  context.CancelFunc
	loops sync.WaitGroup
}

// QueueStats is the data of a tool endpoint in $SRV.STATS: the calls this
// replica ran from the JetStream work queue (the endpoint's own counters
// cover only direct invokes on P.tool.invoke.<name>).
type QueueStats struct {
	Calls  int64 `json:"queue_calls"`
	Errors int64 `json:"queue_errors"`
	// ProcessingTime is the total run time of those calls (ns).
	ProcessingTime time.Duration `json:"queue_processing_time"`
}

// duplicateRecheck is how soon a second message of a call that runs here
// is delivered again, to be answered from the first one's result.
const duplicateRecheck = 200 * time.Millisecond

// answeredRing is how many answered call ids a replica remembers.
const answeredRing = 4096

// cancelRing is how many early cancels a replica remembers.
const cancelRing = 1024

var (
	errCancelled = errors.New("cancelled by a request")
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
		cfg.Version = version.String()
	}
	if cfg.CatalogTTL == 0 {
		cfg.CatalogTTL = DefaultCatalogTTL
	}
	if cfg.CatalogTTL < MinCatalogTTL {
		return nil, fmt.Errorf("%w: CatalogTTL %v is under %v (JetStream per-message TTLs count whole seconds)", ErrInvalidConfig, cfg.CatalogTTL, MinCatalogTTL)
	}
	cfg.Provision.Prefix = cfg.Prefix
	s := &Server{
		nc: nc, js: js, cfg: cfg, subjects: events.NewSubjects(cfg.Prefix), media: media.Lazy{JS: js},
		source: events.Source("toolexec", cfg.Instance), log: cfg.Logger,
		host:  nuid.Next(),
		tools: map[string]*hosted{}, running: map[string]context.CancelCauseFunc{},
		handling: map[string]uint64{}, answered: map[string]bool{}, cancelled: map[string]bool{},
		endpoints: map[string]bool{},
	}
	s.rc = NewClient(nc, js, ClientOptions{Prefix: cfg.Prefix, Source: s.source})
	return s, nil
}

// Register adds tools; call it before Start (Add hosts more once
// started).
func (s *Server) Register(tools ...tool.Tool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStarted
	}
	for _, t := range tools {
		h, err := s.prepare(t)
		if err != nil {
			return err
		}
		s.tools[h.entry.Name] = h
		s.order = append(s.order, h.entry.Name)
	}
	return nil
}

// prepare checks t and builds its hosted value; s.mu is held.
func (s *Server) prepare(t tool.Tool) (*hosted, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: nil tool", ErrInvalidTool)
	}
	e := tool.CatalogEntry(t)
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrInvalidTool, t.Name(), err)
	}
	if _, dup := s.tools[e.Name]; dup {
		return nil, fmt.Errorf("%w: %q registered twice", ErrInvalidTool, e.Name)
	}
	h := &hosted{t: t, entry: e}
	if iv, ok := t.(tool.InputValidator); ok {
		h.validate = iv.ValidateInput
		return h, nil
	}
	v, err := tool.NewValidator(e.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrInvalidTool, e.Name, err)
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
	return h, nil
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
// consumers and starts pulling calls. Cancelling ctx stops the setup only;
// the calls run under ctx's values and end when they finish or Stop
// drains them.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStarted
	}
	if len(s.tools) == 0 {
		return ErrNoTools
	}
	if err := provision.Provision(ctx, s.js, s.cfg.Provision); err != nil {
		return fmt.Errorf("toolexec: %w", err)
	}
	cat, err := OpenCatalog(ctx, s.js)
	if err != nil {
		return fmt.Errorf("toolexec: %w", err)
	}
	s.cat = cat
	for _, n := range s.order {
		if err := s.setup(ctx, s.tools[n]); err != nil {
			s.releaseClaims(s.hostedLocked())
			return err
		}
	}
	s.cancelSb, err = s.nc.Subscribe(s.subjects.ToolCancelAll(), func(m *nats.Msg) {
		if turnID, callID, ok := cancelIDs(m.Subject); ok {
			s.cancelCall(events.ToolMsgID(turnID, callID), fmt.Errorf("%w on %s", errCancelled, m.Subject))
		}
	})
	if err != nil {
		s.releaseClaims(s.hostedLocked())
		return fmt.Errorf("toolexec: subscribe cancel: %w", err)
	}
	if err := s.addService(); err != nil {
		_ = s.cancelSb.Unsubscribe()
		s.releaseClaims(s.hostedLocked())
		return err
	}
	// Calls run under Start's context without its cancellation: its values
	// reach every tool, and Stop (not ctx) ends them.
	root := context.WithoutCancel(ctx)
	s.runCtx, s.runStop = context.WithCancel(root)
	s.callCtx, s.callStop = context.WithCancelCause(root)
	for _, n := range s.order {
		s.runLoops(s.tools[n])
	}
	s.gauge = s.registerGauge()
	beatCtx, beatStop := context.WithCancel(root)
	s.beatStop = beatStop
	s.beats.Add(1)
	go s.heartbeat(beatCtx)
	s.started = true
	s.log.Info("toolexec started", "instance", s.cfg.Instance, "host", s.host, "tools", s.order)
	return nil
}

// setup claims h's tool in the catalog and creates or updates its
// durable consumer.
func (s *Server) setup(ctx context.Context, h *hosted) error {
	n := h.entry.Name
	if err := s.cat.Claim(ctx, h.entry, s.host, s.cfg.CatalogTTL); err != nil {
		return err
	}
	var err error
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
	return nil
}

// runLoops starts h's concurrency slots under s.runCtx.
func (s *Server) runLoops(h *hosted) {
	ctx, stop := context.WithCancel(s.runCtx)
	h.stop = stop
	for range s.cfg.Concurrency {
		s.loops.Add(1)
		h.loops.Add(1)
		go func() {
			defer h.loops.Done()
			s.pull(ctx, h)
		}()
	}
}

// hostedNow returns the tools hosted now, in registration order.
func (s *Server) hostedNow() []*hosted {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hostedLocked()
}

// hostedLocked is hostedNow with s.mu held.
func (s *Server) hostedLocked() []*hosted {
	out := make([]*hosted, 0, len(s.order))
	for _, n := range s.order {
		out = append(out, s.tools[n])
	}
	return out
}

// lookup returns the hosted tool of name, nil when it is not hosted.
func (s *Server) lookup(name string) *hosted {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools[name]
}

// Add hosts more tools on a started server: it claims them in the
// catalog, creates their consumers and endpoints and starts pulling their
// calls. It returns ErrNotStarted before Start or after Stop, and
// ErrInvalidTool (naming it) for a tool Register would refuse or one
// hosted already; then nothing is added. Cancelling ctx stops the setup.
func (s *Server) Add(ctx context.Context, tools ...tool.Tool) error {
	s.dyn.Lock()
	defer s.dyn.Unlock()
	s.mu.Lock()
	if !s.started || s.stopped {
		s.mu.Unlock()
		return ErrNotStarted
	}
	var hs []*hosted
	seen := map[string]bool{}
	for _, t := range tools {
		h, err := s.prepare(t)
		if err == nil && seen[h.entry.Name] {
			err = fmt.Errorf("%w: %q given twice", ErrInvalidTool, h.entry.Name)
		}
		if err != nil {
			s.mu.Unlock()
			return err
		}
		seen[h.entry.Name] = true
		hs = append(hs, h)
	}
	s.mu.Unlock()
	for i, h := range hs {
		if err := s.setup(ctx, h); err != nil {
			s.releaseClaims(hs[:i+1])
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for _, h := range hs {
		if err := s.addEndpoint(h.entry); err != nil {
			s.log.Warn("toolexec: endpoint of an added tool", "tool", h.entry.Name, "err", err)
		}
		s.tools[h.entry.Name] = h
		s.order = append(s.order, h.entry.Name)
		s.runLoops(h)
		names = append(names, h.entry.Name)
	}
	s.log.Info("toolexec: tools added", "tools", names)
	return nil
}

// Remove stops hosting tools (names not hosted are ignored): it withdraws
// their catalog claims, stops pulling their calls and waits for their
// running calls to finish and be answered (until ctx ends: they finish
// all the same). Their durable consumers stay for the other replicas; a
// direct invoke of a removed tool on this replica is answered 503. It
// returns ErrNotStarted before Start or after Stop.
func (s *Server) Remove(ctx context.Context, names ...string) error {
	s.dyn.Lock()
	defer s.dyn.Unlock()
	s.mu.Lock()
	if !s.started || s.stopped {
		s.mu.Unlock()
		return ErrNotStarted
	}
	var hs []*hosted
	for _, n := range names {
		if h := s.tools[n]; h != nil {
			hs = append(hs, h)
			delete(s.tools, n)
			s.order = slices.DeleteFunc(s.order, func(o string) bool { return o == n })
		}
	}
	s.mu.Unlock()
	if len(hs) == 0 {
		return nil
	}
	for _, h := range hs {
		h.stop()
	}
	s.releaseClaims(hs)
	done := make(chan struct{})
	go func() {
		for _, h := range hs {
			h.loops.Wait()
		}
		close(done)
	}()
	s.log.Info("toolexec: tools removed", "tools", names)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Server) addService() error {
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        ServiceName,
		Version:     s.cfg.Version,
		Description: "llmworker tool executor",
		Metadata:    map[string]string{"instance": s.cfg.Instance, "prefix": s.subjects.P()},
		StatsHandler: func(e *micro.Endpoint) any {
			h := s.lookup(e.Name)
			if h == nil {
				return nil
			}
			return QueueStats{Calls: h.queueCalls.Load(), Errors: h.queueErrors.Load(), ProcessingTime: time.Duration(h.queueNanos.Load())}
		},
	})
	if err != nil {
		return fmt.Errorf("toolexec: micro service: %w", err)
	}
	s.svc = svc
	for _, n := range s.order {
		if err := s.addEndpoint(s.tools[n].entry); err != nil {
			_ = svc.Stop()
			return err
		}
	}
	return nil
}

// addEndpoint adds the micro endpoint of tool e once; s.mu is held. The
// handler looks the tool up for every request, so that a removed tool is
// answered 503 and a tool added again is served.
func (s *Server) addEndpoint(e events.ToolCatalogEntry) error {
	n := e.Name
	if s.endpoints[n] {
		return nil
	}
	md := map[string]string{
		"description":  e.Description,
		"input_schema": string(e.InputSchema),
		"call_subject": s.subjects.ToolCall(n),
	}
	if e.TimeoutMS > 0 {
		md["timeout_ms"] = strconv.FormatInt(e.TimeoutMS, 10)
	}
	if e.Version != "" {
		md["version"] = e.Version
	}
	err := s.svc.AddEndpoint(n, micro.HandlerFunc(func(r micro.Request) {
		h := s.lookup(n)
		if h == nil {
			_ = r.Error("503", "tool "+n+" is not hosted by this replica any more", nil)
			return
		}
		s.invoke(h, r)
	}), micro.WithEndpointSubject(InvokeSubject(s.cfg.Prefix, n)), micro.WithEndpointMetadata(md))
	if err != nil {
		return fmt.Errorf("toolexec: endpoint %s: %w", n, err)
	}
	s.endpoints[n] = true
	return nil
}

// Stop stops pulling new calls and waits for the running ones to finish,
// publish their results and ack (drain). When ctx ends first, running calls
// are cancelled and left unacknowledged (negatively acknowledged when the
// connection still works) so that another replica runs them; Stop then
// returns ctx's error.
func (s *Server) Stop(ctx context.Context) error {
	s.dyn.Lock()
	defer s.dyn.Unlock()
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
	if s.gauge != nil {
		_ = s.gauge.Unregister()
	}
	// This replica takes no more calls: withdraw its claims now, not when
	// the drain ends, so that the catalog lists only tools someone serves.
	s.beatStop()
	s.beats.Wait()
	s.release()
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
