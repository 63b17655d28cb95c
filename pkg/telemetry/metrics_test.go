package telemetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// A model call's prompt-cache tokens are counted in
// gen_ai.client.token.usage under their own token types.
func TestRecordChatCountsCacheTokens(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	t.Cleanup(func() {
		otel.SetMeterProvider(prev)
		_ = mp.Shutdown(context.Background())
	})
	n := func(v int64) *int64 { return &v }
	telemetry.RecordChat(context.Background(), telemetry.Chat{Provider: "anthropic", Model: "claude-x",
		Usage: events.UsageEvent{InputTokens: n(1200), OutputTokens: n(40), CacheReadInputTokens: n(1100), CacheCreationInputTokens: n(90)}})

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != telemetry.MetricTokenUsage {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[int64]).DataPoints {
				typ, _ := dp.Attributes.Value(telemetry.TokenType)
				got[typ.AsString()] += dp.Sum
			}
		}
	}
	want := map[string]int64{"input": 1200, "output": 40, "cache_read": 1100, "cache_creation": 90}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s tokens: %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}
