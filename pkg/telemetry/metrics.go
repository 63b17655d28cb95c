package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/llmworker/llmworker/pkg/events"
)

// Meter returns llmworker's meter from the global provider at the time of
// the call.
func Meter() metric.Meter {
	return otel.GetMeterProvider().Meter(Scope, metric.WithInstrumentationVersion(scopeVersion()))
}

// Metric names. The gen_ai.client.* ones follow the GenAI semantic
// conventions; the llmw.* ones are llmworker's.
const (
	MetricTokenUsage   = "gen_ai.client.token.usage"
	MetricDuration     = "gen_ai.client.operation.duration"
	MetricFirstChunk   = "gen_ai.client.operation.time_to_first_chunk"
	MetricToolDuration = "llmw.tool.duration"
	MetricHookDuration = "llmw.hook.duration"
	MetricTurns        = "llmw.turns"
	MetricTurnsStarted = "llmw.turns.started"
	MetricRedeliveries = "llmw.redeliveries"
	MetricQueuePending = "llmw.tool.queue.pending"
	MetricQueueWait    = "llmw.tool.queue.wait"
	// MetricLLMQueueWait is the time a model call waited in ingest for the
	// provider limits the replicas share (pkg/quota); calls no limit
	// covers record 0.
	MetricLLMQueueWait = "llmw.llm.queue.wait"
)

// TokenType is gen_ai.token.type: input or output, and llmworker's
// cache_read and cache_creation for the input tokens a provider read from
// or wrote to its prompt cache (a part of input, not added to it).
const TokenType = attribute.Key("gen_ai.token.type")

// Bucket boundaries the conventions recommend.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

type instruments struct {
	provider     metric.MeterProvider
	tokens       metric.Int64Histogram
	duration     metric.Float64Histogram
	firstChunk   metric.Float64Histogram
	tool         metric.Float64Histogram
	hook         metric.Float64Histogram
	turns        metric.Int64Counter
	started      metric.Int64Counter
	redeliveries metric.Int64Counter
	queueWait    metric.Float64Histogram
	llmQueueWait metric.Float64Histogram
}

var (
	instMu sync.Mutex
	inst   *instruments
)

