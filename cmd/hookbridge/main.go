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
	"os"
	"time"

	"github.com/llmworker/llmworker/internal/cmdutil"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hookbridge"
)

func main() {
	cmdutil.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, nil)
	})
}

type options struct {
	cmdutil.Common
	config            string
	check, unregister bool
	drain             time.Duration
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("hookbridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", getenv("LLMW_HOOKS_CONFIG"), "hook config file (YAML)")
	fs.BoolVar(&o.check, "check", false, "check the config, print the hooks and exit")
	o.Register(fs, getenv, cmdutil.Hostname(hookbridge.ServiceName))
	fs.BoolVar(&o.unregister, "unregister", false, "remove the hooks from LLMW_HOOKS on shutdown")
	drain, err := cmdutil.EnvDuration(getenv, "LLMW_DRAIN_TIMEOUT", 25*time.Second)
	if err != nil {
		return nil, err
	}
	fs.DurationVar(&o.drain, "drain-timeout", drain, "how long a shutdown waits for hook calls in flight")
	if err := cmdutil.Parse(fs, args); err != nil {
		return nil, err
	}
	if o.config == "" {
		return nil, errors.New("--config is required (or $LLMW_HOOKS_CONFIG)")
	}
	return o, nil
}

// run serves until ctx ends, then drains; it returns the exit code. ready,
// if not nil, is called once the hooks are served (tests).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, ready func(*hookbridge.Bridge)) int {
	o, err := parseFlags(args, getenv, stderr)
	log, code := cmdutil.Setup("hookbridge", stderr, o, err)
	if code >= 0 {
		return code
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

	conn, err := o.Connect(hookbridge.ServiceName, log)
	if err != nil {
		log.Error("connect to NATS", "err", err)
		return 1
	}
	defer conn.Close()
	br, err := hookbridge.New(conn.NC, hookbridge.Config{
		Prefix: o.Prefix, Instance: o.Instance, Logger: log, Hooks: file.Hooks, UnregisterOnStop: o.unregister,
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
	if err := cmdutil.Drain(ctx, log, o.drain, br.Stop); err != nil {
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
