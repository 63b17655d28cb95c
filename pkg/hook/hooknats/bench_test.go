package hooknats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
)

// benchHooks measures one before_tool_call hook point with n remote hooks
// served by a hookbridge (a Go handler that continues), over one embedded
// NATS server: the overhead remote hooks add per tool call. p50 and p99
// are reported per tool call in µs.
func benchHooks(b *testing.B, n int) {
	e := start(b)
	var hooks []hooknats.Hook
	for i := range n {
		hooks = append(hooks, hooknats.Hook{
			Registration: events.HookRegistration{Name: fmt.Sprintf("h%d", i), Event: events.HookBeforeToolCall, TimeoutMS: 5000},
			Handler:      hooknats.HandlerFunc(func(context.Context, *events.HookRequest) (*events.HookResponse, error) { return nil, nil }),
		})
	}
	br, err := hooknats.NewServer(e.nc, hooknats.ServerConfig{Hooks: hooks})
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Start(ctx(b)); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = br.Stop(context.Background()) })
	c, w := e.watch(b)
	if err := w.Sync(ctx(b)); err != nil {
		b.Fatal(err)
	}
	if got := len(c.List()); got != n {
		b.Fatalf("%d hooks in the chain, want %d", got, n)
	}
	tn := &hook.Turn{ID: "turn-1", SessionID: "s1", Step: 1}
	call := events.ToolCall{ID: "call-1", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris","units":"metric"}`)}
	bg := context.Background()
	durs := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		in := &hook.ToolCallInput{Turn: tn, Call: call}
		t0 := time.Now()
		out := c.RunBeforeToolCall(bg, in)
		durs = append(durs, time.Since(t0))
		if out.Stopped() {
			b.Fatalf("outcome %+v", out)
		}
	}
	b.StopTimer()
	slices.Sort(durs)
	if len(durs) > 0 {
		b.ReportMetric(float64(durs[len(durs)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds()), "p99-µs")
	}
}

func BenchmarkOneRemoteHook(b *testing.B)   { benchHooks(b, 1) }
func BenchmarkFiveRemoteHooks(b *testing.B) { benchHooks(b, 5) }
