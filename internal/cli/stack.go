package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/gatewaysvc"
	"github.com/llmworker/llmworker/internal/service/hookbridgesvc"
	"github.com/llmworker/llmworker/internal/service/ingestsvc"
	"github.com/llmworker/llmworker/internal/service/toolexecsvc"
	"github.com/llmworker/llmworker/internal/service/turnsvc"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/permissions"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// Service names of StackConfig.Services, in start order.
const (
	SvcIngest     = "ingest"
	SvcToolexec   = "toolexec"
	SvcHookbridge = "hookbridge"
	SvcTurn       = "turn"
	SvcGateway    = "gateway"
)

// AllServices are the services a stack runs by default (hookbridge only
// when a hook config is given).
var AllServices = []string{SvcIngest, SvcToolexec, SvcHookbridge, SvcTurn, SvcGateway}

// StackConfig says what a Stack runs. The zero value starts an embedded
// NATS server on a random loopback port with every service.
type StackConfig struct {
	// NATSURL of an existing server ("" = start an embedded one).
	NATSURL string
	// Auth is how to authenticate to, and check, the NATS server at
	// NATSURL (not used with an embedded one).
	Auth natsutil.Auth
	// Listen is the embedded server's host:port ("" = 127.0.0.1, random port).
	Listen string
	// StoreDir is the embedded server's JetStream directory ("" = temporary).
	StoreDir string
	// SyncInterval is the embedded server's fsync interval (0 = every
	// write; natsutil.EmbeddedOptions.SyncInterval).
	SyncInterval time.Duration
	// ProvisionVerify checks the streams and buckets instead of creating
	// or updating them (provision.Options.VerifyOnly), for an identity
	// without those rights (docs/security.md).
	ProvisionVerify bool
	// Prefix is the subject prefix ("" = llmw).
	Prefix string
	// Instance names the replicas of this process ("" = random ids).
	Instance string
	// Replicas of the streams and buckets created (0 = 1).
	Replicas int
	// Services to run ("" entries ignored; nil = AllServices). hookbridge
	// runs only with Hookbridge.Config set.
	Services []string
	// The services' options, as their commands' flags set them (the zero
	// values are the defaults). Turn.DefaultTools "" means "*" here: a
	// turn of this stack gets every tool unless its request says otherwise.
	Ingest     ingestsvc.Options
	Toolexec   toolexecsvc.Options
	Hookbridge hookbridgesvc.Options
	Turn       turnsvc.Options
	// Gateway.HTTP "" serves on a random loopback port.
	Gateway gatewaysvc.Options
	// Getenv reads the providers' variables (nil = os.Getenv).
	Getenv func(string) string
	// Logger of the services (nil = discard).
	Logger *slog.Logger
}

type running struct {
	name string
	svc  service.Stopper
}

// Stack is NATS plus the llmworker services in one process.
type Stack struct {
	// NC is the stack's client connection.
	NC *nats.Conn
	// URL is the NATS URL clients connect to.
	URL string
	// Embedded is the in-process server, nil when NATSURL was given.
	Embedded *natsutil.Embedded
	// Prefix is the subject prefix.
	Prefix string
	// Services are the names of the running services in start order.
	Services []string
	// Tools are the tools hosted by this stack's toolexec.
	Tools []string
	// Replay is the replay server, when Replay was asked for.
	Replay *replay.Server
	// GatewayURL is where the gateway serves the API and the web UI
	// ("" when it does not run).
	GatewayURL string

	running []running
	hooks   *hooknats.Watcher           // the turn service's, when it runs
	traces  func(context.Context) error // flushes the spans at Stop
	ready   atomic.Bool
	stopMu  sync.Mutex
	stopped bool
}

// SyncHooks waits until the turn service's hook chain has every change of
// LLMW_HOOKS made so far (nothing to wait for without a turn service).
func (s *Stack) SyncHooks(ctx context.Context) error {
	if s.hooks == nil {
		return nil
	}
	return s.hooks.Sync(ctx)
}

// Ready reports whether every service started and NATS is connected (the
// readiness probe of --health-addr).
func (s *Stack) Ready() bool { return s.ready.Load() && s.NC.IsConnected() }

