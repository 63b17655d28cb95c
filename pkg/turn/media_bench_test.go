package turn_test

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/media"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// BenchmarkAttachmentHeap measures what a 20 MiB PDF costs a turn
// replica: the heap in use while a turn with the PDF (uploaded first, sent
// as a ref) waits in its model call, less the same for a text-only turn,
// counting what a turn replica holds in a deployment (as
// BenchmarkHeapPerActiveTurn's KiB/turn-replica: without what the heap
// profile attributes to the embedded server and to ingest's side of the
// model call, where the bytes are resolved for the provider).
//
//	go test -run '^$' -bench BenchmarkAttachmentHeap -benchtime 3x ./pkg/turn
func BenchmarkAttachmentHeap(b *testing.B) {
	if runtime.MemProfileRate > 16<<10 {
		defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
		runtime.MemProfileRate = 16 << 10
	}
	e := newEnv(b)
	p := llmtest.NewScripted()
	p.SetFallback(llmtest.BlockingStep("partial"))
	e.scripted(p)
	e.startTurn(turn.Config{AckWait: time.Minute})
	te := e.turnEvents(b)
	ctx := natstest.Context(b)
	st, err := media.Open(ctx, e.js)
	if err != nil {
		b.Fatal(err)
	}
	pdf := fakePDF(20 << 20)
	ref, err := st.Put(ctx, pdf, "application/pdf")
	if err != nil {
		b.Fatal(err)
	}
	size := int64(len(pdf))
	pdf = nil //nolint:ineffassign // released before the heap is measured
	replicaHeap := func() float64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		_, server, ingestSide := inUseBy()
		return float64(ms.HeapAlloc) - float64(server+ingestSide)
	}
	// active returns the replica's heap while one turn waits in its model
	// call, above the heap before it was submitted.
	active := func(id string, withPDF bool) float64 {
		first, end := te.expect(id)
		before := replicaHeap()
		msg := events.UserText("Summarise the attached report.")
		if withPDF {
			msg.Content = append(msg.Content, events.Part{Type: events.PartFile, MediaType: "application/pdf", Filename: "report.pdf", Ref: ref, Size: size})
		}
		e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{msg}})
		select {
		case <-first:
		case <-time.After(time.Minute):
			b.Fatal("the turn never streamed")
		}
		during := replicaHeap()
		e.cancelTurn(id)
		waitEnd(b, end)
		return during - before
	}
	var above float64
	for i := range b.N {
		text := active("heap-text-"+strconv.Itoa(i), false)
		file := active("heap-pdf-"+strconv.Itoa(i), true)
		above += file - text
	}
	b.ReportMetric(above/float64(b.N)/(1<<20), "MiB-above-text/turn-replica")
}
