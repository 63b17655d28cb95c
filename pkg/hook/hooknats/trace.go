package hooknats

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// startSpan starts the server span of one hook request.
func startSpan(ctx context.Context, reg events.HookRegistration, req *events.HookRequest) (context.Context, trace.Span) {
	if !telemetry.Tracing() {
		return ctx, telemetry.NoSpan
	}
	return telemetry.Tracer().Start(ctx, "hook "+string(reg.Event)+" "+reg.Name,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			telemetry.HookEvent.String(string(reg.Event)),
			telemetry.HookName.String(reg.Name),
			telemetry.TurnID.String(req.TurnID),
		))
}
