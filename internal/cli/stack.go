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

	"github.com/llmworker/llmworker/internal/natsutil"
	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hookbridge"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/natsrt"
	"github.com/llmworker/llmworker/pkg/remotehook"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/toolexec/builtin"
	"github.com/llmworker/llmworker/pkg/turn"
)

// Service names of StackConfig.Services, in start order.
const (
	SvcIngest     = "ingest"
	SvcToolexec   = "toolexec"
	SvcHookbridge = "hookbridge"
	SvcTurn       = "turn"
)

// AllServices are the services a stack runs by default (hookbridge only
// when a hook config is given).
var AllServices = []string{SvcIngest, SvcToolexec, SvcHookbridge, SvcTurn}

// StackConfig says what a Stack runs. The zero value starts an embedded
// NATS server on a random loopback port with every service.
type StackConfig struct {
	// NATSURL of an existing server ("" = start an embedded one).
	NATSURL string
	// Creds is a NATS credentials file.
	Creds string
	// Listen is the embedded server's host:port ("" = 127.0.0.1, random port).
	Listen string
	// StoreDir is the embedded server's JetStream directory ("" = temporary).
	StoreDir string
	// Prefix is the subject prefix ("" = llmw).
	Prefix string
	// Services to run ("" entries ignored; nil = AllServices).
	Services []string
	// Root enables the file tools confined to this directory.
	Root string
	// HooksFile is a hookbridge YAML config to serve ("" = no hookbridge).
	HooksFile string
	// Replay adds the replay provider (model prefix replay:) and its demo
	// tools.
	Replay bool
	// ReplayPace slows replayed streams down per SSE event.
	ReplayPace time.Duration
	// Getenv reads the providers' variables (nil = os.Getenv).
	Getenv func(string) string
	// Logger of the services (nil = discard).
	Logger *slog.Logger
}

// lifecycle is the service lifecycle contract every service follows.
type lifecycle interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

type running struct {
	name string
	svc  lifecycle
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

	running []running
	watcher *remotehook.Watcher
	ready   atomic.Bool
	stopMu  sync.Mutex
	stopped bool
}

// Ready reports whether every service started and NATS is connected (the
// readiness probe of --health-addr).
func (s *Stack) Ready() bool { return s.ready.Load() && s.NC.IsConnected() }

// StartStack connects to (or starts) NATS and starts the services in order:
// ingest, toolexec, hookbridge, the hook registry watcher, turn. On error
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
	url := cfg.NATSURL
	if url == "" {
		host, port, err := splitListen(cfg.Listen)
		if err != nil {
			return nil, err
		}
		emb, err := natsutil.StartEmbedded(natsutil.EmbeddedOptions{Host: host, Port: port, StoreDir: cfg.StoreDir})
		if err != nil {
			return nil, fmt.Errorf("start embedded NATS on %s: %w", cfg.Listen, err)
		}
		s.Embedded = emb
		url = emb.URL()
	}
	s.URL = url
	opts := []nats.Option{nats.Name("llmworker"), nats.MaxReconnects(-1)}
	if cfg.Creds != "" {
		opts = append(opts, nats.UserCredentials(cfg.Creds))
	}
	if s.NC, err = nats.Connect(url, opts...); err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	js, err := jetstream.New(s.NC)
	if err != nil {
		return nil, err
	}
	// Provision once up front so that a client (chat, tail) can use the
	// streams even with a subset of the services.
	if err := natsrt.Provision(ctx, js, natsrt.ProvisionOptions{Prefix: cfg.Prefix}); err != nil {
		return nil, err
	}
	start := func(name string, svc lifecycle) error {
		if err := svc.Start(ctx); err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		s.running = append(s.running, running{name, svc})
		s.Services = append(s.Services, name)
		return nil
	}

	if on(SvcIngest) {
		providers := providerFactories(getenv)
		if cfg.Replay {
			if s.Replay, err = replay.NewServer(replay.Config{Pace: cfg.ReplayPace}); err != nil {
				return nil, fmt.Errorf("start replay server: %w", err)
			}
			providers[replay.Prefix] = s.Replay.Factory()
		}
		ing, err := ingest.New(s.NC, ingest.Config{Prefix: cfg.Prefix, Providers: providers, Logger: log.With("service", SvcIngest)})
		if err != nil {
			return nil, err
		}
		if err := start(SvcIngest, ing); err != nil {
			return nil, err
		}
	}
	if on(SvcToolexec) {
		tools, err := builtin.Tools(builtin.Config{Root: cfg.Root})
		if err != nil {
			return nil, fmt.Errorf("built-in tools: %w", err)
		}
		if cfg.Replay {
			tools = append(tools, replay.Tools()...)
		}
		exec, err := toolexec.New(s.NC, toolexec.Config{Prefix: cfg.Prefix, Logger: log.With("service", SvcToolexec)})
		if err != nil {
			return nil, err
		}
		if err := exec.Register(tools...); err != nil {
			return nil, err
		}
		if err := start(SvcToolexec, exec); err != nil {
			return nil, err
		}
		s.Tools = toolNames(tools)
	}
	if on(SvcHookbridge) && cfg.HooksFile != "" {
		file, err := hookbridge.LoadConfig(cfg.HooksFile)
		if err != nil {
			return nil, err
		}
		br, err := hookbridge.New(s.NC, hookbridge.Config{Prefix: cfg.Prefix, Hooks: file.Hooks, Logger: log.With("service", SvcHookbridge)})
		if err != nil {
			return nil, err
		}
		if err := start(SvcHookbridge, br); err != nil {
			return nil, err
		}
	}
	if on(SvcTurn) {
		chain := &hook.Chain{}
		if s.watcher, err = remotehook.Watch(ctx, js, chain, remotehook.WatchOptions{Logger: log.With("service", "hooks")}); err != nil {
			return nil, err
		}
		tr, err := turn.New(s.NC, turn.Config{
			Prefix: cfg.Prefix, Logger: log.With("service", SvcTurn), Hooks: chain,
			DefaultTools: []string{"*"},
		})
		if err != nil {
			return nil, err
		}
		if err := start(SvcTurn, tr); err != nil {
			return nil, err
		}
	}
	s.ready.Store(true)
	return s, nil
}

func toolNames(ts []tool.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name()
	}
	return out
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
		if r.name == SvcTurn && s.watcher != nil {
			_ = s.watcher.Stop()
			s.watcher = nil
		}
	}
	if s.watcher != nil { // turn failed to start
		_ = s.watcher.Stop()
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
	if s.Replay != nil {
		_ = s.Replay.Close()
	}
	s.Embedded.Shutdown()
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
