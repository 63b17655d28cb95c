// Command e2eturn is cmd/turn for the end-to-end tests in test/e2e: the
// same pkg/turn service, plus what cmd/turn does not offer yet —
// --replicas, the replica count of the streams and buckets it provisions
// (3 on the test's three-node cluster; cmd/turn always provisions R1, and a
// later R1 provisioning would scale an R3 stream down).
//
//	e2eturn --nats-url URL[,URL...] --instance NAME [--replicas 3] [--ack-wait 5s]
//
// SIGTERM drains like cmd/turn; the tests mostly kill it instead.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/llmworker/llmworker/internal/natsutil"
	"github.com/llmworker/llmworker/pkg/natsrt"
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
	ackWait := fs.Duration("ack-wait", 5*time.Second, "AckWait of the turn consumer")
	idle := fs.Duration("idle-timeout", 30*time.Second, "fail a silent model call after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	conn, err := natsutil.Connect(natsutil.Config{URL: *url, Name: "llmw-turn " + *instance})
	if err != nil {
		return err
	}
	defer conn.Close()
	svc, err := turn.New(conn.NC, turn.Config{
		Prefix:      *prefix,
		Instance:    *instance,
		Logger:      log,
		AckWait:     *ackWait,
		IdleTimeout: *idle,
		Provision:   natsrt.ProvisionOptions{Replicas: *replicas},
	})
	if err != nil {
		return err
	}
	if err := svc.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	log.Info("turn service started", "instance", *instance, "replicas", *replicas, "ack_wait", *ackWait)
	<-ctx.Done()
	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return svc.Stop(dctx)
}
