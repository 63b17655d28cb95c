package main

import (
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestBreakdown(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	turn := trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}}
	other := trace.SpanContextConfig{TraceID: trace.TraceID{2}, SpanID: trace.SpanID{2}}
	span := func(sc trace.SpanContextConfig, name string, from, to int) tracetest.SpanStub {
		return tracetest.SpanStub{Name: name, SpanContext: trace.NewSpanContext(sc), StartTime: at(from), EndTime: at(to)}
	}
	stubs := tracetest.SpanStubs{
		// Step 1: a model call from 0 to 1,000 µs (ingest's part 100 µs),
		// two calls from 1,800 to 2,900 and from 1,900 to 3,000 µs (their
		// runs 20 and 40 µs), the next model call at 3,100 µs.
		span(turn, "chat test:m", 0, 1000),
		span(turn, "llm.complete m", 200, 300),
		span(turn, "execute_tool echo", 1800, 2900),
		span(turn, "toolexec echo", 2400, 2420),
		span(turn, "execute_tool echo", 1900, 3000),
		span(turn, "toolexec echo", 2500, 2540),
		// Step 2, the final answer: no calls, not a step of the report.
		span(turn, "chat test:m", 3100, 3900),
		span(turn, "invoke_agent", 0, 4000),
		// Another turn's call in the same time is not this turn's.
		span(other, "execute_tool echo", 1500, 9000),
	}
	parts := breakdown(stubs.Snapshots())
	want := [][]time.Duration{
		{3100 * time.Microsecond},                          // step: 0 → 3,100
		{1000 * time.Microsecond},                          // model call
		{100 * time.Microsecond},                           // ingest
		{800 * time.Microsecond},                           // 1,000 → 1,800
		{1200 * time.Microsecond},                          // 1,800 → 3,000
		{1100 * time.Microsecond, 1100 * time.Microsecond}, // each call
		{20 * time.Microsecond, 40 * time.Microsecond},     // the runs
		{100 * time.Microsecond},                           // 3,000 → 3,100
	}
	if len(parts) != len(stepParts) {
		t.Fatalf("%d parts, want %d", len(parts), len(stepParts))
	}
	for i := range want {
		if !slices.Equal(parts[i], want[i]) {
			t.Errorf("%s: %v, want %v", stepParts[i], parts[i], want[i])
		}
	}
}