// get returns the instruments of the current global meter provider,
// making them on first use and again after the provider changed (the
// global provider delegates only to the first one installed).
func get() *instruments {
	mp := otel.GetMeterProvider()
	instMu.Lock()
	defer instMu.Unlock()
	if inst != nil && inst.provider == mp {
		return inst
	}
	m := mp.Meter(Scope, metric.WithInstrumentationVersion(scopeVersion()))
	i := &instruments{provider: mp}
	i.tokens, _ = m.Int64Histogram(MetricTokenUsage, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens used per model call, by type"), metric.WithExplicitBucketBoundaries(tokenBuckets...))
	i.duration, _ = m.Float64Histogram(MetricDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of a model call"), metric.WithExplicitBucketBoundaries(durationBuckets...))
	i.firstChunk, _ = m.Float64Histogram(MetricFirstChunk, metric.WithUnit("s"),
		metric.WithDescription("Time from a model call to its first chunk"), metric.WithExplicitBucketBoundaries(durationBuckets...))
	i.tool, _ = m.Float64Histogram(MetricToolDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of a tool call"), metric.WithExplicitBucketBoundaries(durationBuckets...))
	i.hook, _ = m.Float64Histogram(MetricHookDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of a hook call, by decision or error"), metric.WithExplicitBucketBoundaries(durationBuckets...))
	i.started, _ = m.Int64Counter(MetricTurnsStarted, metric.WithUnit("{run}"),
		metric.WithDescription("Runs of turns started: a turn's first (llmw.run=first) and each continuation from its checkpoint (continued: a resume, a takeover)"))
	i.turns, _ = m.Int64Counter(MetricTurns, metric.WithUnit("{run}"),
		metric.WithDescription("Runs of turns that ended, by status (completed, paused, failed, aborted, cancelled, ...) and code"))
	i.redeliveries, _ = m.Int64Counter(MetricRedeliveries, metric.WithUnit("{message}"),
		metric.WithDescription("Turn requests and tool calls delivered again (a replica died or gave them back)"))
	i.queueWait, _ = m.Float64Histogram(MetricQueueWait, metric.WithUnit("s"),
		metric.WithDescription("Time a tool call waited in its tool's queue until a replica took it"), metric.WithExplicitBucketBoundaries(durationBuckets...))
	i.llmQueueWait, _ = m.Float64Histogram(MetricLLMQueueWait, metric.WithUnit("s"),
		metric.WithDescription("Time a model call waited in ingest for the provider limits the replicas share"), metric.WithExplicitBucketBoundaries(durationBuckets...))
	inst = i
	return i
}

// RecordLLMQueueWait records how long a model call to provider's model
// waited for its limits.
func RecordLLMQueueWait(ctx context.Context, provider, model string, d time.Duration) {
	if !metering() {
		return
	}
	get().llmQueueWait.Record(ctx, d.Seconds(), metric.WithAttributes(
		GenAIProviderName.String(ProviderName(provider)), GenAIRequestModel.String(model)))
}

// Chat is one model call for RecordChat.
type Chat struct {
	// Provider is the model string's prefix, Model the rest.
	Provider, Model string
	Usage           events.UsageEvent
	Duration        time.Duration
	// FirstChunk is the time to the first event of the stream (0: none).
	FirstChunk time.Duration
	// ErrorType is error.type for a failed call ("" when it succeeded).
	ErrorType string
}

// RecordChat records a model call: token usage, duration and time to
// first chunk.
func RecordChat(ctx context.Context, c Chat) {
	if !metering() {
		return
	}
	i := get()
	base := []attribute.KeyValue{GenAIOperationName.String(OpChat), GenAIProviderName.String(ProviderName(c.Provider)), GenAIRequestModel.String(c.Model)}
	withErr := base
	if c.ErrorType != "" {
		withErr = append(append([]attribute.KeyValue(nil), base...), ErrorType.String(c.ErrorType))
	}
	i.duration.Record(ctx, c.Duration.Seconds(), metric.WithAttributes(withErr...))
	if c.FirstChunk > 0 {
		i.firstChunk.Record(ctx, c.FirstChunk.Seconds(), metric.WithAttributes(base...))
	}
	if c.Usage.InputTokens != nil {
		i.tokens.Record(ctx, *c.Usage.InputTokens, metric.WithAttributes(append(base, TokenType.String("input"))...))
	}
	if c.Usage.OutputTokens != nil {
		i.tokens.Record(ctx, *c.Usage.OutputTokens, metric.WithAttributes(append(base, TokenType.String("output"))...))
	}
	if c.Usage.CacheReadInputTokens != nil {
		i.tokens.Record(ctx, *c.Usage.CacheReadInputTokens, metric.WithAttributes(append(base, TokenType.String("cache_read"))...))
	}
	if c.Usage.CacheCreationInputTokens != nil {
		i.tokens.Record(ctx, *c.Usage.CacheCreationInputTokens, metric.WithAttributes(append(base, TokenType.String("cache_creation"))...))
	}
}

// RecordTool records a tool call's duration; errorType is "" when it
// succeeded.
func RecordTool(ctx context.Context, tool string, d time.Duration, errorType string) {
	if !metering() {
		return
	}
	attrs := []attribute.KeyValue{GenAIToolName.String(tool)}
	if errorType != "" {
		attrs = append(attrs, ErrorType.String(errorType))
	}
	get().tool.Record(ctx, d.Seconds(), metric.WithAttributes(attrs...))
}

// RecordHook records a hook call: its decision, or errorType when it
// failed.
func RecordHook(ctx context.Context, event, hook, decision, errorType string, d time.Duration) {
	if !metering() {
		return
	}
	attrs := []attribute.KeyValue{HookEvent.String(event), HookName.String(hook)}
	if errorType != "" {
		attrs = append(attrs, ErrorType.String(errorType))
	} else {
		attrs = append(attrs, HookDecision.String(decision))
	}
	get().hook.Record(ctx, d.Seconds(), metric.WithAttributes(attrs...))
}

// RecordTurnStarted counts a run of a turn that starts: its first, or
// one continued from its checkpoint.
func RecordTurnStarted(ctx context.Context, continued bool) {
	if !metering() {
		return
	}
	run := "first"
	if continued {
		run = "continued"
	}
	get().started.Add(ctx, 1, metric.WithAttributes(attribute.String("llmw.run", run)))
}

// RecordTurn counts a run of a turn that ended with status and code.
func RecordTurn(ctx context.Context, status, code string) {
	if !metering() {
		return
	}
	attrs := []attribute.KeyValue{TurnStatus.String(status)}
	if code != "" {
		attrs = append(attrs, TurnCode.String(code))
	}
	get().turns.Add(ctx, 1, metric.WithAttributes(attrs...))
}

// RecordRedelivery counts a message delivered again: kind "turn" (a turn
// request) or "tool_call" (tool names the tool).
func RecordRedelivery(ctx context.Context, kind, tool string) {
	if !metering() {
		return
	}
	attrs := []attribute.KeyValue{attribute.String("llmw.message", kind)}
	if tool != "" {
		attrs = append(attrs, GenAIToolName.String(tool))
	}
	get().redeliveries.Add(ctx, 1, metric.WithAttributes(attrs...))
}

// RecordQueueWait records how long a tool call waited in its tool's work
// queue, from its store in the stream to its first delivery (the queue
// lag per tool; the server's clock against the replica's).
func RecordQueueWait(ctx context.Context, tool string, d time.Duration) {
	if !metering() {
		return
	}
	get().queueWait.Record(ctx, max(d, 0).Seconds(), metric.WithAttributes(GenAIToolName.String(tool)))
}
