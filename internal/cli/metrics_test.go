package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel"

	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// /metrics on the health port parses as Prometheus text, and after one
// turn (three model calls, two tool calls, an approval hook, a pause and
// a resume) its counters say what the turn's events say.
func TestMetrics(t *testing.T) {
	prev := otel.GetMeterProvider()
	m, err := telemetry.SetupMetrics(context.Background(), telemetry.Config{Service: "llmworker", Getenv: envOf()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		otel.SetMeterProvider(prev)
		_ = m.Shutdown(context.Background())
	})
	st := startShared(t, 0)
	var cur atomic.Pointer[Stack]
	cur.Store(st)
	srv := httptest.NewServer(healthHandler(&cur, m.Handler))
	defer srv.Close()

	_, done := approvedTurn(t, st, context.Background(), context.Background())
	if done.Usage.InputTokens == nil || done.Usage.OutputTokens == nil {
		t.Fatalf("the scenario reports no usage: %+v", done.Usage)
	}

	var fams map[string]*dto.MetricFamily
	scrape := func() {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		if fams, err = p.TextToMetricFamilies(resp.Body); err != nil {
			t.Fatalf("/metrics is not Prometheus text: %v", err)
		}
	}
	// The resumed run's counters are added right after its last event.
	natstest.Eventually(t, `llmw_turns_total{llmw_turn_status="completed"} counting the turn`, func() bool {
		scrape()
		return sumCounter(fams["llmw_turns_total"], map[string]string{"llmw_turn_status": "completed"}) >= 1
	})

	tokens := fams["gen_ai_client_token_usage"]
	for typ, want := range map[string]int64{"input": *done.Usage.InputTokens, "output": *done.Usage.OutputTokens} {
		sum, count := histogram(tokens, map[string]string{"gen_ai_token_type": typ, "gen_ai_operation_name": "chat", "gen_ai_request_model": "gemini"})
		if int64(sum) != want || count != 3 {
			t.Errorf("%s tokens: sum %v over %d calls, want %d over the 3 model calls", typ, sum, count, want)
		}
	}
	if _, n := histogram(fams["gen_ai_client_operation_duration_seconds"], map[string]string{"gen_ai_operation_name": "chat"}); n != 3 {
		t.Errorf("operation duration counted %d model calls, want 3", n)
	}
	if _, n := histogram(fams["gen_ai_client_operation_time_to_first_chunk_seconds"], nil); n != 3 {
		t.Errorf("time to first chunk counted %d model calls, want 3", n)
	}
	for _, tool := range []string{"get_capital", "get_temperature"} {
		if _, n := histogram(fams["llmw_tool_duration_seconds"], map[string]string{"gen_ai_tool_name": tool}); n != 1 {
			t.Errorf("tool duration of %s counted %d calls, want 1", tool, n)
		}
		if _, n := histogram(fams["llmw_tool_queue_wait_seconds"], map[string]string{"gen_ai_tool_name": tool}); n != 1 {
			t.Errorf("queue wait of %s counted %d calls, want 1", tool, n)
		}
	}
	if _, n := histogram(fams["llmw_hook_duration_seconds"], map[string]string{"llmw_hook_name": "approve-capital", "llmw_hook_decision": "pause"}); n != 1 {
		t.Errorf("hook duration counted %d pauses of approve-capital, want 1", n)
	}
	for status, want := range map[string]float64{"paused": 1, "completed": 1} {
		if got := sumCounter(fams["llmw_turns_total"], map[string]string{"llmw_turn_status": status}); got != want {
			t.Errorf("llmw_turns_total{llmw_turn_status=%q} = %v, want %v", status, got, want)
		}
	}
	for run, want := range map[string]float64{"first": 1, "continued": 1} {
		if got := sumCounter(fams["llmw_turns_started_total"], map[string]string{"llmw_run": run}); got != want {
			t.Errorf("llmw_turns_started_total{llmw_run=%q} = %v, want %v (the turn, then its resume)", run, got, want)
		}
	}
	if g := fams["llmw_tool_queue_pending"]; g == nil || len(match(g, map[string]string{"gen_ai_tool_name": "get_capital"})) != 1 {
		t.Errorf("no queue gauge for get_capital: %v", g)
	}
}

// match returns the series of f whose labels include want.
func match(f *dto.MetricFamily, want map[string]string) []*dto.Metric {
	if f == nil {
		return nil
	}
	var out []*dto.Metric
	for _, m := range f.GetMetric() {
		ok := true
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

func histogram(f *dto.MetricFamily, want map[string]string) (sum float64, count uint64) {
	for _, m := range match(f, want) {
		sum += m.GetHistogram().GetSampleSum()
		count += m.GetHistogram().GetSampleCount()
	}
	return sum, count
}

func sumCounter(f *dto.MetricFamily, want map[string]string) float64 {
	var v float64
	for _, m := range match(f, want) {
		v += m.GetCounter().GetValue()
	}
	return v
}
