package turn

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/natsrt"
	"github.com/llmworker/llmworker/pkg/tool"
)

// Defaults of the zero values of Config.
const (
	DefaultMaxConcurrent = 4096
	DefaultAckWait       = 30 * time.Second
	DefaultStepRetries   = 2
	// DefaultStreamBuffer is the per-model-call buffer of stream messages
	// between the NATS dispatcher and the turn (see natsrt.IngestOptions);
	// it is a large part of a turn's memory, so it is smaller than natsrt's
	// default.
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
	// MaxDeliver bounds the deliveries of one request (0 = unlimited).
	MaxDeliver int

	// IngestTimeout bounds the wait for ingest's reply to a completion
	// request (0 = natsrt.DefaultRequestTimeout).
	IngestTimeout time.Duration
	// IdleTimeout fails a model call when no stream event (pings included)
	// arrives for that long (0 = natsrt.DefaultIdleTimeout, negative =
	// never).
	IdleTimeout time.Duration
	// StreamBuffer is the number of stream messages buffered per model
	// call (0 = DefaultStreamBuffer).
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

	// DefaultMaxSteps bounds the model calls of a request without
	// max_steps (0 = worker.DefaultMaxSteps).
	DefaultMaxSteps int
	// CheckpointToolResults also checkpoints after every tool result, so
	// that a resumed turn never runs an in-process tool (Tools) again;
	// remote tools do not need it (their results are in LLMW_TOOLRESULTS).
	CheckpointToolResults bool

	// Provider, when set, replaces ingest (tests, benchmarks, embedding a
	// provider in-process); nil sends model calls to ingest over NATS.
	Provider llm.Provider
	// Provision configures the streams and buckets Start creates if
	// missing; its Prefix is taken from Prefix.
	Provision natsrt.ProvisionOptions
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
	if c.MaxConcurrent < 0 || c.AckWait < 0 || c.MaxDeliver < 0 || c.DefaultMaxSteps < 0 || c.StreamBuffer < 0 {
		return fmt.Errorf("%w: negative bound", ErrInvalidConfig)
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
	c.Provision.Prefix = c.Prefix
	return nil
}

// DefaultRetryable reports whether a model call that failed with code is
// worth making again: transport failures between the services (a seq gap,
// an idle timeout, an undecodable event, no ingest), a broken or cut-off
// provider stream, and provider overload or server errors (5xx). Refusals,
// content filters, invalid requests, missing keys and unknown models are
// not: the same request would fail the same way.
func DefaultRetryable(code string) bool {
	switch strings.ToLower(code) {
	case natsrt.CodeStreamGap, natsrt.CodeIdleTimeout, natsrt.CodeInvalidEvent,
		llm.CodeStreamError, llm.CodeProviderFailed, codeNoIngest,
		"incomplete_stream", "overloaded", "overloaded_error", "api_error", "server_error",
		"internal_error", "internal", "unavailable", "service_unavailable", "timeout",
		"502", "503", "504", "529":
		return true
	}
	return false
}

// codeNoIngest is the code of a model call nobody answered (no ingest).
const codeNoIngest = "no_ingest"
