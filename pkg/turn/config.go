package turn

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/models"
	"github.com/llmworker/llmworker/pkg/price"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/tool"
)

// Defaults of the zero values of Config.
const (
	DefaultMaxConcurrent = 4096
	DefaultAckWait       = 30 * time.Second
	DefaultStepRetries   = 2
	// DefaultFinishedTTL keeps an ended turn's state as long as its events.
	DefaultFinishedTTL = provision.DefaultEventsMaxAge
	// DefaultMaxDepth is how deep sub-agents nest by default
	// (Config.MaxDepth).
	DefaultMaxDepth = 4
	// DefaultMaxChildren is how many sub-agent calls a turn makes at most
	// by default (Config.MaxChildren).
	DefaultMaxChildren = 16
	// DefaultCancelTTL bounds how long a cancel waits for the submit it
	// overtook.
	DefaultCancelTTL = 10 * time.Minute
	// DefaultStreamBuffer is how many stream messages of a model call may
	// wait unread by the turn before more are dropped (a seq gap; see
	// ingest.ClientOptions.Buffer). The queue holds only what waits, so
	// the bound is what a turn may hold in a burst (up to 1,024 joined
	// deltas), not what each turn holds.
	DefaultStreamBuffer = 1024
	// ConsumerName is the durable pull consumer on LLMW_TURNS that every
	// replica shares.
	ConsumerName = "llmw-turn"
)

