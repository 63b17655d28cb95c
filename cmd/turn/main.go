// Command turn runs the llmworker turn service (DESIGN.md §5–§8): it
// consumes turn requests from the JetStream work queue LLMW_TURNS and runs
// each turn — model calls through ingest, tools through toolexec, worker
// events on P.events.<session>.<turn>.<channel>, checkpoints in KV
// LLMW_TURN_STATE so that another replica finishes a turn whose replica
// died. Run as many replicas as needed; they share one durable consumer.
//
// Usage:
//
//	turn [flags]
//
// Flags (each with an environment default):
//
//	--nats-url        $NATS_URL; empty: start an embedded NATS server
//	--nats-creds      $NATS_CREDS, a credentials file
//	--prefix          $LLMW_PREFIX, subject prefix (default llmw)
//	--instance        $LLMW_INSTANCE, replica name in the event source (default: host name)
//	--max-concurrent  $LLMW_MAX_CONCURRENT, turns run at once by this replica (default 4096)
//	--ack-wait        $LLMW_ACK_WAIT, how long a dead replica's turn waits before another resumes it (default 30s)
//	--idle-timeout    $LLMW_IDLE_TIMEOUT, fail a model call silent this long (0 = 2m, negative = never)
//	--step-retries    $LLMW_STEP_RETRIES, retries of a model call that failed in transport (default 2, negative = none)
//	--max-steps       $LLMW_MAX_STEPS, model calls of a request without max_steps (0 = 20)
//	--default-tools   $LLMW_DEFAULT_TOOLS, comma-separated tool patterns of a request without "tools" (e.g. "*")
//	--drain-timeout   $LLMW_DRAIN_TIMEOUT, how long SIGINT/SIGTERM waits for running turns (default 25s)
//	--store-dir       $LLMW_STORE_DIR, JetStream store of the embedded server (default: temporary)
//	--log-format      $LLMW_LOG_FORMAT, json or text (default json)
//	--log-level       $LLMW_LOG_LEVEL, debug, info, warn or error (default info)
//
// The hooks of every turn are the registry KV LLMW_HOOKS (DESIGN.md §7),
// watched for changes while the service runs.
//
// SIGINT or SIGTERM drains: no new turns are taken, running turns finish
// or stop at their next step boundary (another replica continues them from
// the checkpoint), then the process exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/natsutil"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/natsrt"
	"github.com/llmworker/llmworker/pkg/remotehook"
	"github.com/llmworker/llmworker/pkg/turn"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the parsed flags.
type options struct {
	natsURL, creds, prefix, instance, storeDir string
	maxConcurrent, stepRetries, maxSteps       int
	replicas                                   int
	ackWait, idle, drain                       time.Duration
	defaultTools                               string
	logFormat, logLevel                        string
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	env := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "turn"
	}
	host = strings.NewReplacer(".", "-", " ", "-", "/", "-").Replace(host)
	o := &options{}
	fs := flag.NewFlagSet("turn", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.natsURL, "nats-url", getenv("NATS_URL"), "NATS server URL (empty: embedded server)")
	fs.StringVar(&o.creds, "nats-creds", getenv("NATS_CREDS"), "NATS credentials file")
	fs.StringVar(&o.prefix, "prefix", env("LLMW_PREFIX", events.DefaultPrefix), "subject prefix")
	fs.StringVar(&o.instance, "instance", env("LLMW_INSTANCE", host), "replica name in the CloudEvents source")
	fs.StringVar(&o.storeDir, "store-dir", getenv("LLMW_STORE_DIR"), "JetStream store dir of the embedded server")
	fs.StringVar(&o.defaultTools, "default-tools", getenv("LLMW_DEFAULT_TOOLS"), "comma-separated tool patterns of a request without tools")
	fs.StringVar(&o.logFormat, "log-format", env("LLMW_LOG_FORMAT", "json"), "json or text")
	fs.StringVar(&o.logLevel, "log-level", env("LLMW_LOG_LEVEL", "info"), "debug, info, warn or error")
	ints := []struct {
		p    *int
		name string
		env  string
		def  int
		help string
	}{
		{&o.maxConcurrent, "max-concurrent", "LLMW_MAX_CONCURRENT", turn.DefaultMaxConcurrent, "turns run at once by this replica"},
		{&o.stepRetries, "step-retries", "LLMW_STEP_RETRIES", turn.DefaultStepRetries, "retries of a model call that failed in transport (negative = none)"},
		{&o.maxSteps, "max-steps", "LLMW_MAX_STEPS", 0, "model calls of a request without max_steps (0 = 20)"},
		{&o.replicas, "replicas", "LLMW_REPLICAS", 1, "JetStream replicas of the streams and buckets this replica creates (3 on a 3-node cluster)"},
	}
	for _, f := range ints {
		def := f.def
		if v := getenv(f.env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("$%s: %w", f.env, err)
			}
			def = n
		}
		fs.IntVar(f.p, f.name, def, f.help)
	}
	durs := []struct {
		p    *time.Duration
		name string
		env  string
		def  time.Duration
		help string
	}{
		{&o.ackWait, "ack-wait", "LLMW_ACK_WAIT", turn.DefaultAckWait, "how long a dead replica's turn waits before another replica resumes it"},
		{&o.idle, "idle-timeout", "LLMW_IDLE_TIMEOUT", 0, "fail a model call whose stream is silent this long (0 = default, negative = never)"},
		{&o.drain, "drain-timeout", "LLMW_DRAIN_TIMEOUT", 25 * time.Second, "how long a shutdown waits for running turns"},
	}
	for _, f := range durs {
		def := f.def
		if v := getenv(f.env); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, fmt.Errorf("$%s: %w", f.env, err)
			}
			def = d
		}
		fs.DurationVar(f.p, f.name, def, f.help)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return o, nil
}

