package timeline_test

import (
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/timeline"
)

type byteCounter struct{ n int }

func (c *byteCounter) OnEvent(_ *struct{}, ev timeline.TextBlockEvent) { c.n += len(ev.Text) }

// BenchmarkDispatchTextDelta2Handlers dispatches one text delta of an open
// block to two handlers with different scope types: the hot path of every
// streamed token. It must not allocate.
func BenchmarkDispatchTextDelta2Handlers(b *testing.B) {
	tl := timeline.New()
	counter := &byteCounter{}
	timeline.On(tl, timeline.TextBlock, counter)
	timeline.OnFunc(tl, timeline.TextBlock, func(deltas *int, ev timeline.TextBlockEvent) {
		if ev.Phase == timeline.PhaseDelta {
			*deltas++
		}
	})
	tl.Dispatch(events.BlockStart{Index: 0, BlockType: events.BlockText})
	var ev events.Event = events.TextDelta(0, "token")
	b.ReportAllocs()
	for b.Loop() {
		tl.Dispatch(ev)
	}
	if counter.n == 0 {
		b.Fatal("handler not called")
	}
}

// TestDispatchTextDeltaAllocatesNothing keeps the benchmark's promise in
// the ordinary test run.
func TestDispatchTextDeltaAllocatesNothing(t *testing.T) {
	tl := timeline.New()
	timeline.On(tl, timeline.TextBlock, &byteCounter{})
	timeline.OnFunc(tl, timeline.TextBlock, func(deltas *int, _ timeline.TextBlockEvent) { *deltas++ })
	tl.Dispatch(events.BlockStart{Index: 0, BlockType: events.BlockText})
	var ev events.Event = events.TextDelta(0, "token")
	if n := testing.AllocsPerRun(1000, func() { tl.Dispatch(ev) }); n != 0 {
		t.Fatalf("Dispatch of a text delta allocates %v times, want 0", n)
	}
}