// Config configures a Service. The zero value works: prefix llmw, a random
// instance name, slog.Default(), no hooks, no in-process tools, at most
// DefaultMaxConcurrent turns at once, AckWait 30 s, two retries of a model
// call that failed for a transport reason.
type Config struct {
	// Prefix is the subject prefix P ("" = events.DefaultPrefix).
	Prefix string
	// Instance names this replica in the CloudEvents source
	// /llmw/turn/<instance> ("" = a random id).
	Instance string
	// Logger receives operational logs (nil = slog.Default()).
	Logger *slog.Logger

	// Hooks is the hook chain of every turn, shared with whoever keeps it
	// up to date (e.g. a watcher of LLMW_HOOKS); nil means no hooks.
	Hooks *hook.Chain
	// Tools are tools run in this process, offered next to the catalog's
	// (a name here shadows the catalog entry of the same name).
	Tools []tool.Tool
	// DefaultTools are the tool patterns of a request without "tools"
	// (nil: such a turn gets no tools; []string{"*"}: every tool).
	DefaultTools []string

	// MaxConcurrent bounds the turns this replica runs at once
	// (0 = DefaultMaxConcurrent).
	MaxConcurrent int
	// AckWait of the turn consumer (0 = DefaultAckWait): how long a turn
	// whose replica died stays invisible before another replica resumes it.
	// A running turn sends in-progress acks every AckWait/3.
	AckWait time.Duration
	// MaxDeliver bounds the deliveries of one request (0 = the default:
	// unlimited).
	MaxDeliver int
	// RetryTimeout bounds how long a turn's events and state writes are
	// retried while their stream cannot take them (no leader, no quorum)
	// before the turn is handed off, or its end left to the request's next
	// delivery (0 = DefaultRetryTimeout).
	RetryTimeout time.Duration

	// IngestTimeout bounds the wait for ingest's reply to a completion
	// request (0 = ingest.DefaultRequestTimeout).
	IngestTimeout time.Duration
	// IdleTimeout fails a model call when no stream event (pings included)
	// arrives for that long (0 = ingest.DefaultClientIdleTimeout, negative =
	// never).
	IdleTimeout time.Duration
	// StreamBuffer bounds the stream messages a model call may hold
	// unread (0 = DefaultStreamBuffer).
	StreamBuffer int
	// StepRetries is how often a model call that failed for a transport
	// reason (see Retryable) is made again within its step (0 =
	// DefaultStepRetries, negative = never).
	StepRetries int
	// RetryBackoff is the wait before the first retry of a model call; it
	// doubles per retry up to one second (0 = 50 ms).
	RetryBackoff time.Duration
	// Retryable decides whether a failed model call is retried from its
	// error code (the code of the stream's error event, or of ingest's
	// error reply). nil = DefaultRetryable.
	Retryable func(code string) bool

	// FallbackModels are the fallback models (provider:model) of a request
	// without fallback_models, the request's own model left out
	// (docs/protocol.md §5, "Fallbacks"); nil: none.
	FallbackModels []string

	// DefaultMaxSteps bounds the model calls of a request without
	// max_steps (0 = worker.DefaultMaxSteps).
	DefaultMaxSteps int
	// Prices prices the model calls of the turns (price.File follows a
	// file): the cost in llmw.usage and llmw.turn.completed, and what a
	// request's max_cost is held to. Each run of a turn takes the table in
	// force when it starts. A request with max_cost whose model has no
	// price fails with invalid_request. nil prices nothing.
	Prices price.Source
	// Models is the model table of the turns (models.File follows a
	// file): the context window and max output tokens of their models
	// (worker.Config.ModelLimits). Each run of a turn takes the table in
	// force when it starts. nil is the shipped table (models.Default).
	Models models.Source
	// Compaction is the compaction setting of every turn (pkg/compact);
	// a session's stored setting and a request's "compaction" override
	// its fields (events.CompactionConfig.Merge). The zero value
	// compacts with pkg/compact's defaults.
	Compaction events.CompactionConfig
	// CheckpointToolResults also checkpoints after every tool result, so
	// that a resumed turn never runs an in-process tool (Tools) again;
	// remote tools do not need it (their results are in LLMW_TOOLRESULTS).
	CheckpointToolResults bool
	// NoEagerStart makes every tool call of the turns wait for the end of
	// the model's response (worker.Config.NoEagerStart). Otherwise a call
	// of a tool that may start early (the catalog's eager, a Go tool's
	// tool.EagerOf) is published to toolexec, or run, as soon as its
	// block of the stream stopped.
	NoEagerStart bool

	// FinishedTTL is how long the state of an ended turn is kept in
	// LLMW_TURN_STATE: until then a submit of its id is answered with
	// turn_exists (0 = DefaultFinishedTTL, the age limit of LLMW_EVENTS;
	// negative = kept until deleted).
	FinishedTTL time.Duration
	// CancelTTL is how long a cancel of a turn id that has no turn yet is
	// remembered: a submit of the id within it (the cancel overtook its
	// submit) ends at once with llmw.turn.aborted (0 = DefaultCancelTTL;
	// negative = the cancel is not remembered).
	CancelTTL time.Duration
	// Ephemeral says the NATS store does not outlive this replica (an
	// embedded server with a temporary store, as `llmworker up
	// --temp-store` runs): no other replica could continue a turn, so Stop
	// does not hand running turns off. It waits for them up to its
	// deadline, then cancels them, and ends paused turns, each with
	// llmw.turn.aborted, so that every client gets a terminal event.
	Ephemeral bool
	// MaxDepth bounds how deep sub-agents nest: a call that would start a
	// child turn deeper than it (a root turn is at depth 0) gets an error
	// result instead (0 = DefaultMaxDepth; negative: no sub-agent runs).
	MaxDepth int
	// MaxChildren bounds the sub-agent calls one turn makes: a call past
	// it gets an error result instead of a child turn (0 =
	// DefaultMaxChildren).
	MaxChildren int
	// RemoteAgents opens the remote A2A agents (a definition's
	// a2a_url) whose turns this replica runs: a sub-agent call's child,
	// or a turn that names such an agent (remote.go). cmd/turn and
	// `llmworker up` give pkg/a2a/remote.Agents. nil: this replica has no
	// A2A client, and such a turn fails with no_a2a_client
	// (ErrNoA2AClient).
	RemoteAgents RemoteAgents

	// Provider, when set, replaces ingest (tests, benchmarks, embedding a
	// provider in-process); nil sends model calls to ingest over NATS.
	Provider llm.Provider
	// Provision configures the streams and buckets Start creates if
	// missing; its Prefix is taken from Prefix.
	Provision provision.Options
}