func newLogger(o *options, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	ho := &slog.HandlerOptions{Level: level}
	switch o.logFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	}
	return nil, fmt.Errorf("--log-format: want json or text, got %q", o.logFormat)
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// run serves until ctx ends, then drains. It returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	o, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "turn:", err)
		return 2
	}
	log, err := newLogger(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "turn:", err)
		return 2
	}
	cfg := turn.Config{
		Prefix:          o.prefix,
		Instance:        o.instance,
		Logger:          log,
		DefaultTools:    splitList(o.defaultTools),
		MaxConcurrent:   o.maxConcurrent,
		AckWait:         o.ackWait,
		IdleTimeout:     o.idle,
		StepRetries:     o.stepRetries,
		DefaultMaxSteps: o.maxSteps,
		Provision:       natsrt.ProvisionOptions{Prefix: o.prefix, Replicas: o.replicas},
	}
	if o.stepRetries == 0 {
		cfg.StepRetries = -1 // 0 on the command line means none
	}

	conn, err := natsutil.Connect(natsutil.Config{URL: o.natsURL, Creds: o.creds, Name: "llmw-turn " + o.instance, StoreDir: o.storeDir})
	if err != nil {
		log.Error("connect to NATS", "err", err)
		return 1
	}
	defer conn.Close()
	if conn.Embedded != nil {
		log.Info("embedded NATS server", "url", conn.Embedded.URL())
	}
	// The hooks of every turn: the registry LLMW_HOOKS, kept in sync by a
	// watcher once Start has provisioned the bucket.
	chain := &hook.Chain{}
	cfg.Hooks = chain
	svc, err := turn.New(conn.NC, cfg)
	if err != nil {
		log.Error("configure turn service", "err", err)
		return 2
	}
	// Turns must outlive the signal: Start's context bounds the setup
	// only, and Stop below drains them.
	if err := svc.Start(context.WithoutCancel(ctx)); err != nil {
		log.Error("start turn service", "err", err)
		return 1
	}
	js, err := jetstream.New(conn.NC)
	if err == nil {
		var w *remotehook.Watcher
		w, err = remotehook.Watch(context.WithoutCancel(ctx), js, chain, remotehook.WatchOptions{
			Config: remotehook.Config{Source: svc.Source()}, Logger: log.With("component", "hooks"),
		})
		if err == nil {
			defer func() { _ = w.Stop() }() // after the drain: draining turns keep their hooks
		}
	}
	if err != nil {
		log.Error("watch the hook registry", "err", err)
		sctx, cancel := context.WithTimeout(context.Background(), o.drain)
		defer cancel()
		_ = svc.Stop(sctx)
		return 1
	}
	<-ctx.Done()
	log.Info("shutting down", "drain_timeout", o.drain)
	dctx, cancel := context.WithTimeout(context.Background(), o.drain)
	defer cancel()
	if err := svc.Stop(dctx); err != nil {
		log.Warn("drain incomplete; unfinished turns are left to other replicas", "err", err)
	}
	return 0
}
