package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/permissions"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// Service is one llmworker service: ingest, toolexec, hookbridge or turn.
type Service interface {
	// Name is the service's name in --services, logs and its command.
	Name() string
	// About is the paragraph of the command's --help.
	About() string
	// Flags registers the service's own flags; the shared ones are
	// Common's.
	Flags(f *Flags)
	// Start starts the service on env.NC; a configuration it refuses is
	// an error matching ErrUsage. ctx is the service's root
	// context: its values reach every handler, and ending it is what
	// Stop's drain ends with (Stop is called first). It returns once the
	// service serves.
	Start(ctx context.Context, env Env) (Stopper, error)
}

// Preflighter is implemented by services that check their flags before a
// connection is made (hookbridge loads its config file). exit true ends
// the command with code 0 (e.g. --check printed what it checked).
type Preflighter interface {
	Preflight(stdout io.Writer) (exit bool, err error)
}

// Stopper drains a started service: no new work is taken, work in flight
// finishes until ctx ends.
type Stopper interface {
	Stop(ctx context.Context) error
}

// StopFunc adapts a function to Stopper.
type StopFunc func(ctx context.Context) error

// Stop calls f.
func (f StopFunc) Stop(ctx context.Context) error { return f(ctx) }

var _ Stopper = StopFunc(nil)

// Env is what a service starts with.
type Env struct {
	NC       *nats.Conn
	Prefix   string
	Instance string
	// Replicas of the streams and buckets the service creates.
	Replicas int
	// ProvisionVerify makes the service check the streams and buckets
	// instead of creating or updating them (provision.Options.VerifyOnly).
	ProvisionVerify bool
	Log             *slog.Logger
}

// Provision returns the options of the service's provisioning.
func (e Env) Provision() provision.Options {
	return provision.Options{Prefix: e.Prefix, Replicas: e.Replicas, VerifyOnly: e.ProvisionVerify}
}

// DefaultDrainTimeout is how long a shutdown waits for work in flight.
const DefaultDrainTimeout = 25 * time.Second

// Common are the flags every service command shares.
type Common struct {
	NATSURL, Prefix, Instance, StoreDir string
	// Auth is the NATS authentication and TLS settings (RegisterAuth).
	Auth                natsutil.Auth
	Replicas            int
	ProvisionVerify     bool
	Drain               time.Duration
	LogFormat, LogLevel string
	HealthAddr          string
}

// Register adds the shared flags. instance is the default replica name.
func (c *Common) Register(f *Flags, instance string) {
	f.String(&c.NATSURL, "nats-url", "NATS_URL", "", "NATS server URL (empty: start an embedded server)")
	RegisterAuth(f, &c.Auth)
	f.String(&c.Prefix, "prefix", "LLMW_PREFIX", events.DefaultPrefix, "subject prefix")
	f.String(&c.Instance, "instance", "LLMW_INSTANCE", instance, "replica name in event sources, consumer names and KV keys")
	f.String(&c.StoreDir, "store-dir", "LLMW_STORE_DIR", "", "JetStream store dir of the embedded server (default: temporary)")
	f.Int(&c.Replicas, "replicas", "LLMW_REPLICAS", 1, "JetStream replicas of the streams and buckets created (3 on a 3-node cluster)")
	f.Bool(&c.ProvisionVerify, "provision-verify", "LLMW_PROVISION_VERIFY", false, "check the streams and buckets exist instead of creating or updating them (an identity without those rights; run llmworker provision first)")
	f.Duration(&c.Drain, "drain-timeout", "LLMW_DRAIN_TIMEOUT", DefaultDrainTimeout, "how long a shutdown waits for work in flight")
	f.String(&c.LogFormat, "log-format", "LLMW_LOG_FORMAT", "json", "json or text")
	f.String(&c.LogLevel, "log-level", "LLMW_LOG_LEVEL", "info", "debug, info, warn or error")
	f.String(&c.HealthAddr, "health-addr", "LLMW_HEALTH_ADDR", "", "serve /healthz, /readyz and /metrics (Prometheus) on this address, e.g. :8081")
}

// RegisterAuth adds the flags of a NATS client's authentication and TLS
// (natsutil.Auth.Flags).
func RegisterAuth(f *Flags, a *natsutil.Auth) {
	for _, af := range a.Flags() {
		f.String(af.Value, af.Name, af.Env, "", af.Usage)
	}
}

