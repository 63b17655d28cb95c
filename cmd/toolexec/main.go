// Command toolexec hosts llmworker's built-in tools on NATS (DESIGN.md §6):
// current_time, calculator and, with --root, read_file and list_dir
// confined to that directory. Every replica pulls from the same durable
// consumers, so running more replicas scales the tools horizontally.
//
//	toolexec [--nats-url URL] [--prefix P] [--root DIR] [--instance ID]
//
// Without --nats-url or $NATS_URL it starts an embedded NATS server.
// $NATS_CREDS names a credentials file. SIGINT or SIGTERM drains: running
// calls finish and are acknowledged before the process exits.
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
	"syscall"
	"time"

	"github.com/llmworker/llmworker/internal/natsutil"
	"github.com/llmworker/llmworker/pkg/natsrt"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/toolexec/builtin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "toolexec:", err)
		os.Exit(1)
	}
}

// options are the command line; env fills what flags leave empty.
type options struct {
	natsURL, prefix, root, instance string
	concurrency, replicas           int
	drain, ackWait                  time.Duration
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("toolexec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.natsURL, "nats-url", os.Getenv("NATS_URL"), "NATS server URL ($NATS_URL); empty starts an embedded server")
	fs.StringVar(&o.prefix, "prefix", envOr("LLMW_PREFIX", "llmw"), "subject prefix ($LLMW_PREFIX)")
	fs.StringVar(&o.root, "root", os.Getenv("LLMW_TOOL_ROOT"), "directory read_file and list_dir may read ($LLMW_TOOL_ROOT); empty disables them")
	fs.StringVar(&o.instance, "instance", os.Getenv("HOSTNAME"), "replica id in event sources (default $HOSTNAME or random)")
	fs.IntVar(&o.concurrency, "concurrency", toolexec.DefaultConcurrency, "concurrent calls per tool")
	fs.DurationVar(&o.drain, "drain-timeout", 30*time.Second, "how long running calls may finish on shutdown")
	fs.DurationVar(&o.ackWait, "ack-wait", envDuration("LLMW_ACK_WAIT", 0), "how long a dead replica's call waits before another replica runs it ($LLMW_ACK_WAIT; 0 = 30s)")
	fs.IntVar(&o.replicas, "replicas", envInt("LLMW_REPLICAS", 1), "JetStream replicas of the streams and buckets this replica creates ($LLMW_REPLICAS; 3 on a 3-node cluster)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
}

func envInt(k string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return n
	}
	return def
}

func envDuration(k string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(k)); err == nil {
		return d
	}
	return def
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// run serves until ctx ends; ready (when non-nil) receives the connection
// URL once the tools are served, for tests.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	return runReady(ctx, args, stderr, nil)
}

func runReady(ctx context.Context, args []string, stderr io.Writer, ready func(url string)) error {
	o, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	tools, err := builtin.Tools(builtin.Config{Root: o.root})
	if err != nil {
		return err
	}
	if o.root == "" {
		log.Info("file tools disabled: pass --root DIR (or $LLMW_TOOL_ROOT) to enable read_file and list_dir")
	}
	conn, err := natsutil.Connect(natsutil.Config{URL: o.natsURL, Name: "llmw-toolexec"})
	if err != nil {
		return err
	}
	defer conn.Close()
	url := conn.NC.ConnectedUrl()
	if conn.Embedded != nil {
		log.Info("embedded NATS started", "url", url)
	}
	srv, err := toolexec.New(conn.NC, toolexec.Config{
		Prefix: o.prefix, Instance: o.instance, Logger: log, Concurrency: o.concurrency, AckWait: o.ackWait,
		Provision: natsrt.ProvisionOptions{Prefix: o.prefix, Replicas: o.replicas},
	})
	if err != nil {
		return err
	}
	if err := srv.Register(tools...); err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.Name())
	}
	log.Info("serving tools", "tools", names, "nats", url, "prefix", o.prefix)
	if ready != nil {
		ready(url)
	}
	<-ctx.Done()
	dctx, cancel := context.WithTimeout(context.Background(), o.drain)
	defer cancel()
	return srv.Stop(dctx)
}
