// Package turnsvc is the turn service as cmd/turn and `llmworker up` run
// it: pkg/turn with the hooks of the registry LLMW_HOOKS, watched while it
// runs.
package turnsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/pkg/a2a/remote"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/models"
	"github.com/llmworker/llmworker/pkg/price"
	"github.com/llmworker/llmworker/pkg/turn"
)

// Options configure the service; zero values are pkg/turn's defaults.
type Options struct {
	MaxConcurrent int
	AckWait       time.Duration
	IdleTimeout   time.Duration
	StepRetries   int
	MaxSteps      int
	// DefaultTools are comma-separated tool patterns of a request without
	// "tools" (e.g. "*").
	DefaultTools string
	// FallbackModels are comma-separated provider:model strings: the
	// fallback models of a request without fallback_models.
	FallbackModels string
	FinishedTTL    time.Duration
	CancelTTL      time.Duration
	RetryTimeout   time.Duration
	// MaxDepth and MaxChildren are turn.Config's: how deep sub-agents
	// nest, and how many sub-agent calls a turn makes.
	MaxDepth    int
	MaxChildren int
	// NoEagerStart is turn.Config.NoEagerStart: every tool call waits for
	// the end of the model's response.
	NoEagerStart bool
	// Ephemeral is turn.Config.Ephemeral: the store goes with the process
	// (set by the stack for an embedded server's temporary store).
	Ephemeral bool
	// Prices is a price table file (pkg/price: JSON, or YAML named
	// *.yaml or *.yml), read again when it changes.
	Prices string
	// PricesReload is how often the price table file is checked for
	// changes (0 = DefaultPricesReload).
	PricesReload time.Duration
	// Models is a models file (pkg/models: JSON, or YAML named *.yaml or
	// *.yml) over the shipped model table, read again when it changes
	// (every PricesReload).
	Models string
	// Compaction is the JSON of the turns' compaction setting
	// (events.CompactionConfig), e.g. {"threshold":0.7}; "" is the
	// defaults.
	Compaction string
}

// DefaultPricesReload is how often the price table and models files are
// checked for changes.
const DefaultPricesReload = 5 * time.Second

// Service is the turn service.
type Service struct {
	Options
	// Watcher keeps the turns' hook chain in sync with LLMW_HOOKS once
	// started.
	Watcher *hooknats.Watcher
}

var _ service.Service = (*Service)(nil)

func (*Service) Name() string { return "turn" }

func (*Service) About() string {
	return `Runs the llmworker turn service: it consumes turn requests from the
JetStream work queue LLMW_TURNS and runs each turn — model calls through
ingest, tools through toolexec, worker events on
P.events.<session>.<turn>.<channel>, checkpoints in KV LLMW_TURN_STATE so
that another replica finishes a turn whose replica died. Run as many
replicas as needed; they share one durable consumer. The hooks of every
turn are the registry KV LLMW_HOOKS, watched while the service runs.
SIGINT or SIGTERM drains: running turns finish or stop at their next step
boundary (another replica continues them from the checkpoint).`
}

// Flags registers the service's flags.
func (s *Service) Flags(f *service.Flags) {
	f.Int(&s.MaxConcurrent, "max-concurrent", "LLMW_MAX_CONCURRENT", 0, "turns run at once by this replica (0 = 4096)")
	f.Duration(&s.AckWait, "ack-wait", "LLMW_ACK_WAIT", 0, "how long a dead replica's turn waits before another replica resumes it (0 = 30s)")
	f.Duration(&s.IdleTimeout, "idle-timeout", "LLMW_IDLE_TIMEOUT", 0, "fail a model call whose stream is silent this long (0 = 2m, negative = never)")
	f.Int(&s.StepRetries, "step-retries", "LLMW_STEP_RETRIES", 0, "retries of a model call that failed in transport (0 = 2, negative = none)")
	f.Int(&s.MaxSteps, "max-steps", "LLMW_MAX_STEPS", 0, "model calls of a request without max_steps (0 = 20)")
	f.String(&s.DefaultTools, "default-tools", "LLMW_DEFAULT_TOOLS", "", `comma-separated tool patterns of a request without "tools" (e.g. "*")`)
	f.String(&s.FallbackModels, "fallback-models", "LLMW_FALLBACK_MODELS", "", `comma-separated provider:model strings a step of a request without "fallback_models" goes on with, in order, when its model fails before answering (rate limited, overloaded)`)
	f.Duration(&s.FinishedTTL, "finished-ttl", "LLMW_FINISHED_TTL", 0, "how long an ended turn's state is kept; its id is taken until then (0 = 24h, negative = forever)")
	f.Duration(&s.CancelTTL, "cancel-ttl", "LLMW_CANCEL_TTL", 0, "how long a cancel of a not yet started turn waits for its submit (0 = 10m, negative = not at all)")
	f.Int(&s.MaxDepth, "max-depth", "LLMW_MAX_DEPTH", 0, "how deep sub-agents' child turns nest; a call deeper gets an error result (0 = 4, negative = no sub-agents)")
	f.Int(&s.MaxChildren, "max-children", "LLMW_MAX_CHILDREN", 0, "sub-agent calls one turn makes; a call past it gets an error result (0 = 16)")
	f.Bool(&s.NoEagerStart, "no-eager-start", "LLMW_NO_EAGER_START", false, "start no tool call before the model's response ended (by default a call of a read-only or idempotent tool starts as soon as its input is complete)")
	f.String(&s.Prices, "prices", "LLMW_PRICES", "", "price table file (JSON, or YAML as *.yaml): per model the price of a million input, cached input, cache-creation and output tokens; costs in llmw.usage and what max_cost holds turns to; read again when it changes")
	f.String(&s.Models, "models", "LLMW_MODELS", "", "models file (JSON, or YAML as *.yaml): per provider:model the context_window and max_output_tokens, over the shipped table; what a turn estimates each model call against; read again when it changes")
	f.String(&s.Compaction, "compaction", "LLMW_COMPACTION", "", `compaction setting of every turn as JSON (e.g. '{"threshold":0.7,"summarizer_model":"anthropic:claude-haiku-4-5"}' or '{"disabled":true}'); a request's "compaction" overrides its fields`)
	f.Duration(&s.RetryTimeout, "retry-timeout", "LLMW_RETRY_TIMEOUT", 0, "how long a turn's events and state writes are retried while their stream has no leader before the turn is handed off (0 = 30s)")
}

