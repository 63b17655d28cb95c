// Command ingest runs llmw-ingest, the micro service that calls LLM
// providers through their official SDKs and publishes their streams as
// CloudEvents on NATS (DESIGN.md §3).
//
// Usage:
//
//	ingest [flags]
//
// Flags (each with an environment default):
//
//	--nats-url       $NATS_URL; empty: start an embedded NATS server
//	--nats-creds     $NATS_CREDS, a credentials file
//	--prefix         $LLMW_PREFIX, subject prefix (default llmw)
//	--instance       $LLMW_INSTANCE, replica name in the event source (default: host name)
//	--idle-timeout   $LLMW_IDLE_TIMEOUT, end a stream silent this long (0 = 10m, negative = never)
//	--drain-timeout  $LLMW_DRAIN_TIMEOUT, how long SIGINT/SIGTERM waits for running streams (default 25s)
//	--max-payload    largest request body in bytes (0 = the server's max payload)
//	--structured     publish structured-mode CloudEvents instead of binary mode
//	--replay         $LLMW_REPLAY=1, also serve "replay:<scenario>" models: recorded
//	                 provider streams played through the real adapters (no account,
//	                 no network; internal/replay), e.g. for demos and end-to-end tests
//	--store-dir      $LLMW_STORE_DIR, JetStream store of the embedded server (default: temporary)
//	--log-format     $LLMW_LOG_FORMAT, json or text (default json)
//	--log-level      $LLMW_LOG_LEVEL, debug, info, warn or error (default info)
//
// Provider keys and base URLs come from the SDKs' own variables:
// OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL,
// GEMINI_API_KEY / GOOGLE_API_KEY, GOOGLE_GEMINI_BASE_URL. A provider
// without a key is still listed; its requests are refused with
// missing_api_key (401).
//
// SIGINT or SIGTERM drains: no new requests are taken, running streams
// finish (or are cancelled when the drain timeout passes), then the process
// exits 0.
package main

import (
	"context"
	"flag"
	"io"
	"os"
	"time"

	"github.com/llmworker/llmworker/internal/cmdutil"
	recorded "github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/ingest"
)

func main() {
	cmdutil.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Getenv, os.Stderr) })
}

// options are the parsed flags.
type options struct {
	cmdutil.Common
	idle, drain        time.Duration
	maxPayload         int
	structured, replay bool
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.Register(fs, getenv, cmdutil.Hostname("ingest"))
	fs.IntVar(&o.maxPayload, "max-payload", 0, "largest request body in bytes (0 = server max payload)")
	fs.BoolVar(&o.structured, "structured", false, "publish structured-mode CloudEvents")
	fs.BoolVar(&o.replay, "replay", getenv("LLMW_REPLAY") == "1" || getenv("LLMW_REPLAY") == "true",
		"also serve replay:<scenario> models ("+recorded.Label+")")
	idle, err := cmdutil.EnvDuration(getenv, "LLMW_IDLE_TIMEOUT", 0)
	if err != nil {
		return nil, err
	}
	drain, err := cmdutil.EnvDuration(getenv, "LLMW_DRAIN_TIMEOUT", 25*time.Second)
	if err != nil {
		return nil, err
	}
	fs.DurationVar(&o.idle, "idle-timeout", idle, "end a stream whose provider is silent this long (0 = default, negative = never)")
	fs.DurationVar(&o.drain, "drain-timeout", drain, "how long a shutdown waits for running streams")
	if err := cmdutil.Parse(fs, args); err != nil {
		return nil, err
	}
	return o, nil
}

// run serves until ctx ends, then drains. It returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	o, err := parseFlags(args, getenv, stderr)
	log, code := cmdutil.Setup("ingest", stderr, o, err)
	if code >= 0 {
		return code
	}

	conn, err := o.Connect(ingest.ServiceName, log)
	if err != nil {
		log.Error("connect to NATS", "err", err)
		return 1
	}
	defer conn.Close()

	providers := ingest.DefaultFactories()
	if o.replay {
		// The recordings are served on loopback inside this process, so
		// the replay models work without network access or keys.
		srv, err := recorded.NewServer(recorded.Config{})
		if err != nil {
			log.Error("start replay server", "err", err)
			return 1
		}
		defer srv.Close()
		providers[recorded.Prefix] = srv.Factory()
		log.Info("replay models enabled: "+recorded.Label, "models", replayModels())
	}
	svc, err := ingest.New(conn.NC, ingest.Config{
		Prefix:      o.Prefix,
		Instance:    o.Instance,
		Providers:   providers,
		IdleTimeout: o.idle,
		MaxPayload:  o.maxPayload,
		Logger:      log,
		Structured:  o.structured,
	})
	if err != nil {
		log.Error("configure ingest", "err", err)
		return 2
	}
	// Streams must outlive the signal: Start's context gives them values,
	// not cancellation, and Stop below drains them.
	if err := svc.Start(context.WithoutCancel(ctx)); err != nil {
		log.Error("start ingest", "err", err)
		return 1
	}
	if err := cmdutil.Drain(ctx, log, o.drain, svc.Stop); err != nil {
		log.Error("drain", "err", err)
		return 1
	}
	return 0
}

// replayModels lists the model strings --replay serves, for the log.
func replayModels() []string {
	var out []string
	for _, sc := range recorded.Scenarios() {
		out = append(out, sc.ModelString())
	}
	return out
}