// Logger builds the logger the log flags ask for, writing to w.
func (c *Common) Logger(w io.Writer) (*slog.Logger, error) {
	return NewLogger(w, c.LogFormat, c.LogLevel)
}

// NewLogger builds a logger writing to w in format "json" or "text" at
// level; records logged with a traced context carry trace_id and span_id
// (telemetry.LogHandler). The errors name the flag that is wrong and
// match ErrUsage.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("%w: --log-level: %v", ErrUsage, err)
	}
	ho := &slog.HandlerOptions{Level: lv, ReplaceAttr: durationText}
	switch format {
	case "json":
		return slog.New(telemetry.LogHandler(slog.NewJSONHandler(w, ho))), nil
	case "text":
		return slog.New(telemetry.LogHandler(slog.NewTextHandler(w, ho))), nil
	}
	return nil, fmt.Errorf("%w: --log-format: want text or json, got %q", ErrUsage, format)
}

// durationText writes durations as text ("1.5s"), as the flags take them;
// slog's JSON handler would write nanoseconds.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// Hostname is the host name as a subject token (no dots, spaces or
// slashes), or fallback when it is unknown: the default replica name.
func Hostname(fallback string) string {
	h, _ := os.Hostname()
	if h == "" {
		return fallback
	}
	return strings.NewReplacer(".", "-", " ", "-", "/", "-").Replace(h)
}

// Exit runs run with a context that SIGINT and SIGTERM cancel, then exits
// the process with run's code: the whole main of a service command.
func Exit(run func(ctx context.Context) int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx)
	stop()
	os.Exit(code)
}

// IO are a command's environment and output streams.
type IO struct {
	Getenv         func(string) string
	Stdout, Stderr io.Writer
}

// Parse parses a service command's arguments into the shared flags it
// returns and into svc's options. Errors match ErrUsage, or are
// flag.ErrHelp after -h (the usage is printed to stderr).
func Parse(svc Service, args []string, getenv func(string) string, stderr io.Writer) (*Common, error) {
	fs, f, c := CommandFlags(svc, getenv)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments: %s", ErrUsage, strings.Join(fs.Args(), " "))
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// CommandFlags returns the flag set of svc's command: the shared flags
// (into the returned Common) and svc's own. Parse uses it; so do tests
// that check other places (llmworker up, deployment files) against it.
func CommandFlags(svc Service, getenv func(string) string) (*flag.FlagSet, *Flags, *Common) {
	name := svc.Name()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	f := NewFlags(fs, getenv)
	c := &Common{}
	c.Register(f, Hostname(name))
	svc.Flags(f.For(name))
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\n%s\n\nFlags (each with the environment variable it defaults to):\n", name, strings.TrimSpace(svc.About()))
		fs.PrintDefaults()
	}
	return fs, f, c
}

