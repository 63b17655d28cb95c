package telemetry_test

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// A tool host in Go continues the turn's trace from the call it received.
func ExampleExtract() {
	call := &events.Envelope{Type: events.TypeToolCall, TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	ctx := telemetry.Extract(context.Background(), call)
	fmt.Println(trace.SpanContextFromContext(ctx).TraceID())

	// The result it publishes carries the same context.
	var result events.Envelope
	telemetry.Inject(ctx, &result)
	fmt.Println(result.TraceParent)
	// Output:
	// 0af7651916cd43dd8448eb211c80319c
	// 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01
}
