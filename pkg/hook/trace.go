package hook

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// startSpan starts the span of one hook call, "hook {event} {hook}" (the
// GenAI conventions have none for hooks). A remote hook's request carries
// it, so the hook server's span is its child.
func startSpan(ctx context.Context, ev events.HookEvent, name string, turn *Turn, callID string) (context.Context, trace.Span) {
	if !telemetry.Tracing() {
		return ctx, telemetry.NoSpan
	}
	attrs := []attribute.KeyValue{telemetry.HookEvent.String(string(ev)), telemetry.HookName.String(name)}
	if turn != nil && turn.ID != "" {
		attrs = append(attrs, telemetry.TurnID.String(turn.ID))
	}
	if callID != "" {
		attrs = append(attrs, telemetry.GenAIToolCallID.String(callID))
	}
	return telemetry.Tracer().Start(ctx, "hook "+string(ev)+" "+name,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endSpan records the hook's decision, or its failure, on the span and
// in the metrics, and ends the span.
func endSpan(ctx context.Context, span trace.Span, ev events.HookEvent, name string, start time.Time, kind events.HookResultKind, err error) {
	defer span.End()
	typ := ""
	if err != nil {
		typ = "hook_failed"
		switch {
		case errors.Is(err, ErrTimeout):
			typ = "timeout"
		case errors.Is(err, ErrPanic):
			typ = "panic"
		case errors.Is(err, ErrInvalidResult):
			typ = "invalid_result"
		}
	}
	telemetry.RecordHook(ctx, string(ev), name, string(kind), typ, time.Since(start))
	if !span.IsRecording() {
		return
	}
	if err != nil {
		telemetry.Fail(span, typ, err)
		return
	}
	span.SetAttributes(telemetry.HookDecision.String(string(kind)))
}