// Main runs svc as a command until ctx ends, then drains it within
// --drain-timeout. It returns the exit code: 0 after a drain (or -h), 2
// for a bad command line, environment or configuration, 1 when the
// service cannot start.
func Main(ctx context.Context, svc Service, args []string, o IO) int {
	name := svc.Name()
	// The log and the messages printed here share stderr, and nats.go
	// logs from goroutines of its own.
	o.Stderr = &lockedWriter{w: o.Stderr}
	c, err := Parse(svc, args, o.Getenv, o.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var log *slog.Logger
	if err == nil {
		log, err = c.Logger(o.Stderr)
	}
	if err != nil {
		fmt.Fprintf(o.Stderr, "%s: %v\n", name, err)
		return 2
	}
	if p, ok := svc.(Preflighter); ok {
		exit, err := p.Preflight(o.Stdout)
		if err != nil {
			fmt.Fprintf(o.Stderr, "%s: %v\n", name, err)
			return 2
		}
		if exit {
			return 0
		}
	}
	// Tracing when the OTEL_* environment asks for it (pkg/telemetry).
	shutdown, tracing, err := telemetry.Setup(ctx, telemetry.Config{Service: "llmw-" + name, Instance: c.Instance, Getenv: o.Getenv})
	if err != nil {
		fmt.Fprintf(o.Stderr, "%s: %v\n", name, err)
		return 2
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(fctx); err != nil {
			log.Warn("flush traces", "err", err)
		}
	}()
	if tracing {
		log.Info("tracing: exporting OTLP spans (OTEL_* environment)")
	}
	metrics, err := telemetry.SetupMetrics(ctx, telemetry.Config{Service: "llmw-" + name, Instance: c.Instance, Getenv: o.Getenv})
	if err != nil {
		fmt.Fprintf(o.Stderr, "%s: %v\n", name, err)
		return 2
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = metrics.Shutdown(fctx)
	}()
	var ready atomic.Bool
	if c.HealthAddr != "" {
		stop, err := serveHealth(c.HealthAddr, &ready, metrics.Handler)
		if err != nil {
			log.Error("health endpoint", "err", err)
			return 1
		}
		defer stop()
	}
	conn, err := natsutil.Connect(ctx, natsutil.Config{URL: c.NATSURL, Auth: c.Auth, Name: "llmw-" + name + " " + c.Instance, StoreDir: c.StoreDir,
		OnRetry: func(err error, next time.Duration) {
			log.Warn("cannot reach NATS yet; retrying", "err", err, "in", next)
		}}, append(natsutil.LogEvents(log), nats.CustomInboxPrefix(permissions.InboxPrefix(permissions.Role(name), c.Prefix)))...)
	if err != nil {
		log.Error("connect to NATS", "err", err)
		return 1
	}
	defer conn.Close()
	if conn.Embedded != nil {
		log.Info("embedded NATS server", "url", conn.Embedded.URL())
	}
	// The root context outlives the signal: turns, calls and streams in
	// flight must finish during the drain. It ends after the drain.
	root, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	st, err := Start(ctx, root, svc, Env{NC: conn.NC, Prefix: c.Prefix, Instance: c.Instance, Replicas: c.Replicas, ProvisionVerify: c.ProvisionVerify, Log: log}, 0)
	if errors.Is(err, ErrUsage) {
		fmt.Fprintf(o.Stderr, "%s: %v\n", name, err)
		return 2
	}
	if err != nil {
		log.Error("start "+name, "err", err)
		return 1
	}
	ready.Store(true)
	<-ctx.Done()
	ready.Store(false)
	log.Info("shutting down", "drain_timeout", c.Drain.String())
	dctx, dcancel := context.WithTimeout(context.Background(), c.Drain)
	defer dcancel()
	if err := st.Stop(dctx); err != nil {
		log.Warn("drain incomplete; unfinished work is left to other replicas", "err", err)
	}
	log.Info("stopped")
	return 0
}

// Start calls svc.Start(run, env) until it succeeds or fails for good. A
// transient NATS error (natsutil.Transient) is retried for up to wait
// (0 = natsutil.DefaultConnectWait; negative = one attempt), each retry
// logged on env.Log, so that a replica that starts while its JetStream
// cluster elects a leader or a node restarts waits for the cluster
// instead of exiting. Cancelling ctx stops the retries; run is the
// context the service runs under (it may outlive ctx, see Main).
func Start(ctx, run context.Context, svc Service, env Env, wait time.Duration) (Stopper, error) {
	var st Stopper
	err := natsutil.Retry(ctx, wait, startAgain, func(err error, next time.Duration) {
		env.Log.Warn("cannot start yet; retrying", "service", svc.Name(), "err", err, "in", next)
	}, func() (err error) {
		st, err = svc.Start(run, env)
		return err
	})
	return st, err
}

// startAgain reports whether a failed Start is worth another try: a
// transient NATS error, not a usage error.
func startAgain(err error) bool {
	return !errors.Is(err, ErrUsage) && natsutil.Transient(err)
}

// serveHealth serves /healthz (the process runs), /readyz (the service
// started and is not draining) and /metrics on addr until stop.
func serveHealth(addr string, ready *atomic.Bool, metrics http.Handler) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--health-addr %s: %w", addr, err)
	}
	srv := &http.Server{Handler: HealthHandler(ready.Load, metrics), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return func() {
		_ = srv.Close()
		<-done
	}, nil
}

// HealthHandler serves /healthz (always ok), /readyz (503 until ready
// reports true) and, when metrics is not nil, /metrics.
func HealthHandler(ready func() bool, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready() {
			_, _ = w.Write([]byte("ready\n"))
			return
		}
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	})
	if metrics != nil {
		mux.Handle("/metrics", metrics)
	}
	return mux
}

// lockedWriter serializes writes to w, a writer (a test's buffer) that
// need not be safe for concurrent use.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
