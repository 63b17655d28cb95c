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
	"flag"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/cmdutil"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/natsrt"
	"github.com/llmworker/llmworker/pkg/remotehook"
	"github.com/llmworker/llmworker/pkg/turn"
)

func main() {
	cmdutil.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Getenv, os.Stderr) })
}

// options are the parsed flags.
type options struct {
	cmdutil.Common
	maxConcurrent, stepRetries, maxSteps int
	replicas                             int
	ackWait, idle, drain                 time.Duration
	defaultTools                         string
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	// The instance names a consumer and KV keys: no dots, spaces or slashes.
	host := strings.NewReplacer(".", "-", " ", "-", "/", "-").Replace(cmdutil.Hostname("turn"))
	o := &options{}
	fs := flag.NewFlagSet("turn", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.Register(fs, getenv, host)
	fs.StringVar(&o.defaultTools, "default-tools", getenv("LLMW_DEFAULT_TOOLS"), "comma-separated tool patterns of a request without tools")
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
		def, err := cmdutil.EnvInt(getenv, f.env, f.def)
		if err != nil {
			return nil, err
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
		def, err := cmdutil.EnvDuration(getenv, f.env, f.def)
		if err != nil {
			return nil, err
		}
		fs.DurationVar(f.p, f.name, def, f.help)
	}
	if err := cmdutil.Parse(fs, args); err != nil {
		return nil, err
	}
	return o, nil
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
	log, code := cmdutil.Setup("turn", stderr, o, err)
	if code >= 0 {
		return code
	}
	cfg := turn.Config{
		Prefix:          o.Prefix,
		Instance:        o.Instance,
		Logger:          log,
		DefaultTools:    splitList(o.defaultTools),
		MaxConcurrent:   o.maxConcurrent,
		AckWait:         o.ackWait,
		IdleTimeout:     o.idle,
		StepRetries:     o.stepRetries,
		DefaultMaxSteps: o.maxSteps,
		Provision:       natsrt.ProvisionOptions{Prefix: o.Prefix, Replicas: o.replicas},
	}
	if o.stepRetries == 0 {
		cfg.StepRetries = -1 // 0 on the command line means none
	}

	conn, err := o.Connect("llmw-turn", log)
	if err != nil {
		log.Error("connect to NATS", "err", err)
		return 1
	}
	defer conn.Close()
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
		_ = cmdutil.StopWithin(o.drain, svc.Stop)
		return 1
	}
	if err := cmdutil.Drain(ctx, log, o.drain, svc.Stop); err != nil {
		log.Warn("drain incomplete; unfinished turns are left to other replicas", "err", err)
	}
	return 0
}
