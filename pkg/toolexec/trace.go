package toolexec

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// startSpan starts the consumer span of one call under the server's call
// context, parented by the trace context the call's CloudEvent carries.
func (s *Server) startSpan(env *events.Envelope, h *hosted, req events.ToolCallRequest) (context.Context, trace.Span) {
	if !telemetry.Tracing() {
		return telemetry.Extract(s.callCtx, env), telemetry.NoSpan
	}
	return telemetry.Tracer().Start(telemetry.Extract(s.callCtx, env), "toolexec "+h.entry.Name,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			telemetry.GenAIToolName.String(h.entry.Name),
			telemetry.GenAIToolCallID.String(req.CallID),
			telemetry.TurnID.String(req.TurnID),
			telemetry.Instance.String(s.cfg.Instance),
		))
}

// endSpan records an error result (error.type tool_error) or a call that
// Stop interrupted (stopped), and ends the span.
func endSpan(span trace.Span, res events.ToolCallResult, stopped bool) {
	defer span.End()
	switch {
	case stopped:
		telemetry.Fail(span, "stopped", nil)
	case res.IsError:
		telemetry.Fail(span, "tool_error", nil)
	}
}

// registerGauge reports, at each collection, the calls waiting in the
// queue of each hosted tool (llmw.tool.queue.pending: the consumer's
// pending count, the number KEDA scales on). Every replica reports the
// same shared number; dashboards take the max per tool.
func (s *Server) registerGauge() metric.Registration {
	m := telemetry.Meter()
	g, err := m.Int64ObservableGauge(telemetry.MetricQueuePending, metric.WithUnit("{call}"),
		metric.WithDescription("Tool calls waiting in the work queue of a tool"))
	if err != nil {
		return nil
	}
	reg, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for _, h := range s.hostedNow() {
			ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
			info, err := h.cons.Info(ictx)
			cancel()
			if err != nil {
				continue // no number is better than a wrong one
			}
			o.ObserveInt64(g, int64(info.NumPending), metric.WithAttributes(telemetry.GenAIToolName.String(h.entry.Name)))
		}
		return nil
	}, g)
	if err != nil {
		return nil
	}
	return reg
}