// Start starts the hook registry watcher and the turn service.
func (s *Service) Start(ctx context.Context, env service.Env) (service.Stopper, error) {
	chain := &hook.Chain{}
	compaction, err := parseCompaction(s.Compaction)
	if err != nil {
		return nil, fmt.Errorf("%w: --compaction: %w", service.ErrUsage, err)
	}
	var prices price.Source
	stopPrices := func() {}
	if s.Prices != "" {
		f, err := price.NewFile(s.Prices)
		if err != nil {
			return nil, fmt.Errorf("%w: --prices: %w", service.ErrUsage, err)
		}
		prices, stopPrices = f, s.follow("prices", "price table file", f, func() int { return f.Table().Len() }, env)
	}
	var table models.Source
	stopModels := func() {}
	if s.Models != "" {
		f, err := models.NewFile(s.Models)
		if err != nil {
			stopPrices()
			return nil, fmt.Errorf("%w: --models: %w", service.ErrUsage, err)
		}
		table, stopModels = f, s.follow("models", "models file", f, func() int { return f.Table().Len() }, env)
	}
	stopFiles := func() { stopPrices(); stopModels() }
	svc, err := turn.New(env.NC, turn.Config{
		Prefix: env.Prefix, Instance: env.Instance, Logger: env.Log, Hooks: chain,
		DefaultTools: service.SplitList(s.DefaultTools), FallbackModels: service.SplitList(s.FallbackModels), MaxConcurrent: s.MaxConcurrent, AckWait: s.AckWait,
		IdleTimeout: s.IdleTimeout, StepRetries: s.StepRetries, DefaultMaxSteps: s.MaxSteps,
		FinishedTTL: s.FinishedTTL, CancelTTL: s.CancelTTL, RetryTimeout: s.RetryTimeout, Ephemeral: s.Ephemeral,
		NoEagerStart: s.NoEagerStart, Provision: env.Provision(), Prices: prices, Models: table,
		MaxDepth: s.MaxDepth, MaxChildren: s.MaxChildren,
		Compaction: compaction, RemoteAgents: remote.Agents(remote.Config{}),
	})
	if err != nil {
		stopFiles()
		return nil, fmt.Errorf("%w: %w", service.ErrUsage, err)
	}
	if err := svc.Start(ctx); err != nil {
		stopFiles()
		return nil, err
	}
	// Start provisioned LLMW_HOOKS; keep the chain in sync with it.
	js, err := jetstream.New(env.NC)
	var w *hooknats.Watcher
	if err == nil {
		w, err = hooknats.Watch(ctx, js, chain, hooknats.WatchOptions{
			Config: hooknats.Config{Source: svc.Source()}, Logger: env.Log.With("component", "hooks"),
		})
	}
	if err != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err = errors.Join(err, svc.Stop(sctx))
		stopFiles()
		return nil, err
	}
	s.Watcher = w
	return service.StopFunc(func(ctx context.Context) error {
		err := svc.Stop(ctx)
		stopFiles()
		// After the drain: draining turns keep their hooks.
		return errors.Join(err, w.Stop())
	}), nil
}

// reloader is a file that is read again when it changes (price.File,
// models.File).
type reloader interface {
	Path() string
	Reload() (changed bool, err error)
}

// follow reads a price table or models file again every PricesReload
// while it changes; a file that does not parse is logged and the table
// in force stays. what names the file in the log, under the key topic;
// count is the number of its entries. stop ends the following.
func (s *Service) follow(topic, what string, f reloader, count func() int, env service.Env) (stop func()) {
	every := s.PricesReload
	if every <= 0 {
		every = DefaultPricesReload
	}
	env.Log.Info(topic+": "+what+" loaded", "file", f.Path(), "models", count())
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		var lastErr string
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			changed, err := f.Reload()
			switch {
			case err != nil && err.Error() != lastErr: // once per fault, not per tick
				lastErr = err.Error()
				env.Log.Error(topic+": "+what+" not applied, the table in force stays", "file", f.Path(), "err", err)
			case err != nil:
			case changed:
				lastErr = ""
				env.Log.Info(topic+": "+what+" applied", "file", f.Path(), "models", count())
			}
		}
	}()
	return func() { close(done); <-exited }
}

// parseCompaction reads --compaction: a JSON object of
// events.CompactionConfig, no other field, in range.
func parseCompaction(s string) (events.CompactionConfig, error) {
	var c events.CompactionConfig
	if strings.TrimSpace(s) == "" {
		return c, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("not a compaction setting (a JSON object such as {\"threshold\":0.7}): %w", err)
	}
	if dec.More() {
		return c, errors.New("more than one JSON value")
	}
	return c, c.Validate("compaction")
}
