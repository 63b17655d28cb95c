package toolexec_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

// BenchmarkToolRoundTrip measures RemoteTool.Execute → JetStream →
// toolexec (validate, run an instant tool, publish the result) → result,
// on an embedded server, one call at a time; p50/p99 are reported. The
// server fsyncs every JetStream write (the default,
// docs/architecture.md#durability).
//
//	go test -run '^$' -bench ToolRoundTrip -benchmem ./pkg/toolexec/
func BenchmarkToolRoundTrip(b *testing.B) {
	roundTrips(b, start(b), false)
}

// BenchmarkToolRoundTripFirst is BenchmarkToolRoundTrip for calls the
// model asked for in the run that publishes them (tool.CallInfo.First,
// first_publish): the common case, which neither the client nor the host
// looks up in LLMW_TOOLRESULTS before it runs. BenchmarkToolRoundTrip's
// calls are continued ones (a turn continued from its checkpoint), which
// both look up.
func BenchmarkToolRoundTripFirst(b *testing.B) {
	roundTrips(b, start(b), true)
}

// BenchmarkToolRoundTripLazyFsync is BenchmarkToolRoundTrip on a server
// that fsyncs every two minutes (natsutil.EmbeddedOptions.SyncInterval),
// the setting an operator who trades durability for throughput picks: it
// shows what the round trip costs without the per-write fsyncs.
func BenchmarkToolRoundTripLazyFsync(b *testing.B) {
	emb, err := natsutil.StartEmbedded(natsutil.EmbeddedOptions{SyncInterval: 2 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(emb.Shutdown)
	nc := connect(b, emb.URL())
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	if err := provision.Provision(ctx(b), js, provision.Options{}); err != nil {
		b.Fatal(err)
	}
	roundTrips(b, &env{url: emb.URL(), nc: nc, js: js, tc: toolexec.NewClient(nc, js, toolexec.ClientOptions{})}, false)
}

// roundTrips runs the calls of the round-trip benchmarks on e, first
// published or continued ones.
func roundTrips(b *testing.B, e *env, first bool) {
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
		if _, err := rt.Execute(tool.WithCall(c, tool.CallInfo{TurnID: "bench", SessionID: "s1", CallID: "c" + strconv.Itoa(i), First: first}), in); err != nil {
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
