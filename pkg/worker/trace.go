package worker

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// traced runs body under the run's invoke_agent span (pkg/telemetry).
//
// The span's parent is the trace context the checkpoint keeps, so that a
// turn continued by RunFrom or Resume — on this replica or another, after
// a crash or a pause — stays in its trace; the caller's own span context
// (a resume request's) is then a link. A turn's first run takes the
// caller's span context as parent (none: a new trace) and stores it, or
// its own span's when the caller brought none, in the checkpoint.
func (r *run) traced(ctx context.Context, body func(context.Context) *Result) *Result {
	telemetry.RecordTurnStarted(ctx, r.st.Restarts > 0)
	if !telemetry.Tracing() {
		// The caller's trace context still reaches the checkpoint and, from
		// it, a run continued where tracing is on.
		if r.st.TraceParent == "" {
			r.st.TraceParent, r.st.TraceState = telemetry.Parent(ctx)
		} else {
			ctx = telemetry.Remote(ctx, r.st.TraceParent, r.st.TraceState)
		}
		res := body(ctx)
		telemetry.RecordTurn(ctx, string(res.Status), res.Code)
		return res
	}
	provider, model := splitModel(r.cfg.Model)
	attrs := []attribute.KeyValue{
		telemetry.GenAIOperationName.String(telemetry.OpInvokeAgent),
		telemetry.TurnID.String(r.st.TurnID),
	}
	if r.st.SessionID != "" {
		attrs = append(attrs, telemetry.GenAIConversationID.String(r.st.SessionID))
	}
	if provider != "" {
		attrs = append(attrs, telemetry.GenAIProviderName.String(telemetry.ProviderName(provider)))
	}
	if model != "" {
		attrs = append(attrs, telemetry.GenAIRequestModel.String(model))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...)}
	parent := ctx
	if r.st.TraceParent != "" {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
		parent = telemetry.Remote(ctx, r.st.TraceParent, r.st.TraceState)
	}
	ctx, span := telemetry.Tracer().Start(parent, telemetry.OpInvokeAgent, opts...)
	defer span.End()
	if r.st.TraceParent == "" {
		tp, ts := telemetry.Parent(parent)
		if tp == "" {
			tp, ts = telemetry.Parent(ctx)
		}
		r.st.TraceParent, r.st.TraceState = tp, ts
	}
	res := body(ctx)
	telemetry.RecordTurn(ctx, string(res.Status), res.Code)
	if span.IsRecording() {
		span.SetAttributes(telemetry.TurnStatus.String(string(res.Status)))
		if res.Code != "" {
			span.SetAttributes(telemetry.TurnCode.String(res.Code))
		}
		span.SetAttributes(usageAttrs(res.Usage)...)
		if res.Status == StatusFailed || res.Status == StatusAborted {
			telemetry.Fail(span, res.Code, errors.New(res.Reason))
		}
	}
	return res
}

// startChat starts the chat span of one model call.
func (r *run) startChat(ctx context.Context, step, attempt int) (context.Context, trace.Span) {
	if !telemetry.Tracing() {
		return ctx, telemetry.NoSpan
	}
	provider, model := splitModel(r.model)
	attrs := []attribute.KeyValue{
		telemetry.GenAIOperationName.String(telemetry.OpChat),
		telemetry.TurnID.String(r.st.TurnID),
		telemetry.Step.Int(step),
	}
	if provider != "" {
		attrs = append(attrs, telemetry.GenAIProviderName.String(telemetry.ProviderName(provider)))
	}
	if model != "" {
		attrs = append(attrs, telemetry.GenAIRequestModel.String(model))
	}
	if r.st.SessionID != "" {
		attrs = append(attrs, telemetry.GenAIConversationID.String(r.st.SessionID))
	}
	if r.cfg.MaxTokens > 0 {
		attrs = append(attrs, telemetry.GenAIRequestMaxTokens.Int(r.cfg.MaxTokens))
	}
	if r.cfg.Temperature != nil {
		attrs = append(attrs, telemetry.GenAIRequestTemperature.Float64(*r.cfg.Temperature))
	}
	if attempt > 1 {
		attrs = append(attrs, attribute.Int("llmw.attempt", attempt))
	}
	name := telemetry.OpChat
	if model != "" {
		name += " " + model
	}
	return telemetry.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endChat records how a model call went on its span and in the metrics,
// and ends the span.
func (r *run) endChat(ctx context.Context, span trace.Span, start time.Time, usage events.UsageEvent, f *streamFailure) {
	defer span.End()
	provider, model := splitModel(r.model)
	c := telemetry.Chat{Provider: provider, Model: model, Usage: usage, Duration: time.Since(start)}
	if !r.firstChunk.IsZero() {
		c.FirstChunk = r.firstChunk.Sub(start)
	}
	if f != nil {
		c.ErrorType = f.turnCode()
	}
	telemetry.RecordChat(ctx, c)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(usageAttrs(usage)...)
	if c.FirstChunk > 0 {
		span.SetAttributes(telemetry.TimeToFirstChunk.Float64(c.FirstChunk.Seconds()))
	}
	if r.completed.Model != "" {
		span.SetAttributes(telemetry.GenAIResponseModel.String(r.completed.Model))
	}
	if r.completed.ResponseID != "" {
		span.SetAttributes(telemetry.GenAIResponseID.String(r.completed.ResponseID))
	}
	if r.stopReason != "" {
		span.SetAttributes(telemetry.GenAIResponseFinishReasons.StringSlice([]string{string(r.stopReason)}))
	}
	if telemetry.CaptureContent() && f == nil {
		msg, _ := assembleFrom("", r.texts.Blocks(), r.thinks.Collected(), r.calls.Collected())
		span.SetAttributes(telemetry.GenAIOutputMessages.String(telemetry.OutputMessages(msg, string(r.stopReason))))
	}
	if f != nil {
		telemetry.Fail(span, f.turnCode(), errors.New(f.reason))
	}
}

func usageAttrs(u events.UsageEvent) []attribute.KeyValue {
	var out []attribute.KeyValue
	add := func(k attribute.Key, v *int64) {
		if v != nil {
			out = append(out, k.Int64(*v))
		}
	}
	add(telemetry.GenAIUsageInputTokens, u.InputTokens)
	add(telemetry.GenAIUsageOutputTokens, u.OutputTokens)
	add(telemetry.GenAIUsageCacheRead, u.CacheReadInputTokens)
	add(telemetry.GenAIUsageCacheCreation, u.CacheCreationInputTokens)
	add(telemetry.GenAIUsageReasoning, u.ReasoningTokens)
	return out
}

// startTool starts the execute_tool span of one call.
func startTool(ctx context.Context, turnID string, call events.ToolCall) (context.Context, trace.Span) {
	if !telemetry.Tracing() {
		return ctx, telemetry.NoSpan
	}
	return telemetry.Tracer().Start(ctx, telemetry.OpExecuteTool+" "+call.Name,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			telemetry.GenAIOperationName.String(telemetry.OpExecuteTool),
			telemetry.GenAIToolName.String(call.Name),
			telemetry.GenAIToolCallID.String(call.ID),
			telemetry.GenAIToolType.String("function"),
			telemetry.TurnID.String(turnID),
		))
}

// splitModel splits "provider:model"; a model without a provider prefix
// is returned as the model.
func splitModel(m string) (provider, model string) {
	if p, rest, ok := strings.Cut(m, ":"); ok {
		return p, rest
	}
	return "", m
}
