package telemetry

import (
	"context"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/llmworker/llmworker/internal/leaf/version"
	"github.com/llmworker/llmworker/pkg/events"
)

// Scope is the instrumentation scope of every llmworker span.
const Scope = "github.com/llmworker/llmworker"

// Tracer returns llmworker's tracer from the global provider at the time
// of the call, so that a provider installed later (Setup, a test) is used.
func Tracer() trace.Tracer {
	return otel.GetTracerProvider().Tracer(Scope, trace.WithInstrumentationVersion(scopeVersion()))
}

// scopeVersion is the instrumentation scope's version, read from the
// build once.
var scopeVersion = sync.OnceValue(version.String)

// The global providers as package otel hands them out before any is
// installed: delegates that make nothing until one is.
var (
	unsetTracerProvider = otel.GetTracerProvider()
	unsetMeterProvider  = otel.GetMeterProvider()
)

// Tracing reports whether a tracer provider is installed (Setup, or
// otel.SetTracerProvider by a library user or a test). Span sites skip
// everything when it is not (see NoSpan): tracing that is off costs a
// turn nothing measurable (docs/benchmarks.md, "Tracing and metrics").
func Tracing() bool { return otel.GetTracerProvider() != unsetTracerProvider }

// metering reports whether a meter provider is installed; the Record
// functions return at once when it is not.
func metering() bool { return otel.GetMeterProvider() != unsetMeterProvider }

// NoSpan is the span a site returns when Tracing is off: every method
// does nothing. The site returns its context as it came, so that a trace
// context it carries (a remote parent from a CloudEvent) still reaches
// the next hop through Inject.
var NoSpan trace.Span = noop.Span{}

// Attribute keys of the GenAI semantic conventions (development status;
// the names as of semantic conventions v1.38) and llmworker's own.
const (
	GenAIOperationName         = attribute.Key("gen_ai.operation.name")
	GenAIProviderName          = attribute.Key("gen_ai.provider.name")
	GenAIConversationID        = attribute.Key("gen_ai.conversation.id")
	GenAIAgentName             = attribute.Key("gen_ai.agent.name")
	GenAIRequestModel          = attribute.Key("gen_ai.request.model")
	GenAIRequestMaxTokens      = attribute.Key("gen_ai.request.max_tokens")
	GenAIRequestTemperature    = attribute.Key("gen_ai.request.temperature")
	GenAIResponseModel         = attribute.Key("gen_ai.response.model")
	GenAIResponseID            = attribute.Key("gen_ai.response.id")
	GenAIResponseFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	GenAIUsageInputTokens      = attribute.Key("gen_ai.usage.input_tokens")
	GenAIUsageOutputTokens     = attribute.Key("gen_ai.usage.output_tokens")
	GenAIUsageCacheRead        = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	GenAIUsageCacheCreation    = attribute.Key("gen_ai.usage.cache_creation.input_tokens")
	GenAIUsageReasoning        = attribute.Key("gen_ai.usage.reasoning.output_tokens")
	GenAIToolName              = attribute.Key("gen_ai.tool.name")
	GenAIToolCallID            = attribute.Key("gen_ai.tool.call.id")
	GenAIToolType              = attribute.Key("gen_ai.tool.type")
	ErrorType                  = attribute.Key("error.type")

	// TurnID is the llmworker turn id, on every span of a turn.
	TurnID = attribute.Key("llmw.turn.id")
	// Step is the model call number of a chat span.
	Step = attribute.Key("llmw.step")
	// TimeToFirstChunk is, on a chat span, the seconds from the call to
	// the first event of its stream (the conventions define it only as
	// the metric gen_ai.client.operation.time_to_first_chunk).
	TimeToFirstChunk = attribute.Key("llmw.time_to_first_chunk")
	// HookEvent, HookName and HookDecision describe a hook span.
	HookEvent    = attribute.Key("llmw.hook.event")
	HookName     = attribute.Key("llmw.hook.name")
	HookDecision = attribute.Key("llmw.hook.decision")
	// TurnStatus and TurnCode are how an invoke_agent span ended.
	TurnStatus = attribute.Key("llmw.turn.status")
	TurnCode   = attribute.Key("llmw.turn.code")
	// Instance is the replica that made a server-side span.
	Instance = attribute.Key("llmw.instance")
)

// Operation names (gen_ai.operation.name).
const (
	OpInvokeAgent = "invoke_agent"
	OpChat        = "chat"
	OpExecuteTool = "execute_tool"
)

// ProviderName maps an llmworker provider prefix (the part of a model
// string before ':') to gen_ai.provider.name's well-known values; other
// prefixes are returned as they are.
func ProviderName(prefix string) string {
	switch prefix {
	case "openai", "openai-responses":
		return "openai"
	case "anthropic":
		return "anthropic"
	case "gemini":
		return "gcp.gemini"
	}
	return prefix
}

// Fail records err on span as the conventions ask: status Error with the
// message and error.type = kind.
func Fail(span trace.Span, kind string, err error) {
	if kind == "" {
		kind = "_OTHER"
	}
	span.SetAttributes(ErrorType.String(kind))
	msg := kind
	if err != nil {
		span.RecordError(err)
		msg = err.Error()
	}
	span.SetStatus(codes.Error, msg)
}

var tc propagation.TraceContext

// envCarrier exposes an envelope's trace extensions to the propagator.
type envCarrier struct{ e *events.Envelope }

func (c envCarrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.e.TraceParent
	case "tracestate":
		return c.e.TraceState
	}
	return ""
}

func (c envCarrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.e.TraceParent = value
	case "tracestate":
		c.e.TraceState = value
	}
}

func (c envCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// Inject writes the span context of ctx into e's traceparent and
// tracestate; it leaves e alone when ctx carries none.
func Inject(ctx context.Context, e *events.Envelope) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	tc.Inject(ctx, envCarrier{e})
}

// Extract returns ctx with the remote span context of e's traceparent and
// tracestate as the parent of the spans started under it; ctx unchanged
// when e carries none or an invalid one.
func Extract(ctx context.Context, e *events.Envelope) context.Context {
	if e == nil || e.TraceParent == "" {
		return ctx
	}
	return tc.Extract(ctx, envCarrier{e})
}

// InjectHTTP writes the span context of ctx as traceparent and tracestate
// headers (an HTTP hook, a provider call).
func InjectHTTP(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	tc.Inject(ctx, propagation.HeaderCarrier(h))
}

// Parent returns the traceparent and tracestate of ctx's span context,
// "" when it has none: what a checkpoint keeps so that a turn continued
// elsewhere stays in its trace.
func Parent(ctx context.Context) (traceparent, tracestate string) {
	var e events.Envelope
	Inject(ctx, &e)
	return e.TraceParent, e.TraceState
}

// Remote returns ctx whose span context is the remote one of traceparent
// and tracestate (replacing ctx's own), the parent of spans started under
// it; ctx unchanged when traceparent is empty or invalid.
func Remote(ctx context.Context, traceparent, tracestate string) context.Context {
	return Extract(ctx, &events.Envelope{TraceParent: traceparent, TraceState: tracestate})
}
