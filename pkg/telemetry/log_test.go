package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// A record logged under a traced context names the trace and the span;
// one without a span context has neither.
func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil))).With("service", "x")
	ctx := telemetry.Extract(context.Background(), &events.Envelope{TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
	log.InfoContext(ctx, "traced")
	log.Info("plain")
	dec := json.NewDecoder(&buf)
	var traced, plain map[string]any
	if err := dec.Decode(&traced); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&plain); err != nil {
		t.Fatal(err)
	}
	if traced["trace_id"] != "0af7651916cd43dd8448eb211c80319c" || traced["span_id"] != "b7ad6b7169203331" || traced["service"] != "x" {
		t.Errorf("traced record %v", traced)
	}
	if _, ok := plain["trace_id"]; ok {
		t.Errorf("plain record %v has a trace id", plain)
	}
}
