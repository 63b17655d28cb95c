// Command toolexec hosts llmworker's built-in tools on NATS (DESIGN.md §6):
// current_time, calculator and, with --root, read_file and list_dir
// confined to that directory. Every replica pulls from the same durable
// consumers, so running more replicas scales the tools horizontally.
//
//	toolexec [--nats-url URL] [--prefix P] [--root DIR] [--instance ID]
//	         [--log-format text|json] [--log-level LEVEL]
//
// Without --nats-url or $NATS_URL it starts an embedded NATS server.
// $NATS_CREDS names a credentials file. Logs are text unless --log-format
// or $LLMW_LOG_FORMAT says json; --log-level or $LLMW_LOG_LEVEL sets the
// level (default info). SIGINT or SIGTERM drains: running calls finish and
// are acknowledged before the process exits.
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
	"github.com/llmworker/llmworker/internal/natsutil"
	"github.com/llmworker/llmworker/pkg/natsrt"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/toolexec/builtin"
)

func main() {
	cmdutil.Main(func(ctx context.Context) int {
		if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "toolexec:", err)
			return 1
		}
		return 0
	})
}

// options are the command line; env fills what flags leave empty.
type options struct {
	natsURL, prefix, root, instance string
	concurrency, replicas           int
	drain, ackWait                  time.Duration
	log                             cmdutil.LogFlags
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("toolexec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// Malformed numbers in the environment fall back to the defaults (this
	// command has always been lenient there, unlike the other services).
	ackWait, _ := cmdutil.EnvDuration(os.Getenv, "LLMW_ACK_WAIT", 0)
	replicas, _ := cmdutil.EnvInt(os.Getenv, "LLMW_REPLICAS", 1)
	fs.StringVar(&o.natsURL, "nats-url", os.Getenv("NATS_URL"), "NATS server URL ($NATS_URL); empty starts an embedded server")
	fs.StringVar(&o.prefix, "prefix", cmdutil.Env(os.Getenv, "LLMW_PREFIX", "llmw"), "subject prefix ($LLMW_PREFIX)")
	fs.StringVar(&o.root, "root", os.Getenv("LLMW_TOOL_ROOT"), "directory read_file and list_dir may read ($LLMW_TOOL_ROOT); empty disables them")
	fs.StringVar(&o.instance, "instance", os.Getenv("HOSTNAME"), "replica id in event sources (default $HOSTNAME or random)")
	fs.IntVar(&o.concurrency, "concurrency", toolexec.DefaultConcurrency, "concurrent calls per tool")
	fs.DurationVar(&o.drain, "drain-timeout", 30*time.Second, "how long running calls may finish on shutdown")
	fs.DurationVar(&o.ackWait, "ack-wait", ackWait, "how long a dead replica's call waits before another replica runs it ($LLMW_ACK_WAIT; 0 = 30s)")
	fs.IntVar(&o.replicas, "replicas", replicas, "JetStream replicas of the streams and buckets this replica creates ($LLMW_REPLICAS; 3 on a 3-node cluster)")
	// Text by default, as before the flag existed; $LLMW_LOG_FORMAT=json
	// switches all services at once.
	o.log.Register(fs, os.Getenv, "text")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
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
	log, err := o.log.Logger(stderr)
	if err != nil {
		return err
	}
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
	return cmdutil.StopWithin(o.drain, srv.Stop)
}