func (c *Config) withDefaults() error {
	if c.Prefix != "" {
		for tok := range strings.SplitSeq(c.Prefix, ".") {
			if !events.ValidToken(tok) {
				return fmt.Errorf("%w: prefix %q is not a NATS subject prefix", ErrInvalidConfig, c.Prefix)
			}
		}
	}
	if strings.ContainsAny(c.Instance, " \t\r\n/.*>") {
		return fmt.Errorf("%w: instance %q must not contain spaces, '/', '.', '*' or '>'", ErrInvalidConfig, c.Instance)
	}
	if c.MaxConcurrent < 0 || c.AckWait < 0 || c.MaxDeliver < 0 || c.DefaultMaxSteps < 0 || c.StreamBuffer < 0 || c.RetryTimeout < 0 {
		return fmt.Errorf("%w: negative bound", ErrInvalidConfig)
	}
	if err := events.ValidateFallbackModels("FallbackModels", "", c.FallbackModels); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := c.Compaction.Validate("Compaction"); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	seen := map[string]bool{}
	for _, t := range c.Tools {
		if t == nil || !events.ValidToolName(t.Name()) {
			return fmt.Errorf("%w: in-process tool without a valid name", ErrInvalidConfig)
		}
		if seen[t.Name()] {
			return fmt.Errorf("%w: two in-process tools named %q", ErrInvalidConfig, t.Name())
		}
		seen[t.Name()] = true
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.StreamBuffer == 0 {
		c.StreamBuffer = DefaultStreamBuffer
	}
	switch {
	case c.StepRetries == 0:
		c.StepRetries = DefaultStepRetries
	case c.StepRetries < 0:
		c.StepRetries = 0
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 50 * time.Millisecond
	}
	if c.Retryable == nil {
		c.Retryable = DefaultRetryable
	}
	if c.MaxDepth == 0 {
		c.MaxDepth = DefaultMaxDepth
	}
	if c.MaxChildren <= 0 {
		c.MaxChildren = DefaultMaxChildren
	}
	c.FinishedTTL = ttl(c.FinishedTTL, DefaultFinishedTTL)
	c.CancelTTL = ttl(c.CancelTTL, DefaultCancelTTL)
	c.Provision.Prefix = c.Prefix
	return nil
}

// DefaultRetryable reports whether a model call that failed with code is
// worth making again: transport failures between the services (a seq gap,
// an idle timeout, an undecodable event, no ingest), a broken or cut-off
// provider stream, and provider overload or server errors (5xx). Refusals,
// content filters, invalid requests, missing keys and unknown models are
// not: the same request would fail the same way. A rate limit is not
// either: it reaches the turn after the adapter's SDK waited out the
// provider's Retry-After, and the step's backoff is far shorter than a
// rate limit's window; Service.fallback moves it to the next model at
// once (docs/protocol.md §5, Fallbacks).
func DefaultRetryable(code string) bool {
	return slices.Contains(retryableCodes, strings.ToLower(code))
}

// retryableCodes are the codes DefaultRetryable retries, lower case.
var retryableCodes = []string{
	ingest.CodeStreamGap, ingest.CodeIdleTimeout, ingest.CodeInvalidEvent,
	llm.CodeStreamError, llm.CodeProviderFailed, codeNoIngest,
	"incomplete_stream", "overloaded", "overloaded_error", "api_error", "server_error",
	"internal_error", "internal", "unavailable", "service_unavailable", "timeout",
	"502", "503", "504", "529",
}

// codeNoIngest is the code of a model call nobody answered (no ingest).
const codeNoIngest = "no_ingest"

// ttl resolves a TTL setting: 0 is def, negative is none (0), and a
// positive value is at least the one second JetStream's message TTLs
// count in.
func ttl(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return max(d, time.Second)
}