// StartStack connects to (or starts) NATS and starts the services in order:
// ingest, toolexec, hookbridge, the hook registry watcher, turn, gateway. On error
// everything started so far is stopped again.
func StartStack(ctx context.Context, cfg StackConfig) (_ *Stack, err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = osGetenv
	}
	want := cfg.Services
	if want == nil {
		want = AllServices
	}
	for _, n := range want {
		if n != "" && !slices.Contains(AllServices, n) {
			return nil, fmt.Errorf("%w: unknown service %q (known: %s)", ErrUsage, n, strings.Join(AllServices, ", "))
		}
	}
	on := func(n string) bool { return slices.Contains(want, n) }

	s := &Stack{Prefix: cfg.Prefix}
	if s.Prefix == "" {
		s.Prefix = "llmw"
	}
	defer func() {
		if err != nil {
			_ = s.Stop(context.Background())
		}
	}()
	// Tracing when the OTEL_* environment asks for it (pkg/telemetry).
	shutdown, tracing, err := telemetry.Setup(ctx, telemetry.Config{Service: "llmworker", Instance: cfg.Instance, Getenv: getenv})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	s.traces = shutdown
	if tracing {
		log.Info("tracing: exporting OTLP spans (OTEL_* environment)")
	}
	url := cfg.NATSURL
	if url == "" {
		host, port, err := splitListen(cfg.Listen)
		if err != nil {
			return nil, err
		}
		emb, err := natsutil.StartEmbedded(natsutil.EmbeddedOptions{Host: host, Port: port, StoreDir: cfg.StoreDir, SyncInterval: cfg.SyncInterval})
		if errors.Is(err, natsutil.ErrAddrInUse) {
			return nil, fmt.Errorf("%w: embedded NATS cannot listen on %s: address already in use (another NATS or llmworker up?). Pick another port with --listen host:port (port 0 = random), or use that server with --nats-url nats://%s", ErrUsage, cfg.Listen, cfg.Listen)
		}
		if err != nil {
			return nil, fmt.Errorf("start embedded NATS on %s: %w", cfg.Listen, err)
		}
		s.Embedded = emb
		// Nothing outlives a temporary store: the turn service must end
		// its turns at stop instead of handing them to a next replica.
		cfg.Turn.Ephemeral = emb.Temporary()
		url = emb.URL()
	}
	s.URL = url
	opts := append(append([]nats.Option{nats.Name("llmworker"), nats.MaxReconnects(-1)}, natsutil.Liveness()...), natsutil.LogEvents(log)...)
	if one := slices.DeleteFunc(slices.Clone(want), func(n string) bool { return n == "" }); len(one) == 1 {
		// One service, as a pod of deploy/k8s runs it: the inboxes of its
		// role, which its identity may read (pkg/permissions). Several
		// share the connection, and nats.go's _INBOX.
		opts = append(opts, nats.CustomInboxPrefix(permissions.InboxPrefix(permissions.Role(one[0]), cfg.Prefix)))
	}
	if s.Embedded == nil {
		auth, err := cfg.Auth.Options()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUsage, err)
		}
		opts = append(opts, auth...)
	}
	dial := natsutil.Config{ConnectWait: -1}
	if s.Embedded == nil {
		// A pod may start before NATS can be reached: retry a while.
		dial = natsutil.Config{OnRetry: func(err error, next time.Duration) {
			log.Warn("cannot reach NATS yet; retrying", "url", url, "err", err, "in", next)
		}}
	}
	if s.NC, err = natsutil.Dial(ctx, url, dial, opts...); err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	js, err := jetstream.New(s.NC)
	if err != nil {
		return nil, err
	}
	// Provision once up front so that a client (chat, tail) can use the
	// streams even with a subset of the services.
	if err := natsutil.Retry(ctx, dial.ConnectWait, natsutil.Transient, dial.OnRetry, func() error {
		return provision.Provision(ctx, js, provision.Options{Prefix: cfg.Prefix, Replicas: cfg.Replicas, VerifyOnly: cfg.ProvisionVerify})
	}); err != nil {
		return nil, err
	}
	if cfg.Turn.DefaultTools == "" {
		cfg.Turn.DefaultTools = "*"
	}
	cfg.Ingest.Getenv = getenv
	ing := &ingestsvc.Service{Options: cfg.Ingest}
	exec := &toolexecsvc.Service{Options: cfg.Toolexec}
	// Start order: what a turn needs first, the turn service last.
	tr := &turnsvc.Service{Options: cfg.Turn}
	gw := &gatewaysvc.Service{Options: cfg.Gateway}
	svcs := []service.Service{ing, exec, &hookbridgesvc.Service{Options: cfg.Hookbridge}, tr, gw}
	for _, svc := range svcs {
		name := svc.Name()
		if !on(name) || name == SvcHookbridge && cfg.Hookbridge.Config == "" {
			continue
		}
		env := service.Env{NC: s.NC, Prefix: cfg.Prefix, Instance: cfg.Instance, Replicas: cfg.Replicas, ProvisionVerify: cfg.ProvisionVerify, Log: log.With("service", name)}
		st, err := service.Start(ctx, ctx, svc, env, dial.ConnectWait)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		s.running = append(s.running, running{name, st})
		s.Services = append(s.Services, name)
	}
	s.Replay, s.Tools, s.hooks, s.GatewayURL = ing.ReplayServer, exec.Tools, tr.Watcher, gw.URL
	s.ready.Store(true)
	return s, nil
}

// Stop drains the services in reverse start order (turn first, so running
// turns can still reach ingest and toolexec), then closes NATS. It is
// bounded by ctx and safe to call more than once.
func (s *Stack) Stop(ctx context.Context) error {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	s.ready.Store(false)
	var errs []error
	for i := len(s.running) - 1; i >= 0; i-- {
		r := s.running[i]
		if err := r.svc.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", r.name, err))
		}
	}
	if s.NC != nil {
		if err := s.NC.Drain(); err == nil {
			for s.NC.IsDraining() {
				select {
				case <-ctx.Done():
					s.NC.Close()
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
		s.NC.Close()
	}
	s.Embedded.Shutdown()
	if s.traces != nil {
		if err := s.traces(ctx); err != nil {
			errs = append(errs, fmt.Errorf("flush traces: %w", err))
		}
	}
	return errors.Join(errs...)
}

func splitListen(listen string) (string, int, error) {
	if listen == "" {
		return "127.0.0.1", 0, nil
	}
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("%w: --listen %q: want host:port, e.g. 127.0.0.1:4222", ErrUsage, listen)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%w: --listen %q: bad port", ErrUsage, listen)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}
