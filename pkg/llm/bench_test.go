package llm_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
)

// BenchmarkNormalizeOpenIdle measures what an open model call costs while
// the model is silent: b.N normalized streams of a network-like source that
// yielded its first events and now blocks, read by the pump ("pumped") or
// inline ("selfbounded", as the built-in adapters' streams are). It reports
// the heap and the goroutine stacks held per open stream (the stream, its
// pump if any, and the scripted source with its own goroutine).
func BenchmarkNormalizeOpenIdle(b *testing.B) {
	for _, bounded := range []bool{false, true} {
		name := "pumped"
		if bounded {
			name = "selfbounded"
		}
		b.Run(name, func(b *testing.B) { benchOpenIdle(b, bounded) })
	}
}

func benchOpenIdle(b *testing.B, bounded bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := llmtest.NewScripted()
	for i := 0; i < b.N; i++ {
		p.Add(llmtest.BlockingStep("a"))
	}
	streams := make([]llm.Stream, 0, b.N)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		raw, err := p.Stream(ctx, &llm.Request{})
		if err != nil {
			b.Fatal(err)
		}
		if bounded {
			raw = selfBounded{raw}
		}
		s := llm.Normalize(ctx, raw, llm.NormalizeOptions{IdleTimeout: time.Hour})
		// status started, block start, delta "a": then the source blocks
		// (read ahead by the pump, or on the next Next when inline).
		for j := 0; j < 3; j++ {
			if !s.Next() {
				b.Fatal("stream ended early")
			}
		}
		streams = append(streams, s)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "heapB/stream")
	b.ReportMetric(float64(after.StackInuse-before.StackInuse)/float64(b.N), "stackB/stream")
	for _, s := range streams {
		s.Close()
	}
}

// BenchmarkNormalizePumped is the hand-off cost per event: a source of 300
// text deltas that never waits, read through the pump (a cancellable ctx
// and an idle timeout, as every provider adapter's stream is).
func BenchmarkNormalizePumped(b *testing.B) {
	raw := llmtest.TextStep(make([]string, 300)...).Events
	for i := range raw {
		if d, ok := raw[i].(events.BlockDelta); ok {
			d.Content = "x"
			raw[i] = d
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		s := llm.Normalize(b.Context(), opaque{llm.SliceStream(raw...)}, llm.NormalizeOptions{IdleTimeout: time.Minute})
		n := 0
		for s.Next() {
			n++
		}
		s.Close()
		if n < len(raw) {
			b.Fatalf("%d events", n)
		}
	}
}
