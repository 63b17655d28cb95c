package ingest

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// startSpan starts the server span of one completion, a child of the
// requester's chat span (its traceparent travels in the request's
// CloudEvent), around the provider call.
func (s *Service) startSpan(ctx context.Context, st *stream, r *request) (context.Context, trace.Span) {
	if !telemetry.Tracing() {
		return telemetry.Extract(ctx, r.env), telemetry.NoSpan
	}
	return telemetry.Tracer().Start(telemetry.Extract(ctx, r.env), "llm.complete "+st.model,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			telemetry.GenAIProviderName.String(telemetry.ProviderName(st.provider)),
			telemetry.GenAIRequestModel.String(st.model),
			telemetry.Instance.String(s.cfg.Instance),
			attributeRequestID.String(st.id),
		))
}

// endSpan records how the stream ended.
func endSpan(span trace.Span, outcome, code, msg string, errs ...error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attributeOutcome.String(outcome))
	if err := errors.Join(errs...); err != nil {
		telemetry.Fail(span, "publish", err)
		return
	}
	if outcome == string(events.StatusFailed) {
		if code == "" {
			code = "provider_failed"
		}
		telemetry.Fail(span, code, errors.New(msg))
	}
}

const (
	attributeRequestID = attribute.Key("llmw.request.id")
	attributeOutcome   = attribute.Key("llmw.stream.outcome")
)
