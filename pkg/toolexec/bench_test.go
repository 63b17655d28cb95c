package toolexec_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/toolexec"
)

// BenchmarkToolRoundTrip measures RemoteTool.Execute → JetStream →
// toolexec (validate, run an instant tool, publish the result) → result,
// on an embedded server, one call at a time; p50/p99 are reported.
//
//	go test -run '^$' -bench ToolRoundTrip -benchmem ./pkg/toolexec/
func BenchmarkToolRoundTrip(b *testing.B) {
	e := start(b)
	replica(b, e.url, toolexec.Config{}, echo(nil))
	rt := remote(b, e, "echo")
	in := json.RawMessage(`{"text":"x"}`)
	c := ctx(b)
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		t0 := time.Now()
		if _, err := rt.Execute(call(c, "bench", "c"+strconv.Itoa(i)), in); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
