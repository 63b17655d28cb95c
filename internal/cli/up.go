package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/events"
)

const upAbout = `
Runs the whole system in one process: NATS (embedded, unless --nats-url /
$NATS_URL names a server) plus ingest, toolexec (built-in tools; --root for
the file tools), hookbridge (with --hooks) and turn. Prints how to connect.
Ctrl-C (SIGINT) or SIGTERM drains the services in reverse order.

--services runs a subset against an existing server, e.g. one Kubernetes
Deployment per service; --health-addr serves /healthz (alive) and /readyz
(services started and NATS connected) for probes.`

func runUp(ctx context.Context, env *Env, args []string) error {
	var (
		conn                                  connFlags
		listen, storeDir, root, hooks         string
		services, healthAddr, logLevel, logFm string
		replayOn                              bool
		drain                                 time.Duration
	)
	fs := newFlags(env, "up", "up [flags]", upAbout)
	conn.register(fs, env)
	fs.StringVar(&listen, "listen", "127.0.0.1:4222", "embedded NATS: host:port to listen on (port 0 = random)")
	fs.StringVar(&storeDir, "store-dir", env.getenv("LLMW_STORE_DIR"), "embedded NATS: JetStream directory (default: temporary, removed on exit)")
	fs.StringVar(&root, "root", env.getenv("LLMW_TOOL_ROOT"), "directory the read_file/list_dir tools may read ($LLMW_TOOL_ROOT; empty disables them)")
	fs.StringVar(&hooks, "hooks", env.getenv("LLMW_HOOKS_CONFIG"), "hookbridge config file (YAML) to serve ($LLMW_HOOKS_CONFIG)")
	fs.StringVar(&services, "services", strings.Join(AllServices, ","), "services to run, comma-separated")
	fs.StringVar(&healthAddr, "health-addr", env.getenv("LLMW_HEALTH_ADDR"), "serve /healthz and /readyz on this address, e.g. :8081 ($LLMW_HEALTH_ADDR)")
	fs.BoolVar(&replayOn, "replay", false, "add the replay provider (model replay:<scenario>) and its demo tools")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&logFm, "log-format", "text", "text or json")
	fs.DurationVar(&drain, "drain-timeout", 25*time.Second, "how long shutdown waits for running turns, calls and streams")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: up takes no arguments, got %q", ErrUsage, fs.Args())
	}
	level, err := parseLevel(logLevel)
	if err != nil {
		return err
	}
	var log *slog.Logger
	switch logFm {
	case "text":
		log = slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
	case "json":
		log = slog.New(slog.NewJSONHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
	default:
		return fmt.Errorf("%w: --log-format %q: want text or json", ErrUsage, logFm)
	}
	var svcs []string
	for s := range strings.SplitSeq(services, ",") {
		if s = strings.TrimSpace(s); s != "" {
			svcs = append(svcs, s)
		}
	}
	var cur atomic.Pointer[Stack]
	if healthAddr != "" {
		// Alive from the start, ready once every service serves.
		ln, err := net.Listen("tcp", healthAddr)
		if err != nil {
			return fmt.Errorf("--health-addr %s: %w", healthAddr, err)
		}
		health := &http.Server{Handler: healthHandler(&cur), ReadHeaderTimeout: 5 * time.Second}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = health.Serve(ln)
		}()
		defer func() {
			_ = health.Close()
			<-done
		}()
	}
	// Services outlive the signal: ctx gives them values, Stop drains them.
	st, err := StartStack(context.WithoutCancel(ctx), StackConfig{
		NATSURL: conn.url, Creds: conn.creds, Listen: listen, StoreDir: storeDir, Prefix: conn.prefix,
		Services: svcs, Root: root, HooksFile: hooks, Replay: replayOn, Getenv: env.Getenv, Logger: log,
	})
	if err != nil {
		return err
	}
	cur.Store(st)
	if env.Started != nil {
		env.Started(st)
	}
	printConnect(env, st, replayOn)
	select {
	case <-ctx.Done():
	case <-env.Interrupt:
	}
	fmt.Fprintf(env.Stderr, "draining (up to %s)…\n", drain)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	return st.Stop(dctx)
}

// healthHandler serves /healthz (the process runs) and /readyz (every
// service started and NATS is connected).
func healthHandler(cur *atomic.Pointer[Stack]) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if st := cur.Load(); st != nil && st.Ready() {
			_, _ = w.Write([]byte("ready\n"))
			return
		}
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	})
	return mux
}

// printConnect tells the person how to use the running system.
func printConnect(env *Env, st *Stack, replayOn bool) {
	s := events.NewSubjects(st.Prefix)
	w := env.Stdout
	fmt.Fprintf(w, "llmworker is up: %s\n", strings.Join(st.Services, ", "))
	where := "NATS"
	if st.Embedded != nil {
		where = "embedded NATS"
	}
	fmt.Fprintf(w, "  %-16s %s\n", where, st.URL)
	if len(st.Tools) > 0 {
		fmt.Fprintf(w, "  %-16s %s\n", "tools", strings.Join(st.Tools, ", "))
	}
	if replayOn {
		fmt.Fprintf(w, "  %-16s models replay:%s — %s\n", "replay", strings.Join(replay.Names(), "|replay:"), replay.Label)
	}
	fmt.Fprintf(w, "\nchat with it from another terminal:\n  NATS_URL=%s llmworker chat \"hello\"\n", st.URL)
	fmt.Fprintf(w, "\nor publish CloudEvents yourself (DESIGN.md §5; Nats-Msg-Id = turn id):\n")
	fmt.Fprintf(w, "  submit  %s   (type %s)\n", s.TurnSubmit(), events.TypeTurnSubmit)
	fmt.Fprintf(w, "  resume  %s   (type %s)\n", s.TurnResume(), events.TypeTurnResume)
	fmt.Fprintf(w, "  cancel  %s\n", s.TurnCancel("<turn_id>"))
	fmt.Fprintf(w, "  events  %s   (stream %s)\n", s.Events("<session|_>", "<turn_id>", "<channel>"), events.StreamEvents)
	fmt.Fprintf(w, "\nCtrl-C drains and stops.\n")
}
