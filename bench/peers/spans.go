package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmworker/llmworker/pkg/telemetry"
)

// recordSpans installs a tracer provider that keeps every span llmworker
// makes (pkg/telemetry) in memory and returns the report of where the
// steps' time went (stepBreakdown). Recording spans costs time of its
// own: the report says where a step waits, the run's step time is not
// the one to compare.
func recordSpans() (report func(io.Writer)) {
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	return func(w io.Writer) { stepBreakdown(w, rec.Ended()) }
}

// The parts of a step with tool calls, in the order they happen.
var stepParts = []string{
	"step: model call starts → next model call starts",
	"model call (chat span: request to ingest, the model's stream read)",
	"  ingest's side of it (llm.complete span)",
	"model call ends → first tool call starts (events flushed, checkpoint written)",
	"tool calls: first starts → last ends",
	"  one call (execute_tool span: fence, publish, result back)",
	"  toolexec's side of it (toolexec span: the tool run)",
	"last tool call ends → next model call starts (results published, checkpoint, request built)",
}

// stepBreakdown prints, over the steps with tool calls of every turn,
// the median and p90 of each part of stepParts.
func stepBreakdown(w io.Writer, spans []sdktrace.ReadOnlySpan) {
	parts := breakdown(spans)
	fmt.Fprintf(w, "where a step with tool calls waits (%d steps; spans recorded, which slows them):\n", len(parts[0]))
	for i, name := range stepParts {
		fmt.Fprintf(w, "  %-95s p50 %7.3f ms  p90 %7.3f ms\n", name, ms(percentile(parts[i], 0.5)), ms(percentile(parts[i], 0.9)))
	}
}

// breakdown returns, for each part of stepParts, its durations over the
// steps with tool calls (per call for the calls' own spans).
// A turn's spans share its trace (the turn service starts it; ingest
// and toolexec continue it from the CloudEvents they receive); a step's
// calls are the execute_tool spans that start after its chat span ended
// and before the next one starts.
func breakdown(spans []sdktrace.ReadOnlySpan) [][]time.Duration {
	type turnSpans struct{ chat, tool, host, ingest []sdktrace.ReadOnlySpan }
	turns := map[trace.TraceID]*turnSpans{}
	for _, s := range spans {
		t := turns[s.SpanContext().TraceID()]
		if t == nil {
			t = &turnSpans{}
			turns[s.SpanContext().TraceID()] = t
		}
		// The names pkg/worker (telemetry.OpChat, OpExecuteTool),
		// pkg/toolexec (trace.go) and pkg/ingest (trace.go) give their spans.
		switch name := s.Name(); {
		case name == telemetry.OpChat || strings.HasPrefix(name, telemetry.OpChat+" "):
			t.chat = append(t.chat, s)
		case strings.HasPrefix(name, telemetry.OpExecuteTool+" "):
			t.tool = append(t.tool, s)
		case strings.HasPrefix(name, "toolexec "):
			t.host = append(t.host, s)
		case strings.HasPrefix(name, "llm.complete "):
			t.ingest = append(t.ingest, s)
		}
	}
	parts := make([][]time.Duration, len(stepParts))
	add := func(i int, d time.Duration) { parts[i] = append(parts[i], d) }
	byStart := func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) }
	within := func(ss []sdktrace.ReadOnlySpan, from, to time.Time) []sdktrace.ReadOnlySpan {
		var in []sdktrace.ReadOnlySpan
		for _, s := range ss {
			if !s.StartTime().Before(from) && s.StartTime().Before(to) {
				in = append(in, s)
			}
		}
		return in
	}
	for _, t := range turns {
		slices.SortFunc(t.chat, byStart)
		// A step runs from one model call to the next: the last call
		// (the final answer, or a turn cut short) starts none.
		for i := 0; i+1 < len(t.chat); i++ {
			c, next := t.chat[i], t.chat[i+1].StartTime()
			calls := within(t.tool, c.EndTime(), next)
			if len(calls) == 0 {
				continue
			}
			first, last := calls[0].StartTime(), calls[0].EndTime()
			for _, s := range calls {
				if s.StartTime().Before(first) {
					first = s.StartTime()
				}
				if s.EndTime().After(last) {
					last = s.EndTime()
				}
				add(5, s.EndTime().Sub(s.StartTime()))
			}
			for _, s := range within(t.host, first, next) {
				add(6, s.EndTime().Sub(s.StartTime()))
			}
			for _, s := range within(t.ingest, c.StartTime(), c.EndTime()) {
				add(2, s.EndTime().Sub(s.StartTime()))
			}
			add(0, next.Sub(c.StartTime()))
			add(1, c.EndTime().Sub(c.StartTime()))
			add(3, first.Sub(c.EndTime()))
			add(4, last.Sub(first))
			add(7, next.Sub(last))
		}
	}
	return parts
}
