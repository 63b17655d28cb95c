// Command e2etoolexec is cmd/toolexec for the end-to-end tests in test/e2e:
// the same pkg/toolexec server hosting the built-in tools and the replay
// demo tools (the tools the recorded streams of `ingest --replay` call),
// plus what cmd/toolexec does not offer yet: --replicas (stream and bucket
// replicas) and --ack-wait (how soon a call held by a dead or cut-off
// replica is redelivered), and --slow to make a tool take a while, so that
// a test can crash or cut off a process while a call is running.
//
//	e2etoolexec --nats-url URL[,URL...] --instance NAME [--replicas 3]
//	            [--ack-wait 3s] [--slow fixed_version=8s]
//
// Each execution of a slow tool logs "slow tool start" with the call id
// on stderr, which is how the tests find the replica running a call and
// count executions.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/internal/replay/demotools"
	"github.com/llmworker/llmworker/pkg/permissions"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/toolexec/builtin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "e2etoolexec:", err)
		os.Exit(1)
	}
}

// slowTool delays another tool; it logs each execution so that tests can
// count them.
type slowTool struct {
	tool.Tool
	delay time.Duration
	log   *slog.Logger
}

// Eager is the delayed tool's (the demo tools are read-only).
func (s slowTool) Eager() bool { return tool.EagerOf(s.Tool) }

func (s slowTool) Execute(ctx context.Context, input json.RawMessage) (string, error) {
	call, _ := tool.CallFrom(ctx)
	s.log.Info("slow tool start", "tool", s.Name(), "call_id", call.CallID, "turn_id", call.TurnID)
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		s.log.Info("slow tool cancelled", "tool", s.Name(), "call_id", call.CallID)
		return "", ctx.Err()
	case <-t.C:
	}
	out, err := s.Tool.Execute(ctx, input)
	s.log.Info("slow tool done", "tool", s.Name(), "call_id", call.CallID)
	return out, err
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("e2etoolexec", flag.ContinueOnError)
	url := fs.String("nats-url", os.Getenv("NATS_URL"), "NATS server URLs, comma-separated")
	prefix := fs.String("prefix", "", "subject prefix")
	instance := fs.String("instance", "", "replica name")
	replicas := fs.Int("replicas", 1, "replicas of the streams and buckets")
	verify := fs.Bool("provision-verify", os.Getenv("LLMW_PROVISION_VERIFY") == "true", "check the streams and buckets instead of creating them (a NATS identity without those rights)")
	ackWait := fs.Duration("ack-wait", 3*time.Second, "AckWait of the tool consumers")
	slow := fs.String("slow", "", "comma-separated name=duration: tools that wait that long before running")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(os.Stderr, nil)))
	// Tracing when the OTEL_* environment asks for it, as in every
	// cmd/<service> (internal/service.Main); spans are flushed on the way
	// out, after the drain.
	shutdown, _, err := telemetry.Setup(ctx, telemetry.Config{Service: "llmw-toolexec", Instance: *instance})
	if err != nil {
		return err
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(fctx)
	}()
	delays := map[string]time.Duration{}
	for item := range strings.SplitSeq(*slow, ",") {
		if item == "" {
			continue
		}
		name, d, ok := strings.Cut(item, "=")
		dur, err := time.ParseDuration(d)
		if !ok || err != nil {
			return fmt.Errorf("--slow %q: want name=duration", item)
		}
		delays[name] = dur
	}
	tools, err := builtin.Tools(builtin.Config{})
	if err != nil {
		return err
	}
	tools = append(tools, demotools.Tools()...)
	for i, t := range tools {
		if d, ok := delays[t.Name()]; ok {
			tools[i] = slowTool{Tool: t, delay: d, log: log}
			delete(delays, t.Name())
		}
	}
	if len(delays) > 0 {
		return fmt.Errorf("--slow: unknown tools in %q", *slow)
	}
	conn, err := natsutil.Connect(ctx, natsutil.Config{URL: *url, Name: "llmw-toolexec " + *instance}, append(natsutil.LogEvents(log), nats.CustomInboxPrefix(permissions.InboxPrefix(permissions.Toolexec, *prefix)))...)
	if err != nil {
		return err
	}
	defer conn.Close()
	srv, err := toolexec.New(conn.NC, toolexec.Config{
		Prefix:    *prefix,
		Instance:  *instance,
		Logger:    log,
		AckWait:   *ackWait,
		Provision: provision.Options{Replicas: *replicas, VerifyOnly: *verify},
	})
	if err != nil {
		return err
	}
	if err := srv.Register(tools...); err != nil {
		return err
	}
	// As cmd/toolexec does (internal/service.Start): a replica restarted
	// while the cluster elects a leader waits for it.
	if err := natsutil.Retry(ctx, 0, natsutil.Transient, func(err error, next time.Duration) {
		log.Warn("cannot start yet; retrying", "err", err, "in", next)
	}, func() error { return srv.Start(ctx) }); err != nil {
		return err
	}
	log.Info("toolexec started", "instance", *instance, "tools", len(tools), "replicas", *replicas, "ack_wait", *ackWait)
	<-ctx.Done()
	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Stop(dctx)
}
