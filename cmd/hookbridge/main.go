// Command hookbridge hosts the hooks of a YAML config file as NATS
// request/reply responders (DESIGN.md §7) and registers them in KV
// LLMW_HOOKS in the order the file lists them.
//
// Usage:
//
//	hookbridge --config hooks.yaml [flags]
//
// Flags (each with an environment default):
//
//	--config         $LLMW_HOOKS_CONFIG, the hook config file (required)
//	--check          parse the config, print the hooks and exit (no NATS)
//	--nats-url       $NATS_URL; empty: start an embedded NATS server
//	--nats-creds     $NATS_CREDS, a credentials file
//	--prefix         $LLMW_PREFIX, subject prefix (default llmw)
//	--instance       $LLMW_INSTANCE, replica name in the event source (default: host name)
//	--unregister     remove the hooks from LLMW_HOOKS on shutdown
//	--drain-timeout  $LLMW_DRAIN_TIMEOUT, how long SIGINT/SIGTERM waits for hook calls in flight (default 25s)
//	--store-dir      $LLMW_STORE_DIR, JetStream store of the embedded server (default: temporary)
//	--log-format     $LLMW_LOG_FORMAT, json or text (default json)
//	--log-level      $LLMW_LOG_LEVEL, debug, info, warn or error (default info)
//
// An invalid config exits with code 2 and names the line and field that
// are wrong. SIGINT or SIGTERM drains, then the process exits 0.
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
	"strings"
	"syscall"
	"time"

	"github.com/llmworker/llmworker/internal/natsutil"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hookbridge"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, nil)
	stop()
	os.Exit(code)
}

type options struct {
	config, natsURL, creds, prefix, instance, storeDir string
	check, unregister                                  bool
	drain                                              time.Duration
	logFormat, logLevel                                string
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
		host = hookbridge.ServiceName
	}
	o := &options{}
	fs := flag.NewFlagSet("hookbridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", getenv("LLMW_HOOKS_CONFIG"), "hook config file (YAML)")
	fs.BoolVar(&o.check, "check", false, "check the config, print the hooks and exit")
	fs.StringVar(&o.natsURL, "nats-url", getenv("NATS_URL"), "NATS server URL (empty: embedded server)")
	fs.StringVar(&o.creds, "nats-creds", getenv("NATS_CREDS"), "NATS credentials file")
	fs.StringVar(&o.prefix, "prefix", env("LLMW_PREFIX", events.DefaultPrefix), "subject prefix")
	fs.StringVar(&o.instance, "instance", env("LLMW_INSTANCE", host), "replica name in the CloudEvents source")
	fs.BoolVar(&o.unregister, "unregister", false, "remove the hooks from LLMW_HOOKS on shutdown")
	fs.StringVar(&o.storeDir, "store-dir", getenv("LLMW_STORE_DIR"), "JetStream store dir of the embedded server")
	fs.StringVar(&o.logFormat, "log-format", env("LLMW_LOG_FORMAT", "json"), "json or text")
	fs.StringVar(&o.logLevel, "log-level", env("LLMW_LOG_LEVEL", "info"), "debug, info, warn or error")
	drain := 25 * time.Second
	if v := getenv("LLMW_DRAIN_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("$LLMW_DRAIN_TIMEOUT: %w", err)
		}
		drain = d
	}
	fs.DurationVar(&o.drain, "drain-timeout", drain, "how long a shutdown waits for hook calls in flight")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if o.config == "" {
		return nil, errors.New("--config is required (or $LLMW_HOOKS_CONFIG)")
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

// run serves until ctx ends, then drains; it returns the exit code. ready,
// if not nil, is called once the hooks are served (tests).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, ready func(*hookbridge.Bridge)) int {
	o, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "hookbridge:", err)
		return 2
	}
	log, err := newLogger(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "hookbridge:", err)
		return 2
	}
	b, err := os.ReadFile(o.config)
	if err != nil {
		fmt.Fprintln(stderr, "hookbridge:", err)
		return 2
	}
	file, err := hookbridge.ParseConfig(o.config, b, hookbridge.ParseOptions{Getenv: getenv})
	if err != nil {
		fmt.Fprintln(stderr, "hookbridge:", err)
		return 2
	}
	if o.check {
		for _, h := range file.Hooks {
			r := h.Registration
			fmt.Fprintf(stdout, "%s\t%s\tpriority=%d\tmatcher=%q\ttimeout_ms=%d\tfailure=%s\n",
				r.Name, r.Event, r.Priority, r.Matcher, r.TimeoutMS, cmpOr(string(r.Failure), string(events.FailClosed)))
		}
		return 0
	}

	conn, err := natsutil.Connect(natsutil.Config{URL: o.natsURL, Creds: o.creds, Name: hookbridge.ServiceName + " " + o.instance, StoreDir: o.storeDir})
	if err != nil {
		log.Error("connect to NATS", "err", err)
		return 1
	}
	defer conn.Close()
	if conn.Embedded != nil {
		log.Info("embedded NATS server", "url", conn.Embedded.URL())
	}
	br, err := hookbridge.New(conn.NC, hookbridge.Config{
		Prefix: o.prefix, Instance: o.instance, Logger: log, Hooks: file.Hooks, UnregisterOnStop: o.unregister,
	})
	if err != nil {
		log.Error("configure hookbridge", "err", err)
		return 2
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = br.Start(sctx)
	cancel()
	if err != nil {
		log.Error("start hookbridge", "err", err)
		return 1
	}
	for _, h := range br.Hooks() {
		log.Info("serving hook", "hook", h.Registration.Name, "event", h.Registration.Event, "subject", h.Registration.Subject)
	}
	if ready != nil {
		ready(br)
	}
	<-ctx.Done()
	log.Info("shutting down", "drain_timeout", o.drain)
	dctx, dcancel := context.WithTimeout(context.Background(), o.drain)
	defer dcancel()
	if err := br.Stop(dctx); err != nil {
		log.Error("drain", "err", err)
		return 1
	}
	return 0
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
