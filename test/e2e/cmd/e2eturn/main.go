// Command e2eturn is cmd/turn for the end-to-end tests in test/e2e: the
// same pkg/turn service, plus what cmd/turn does not offer yet —
// --replicas, the replica count of the streams and buckets it provisions
// (3 on the test's three-node cluster; cmd/turn always provisions R1, and a
// later R1 provisioning would scale an R3 stream down).
//
//	e2eturn --nats-url URL[,URL...] --instance NAME [--replicas 3] [--ack-wait 5s] [--step-retries N] [--ingest-timeout D] [--hooks]
//
// SIGTERM drains like cmd/turn; the tests mostly kill it instead.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/pkg/a2a/remote"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/permissions"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/turn"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "e2eturn:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("e2eturn", flag.ContinueOnError)
	url := fs.String("nats-url", os.Getenv("NATS_URL"), "NATS server URLs, comma-separated")
	prefix := fs.String("prefix", "", "subject prefix")
	instance := fs.String("instance", "", "replica name")
	replicas := fs.Int("replicas", 1, "replicas of the streams and buckets")
	verify := fs.Bool("provision-verify", os.Getenv("LLMW_PROVISION_VERIFY") == "true", "check the streams and buckets instead of creating them (a NATS identity without those rights)")
	ackWait := fs.Duration("ack-wait", 5*time.Second, "AckWait of the turn consumer")
	idle := fs.Duration("idle-timeout", 30*time.Second, "fail a silent model call after this long")
	retries := fs.Int("step-retries", 0, "retries of a model call that failed for a transport reason (0 = the default)")
	ingestTimeout := fs.Duration("ingest-timeout", 0, "wait for ingest's reply to a model call (0 = the default)")
	hooks := fs.Bool("hooks", false, "watch LLMW_HOOKS for the hooks of every turn, as cmd/turn does (clusters with a hookbridge)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(os.Stderr, nil)))
	// Tracing when the OTEL_* environment asks for it, as in every
	// cmd/<service> (internal/service.Main); spans are flushed on the way
	// out, after the drain.
	shutdown, _, err := telemetry.Setup(ctx, telemetry.Config{Service: "llmw-turn", Instance: *instance})
	if err != nil {
		return err
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(fctx)
	}()
	conn, err := natsutil.Connect(ctx, natsutil.Config{URL: *url, Name: "llmw-turn " + *instance}, append(natsutil.LogEvents(log), nats.CustomInboxPrefix(permissions.InboxPrefix(permissions.Turn, *prefix)))...)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The hooks of every turn: LLMW_HOOKS, watched as cmd/turn does
	// (internal/service/turnsvc).
	chain := &hook.Chain{}
	cfg := turn.Config{
		Hooks:         chain,
		Prefix:        *prefix,
		Instance:      *instance,
		Logger:        log,
		AckWait:       *ackWait,
		IdleTimeout:   *idle,
		StepRetries:   *retries,
		IngestTimeout: *ingestTimeout,
		Provision:     provision.Options{Replicas: *replicas, VerifyOnly: *verify},
		RemoteAgents:  remote.Agents(remote.Config{}),
	}
	// As cmd/turn does (internal/service.Start): a replica restarted while
	// the cluster elects a leader waits for it. A Service starts once, so
	// each attempt makes a new one.
	var svc *turn.Service
	err = natsutil.Retry(ctx, 0, natsutil.Transient, func(err error, next time.Duration) {
		log.Warn("cannot start yet; retrying", "err", err, "in", next)
	}, func() error {
		s, err := turn.New(conn.NC, cfg)
		if err != nil {
			return err
		}
		if err := s.Start(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		svc = s
		return nil
	})
	if err != nil {
		return err
	}
	var w *hooknats.Watcher
	if *hooks {
		err = natsutil.Retry(ctx, 0, natsutil.Transient, func(err error, next time.Duration) {
			log.Warn("cannot watch hooks yet; retrying", "err", err, "in", next)
		}, func() error {
			js, err := jetstream.New(conn.NC)
			if err != nil {
				return err
			}
			w, err = hooknats.Watch(context.WithoutCancel(ctx), js, chain, hooknats.WatchOptions{
				Config: hooknats.Config{Source: svc.Source()}, Logger: log.With("component", "hooks"),
			})
			return err
		})
		if err != nil {
			return err
		}
	}
	log.Info("turn service started", "instance", *instance, "replicas", *replicas, "ack_wait", *ackWait)
	<-ctx.Done()
	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = svc.Stop(dctx)
	// After the drain: draining turns keep their hooks.
	if w != nil {
		err = errors.Join(err, w.Stop())
	}
	return err
}
