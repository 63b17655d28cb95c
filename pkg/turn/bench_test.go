package turn_test

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/provider"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
	"github.com/llmworker/llmworker/pkg/worker"
)

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// turnEvents dispatches worker events of every turn by type to waiting
// benchmark iterations.
type turnEvents struct {
	mu         sync.Mutex
	firstDelta map[string]chan time.Time
	end        map[string]chan string
	// toolStarted and toolLat time llmw.tool.started → llmw.tool.result
	// of each call: the tool round trip turn → toolexec → turn.
	toolStarted map[string]time.Time
	toolLat     []time.Duration
}

func (e *env) turnEvents(b testing.TB) *turnEvents {
	te := &turnEvents{firstDelta: map[string]chan time.Time{}, end: map[string]chan string{}, toolStarted: map[string]time.Time{}}
	sub, err := e.nc.Subscribe("llmw.events.>", func(m *nats.Msg) {
		now := time.Now()
		typ := m.Header.Get(events.HeaderType)
		id := m.Header.Get(events.HeaderTurnID)
		te.mu.Lock()
		defer te.mu.Unlock()
		switch {
		case typ == events.TypeBlockDelta:
			if ch, ok := te.firstDelta[id]; ok {
				ch <- now
				delete(te.firstDelta, id)
			}
		case typ == events.TypeToolStarted || typ == events.TypeToolResult:
			var c struct {
				CallID string `json:"call_id"`
			}
			_ = json.Unmarshal(m.Data, &c)
			if typ == events.TypeToolStarted {
				te.toolStarted[id+"/"+c.CallID] = now
			} else if t0, ok := te.toolStarted[id+"/"+c.CallID]; ok {
				te.toolLat = append(te.toolLat, now.Sub(t0))
				delete(te.toolStarted, id+"/"+c.CallID)
			}
		case terminal[typ]:
			if ch, ok := te.end[id]; ok {
				ch <- typ
				delete(te.end, id)
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := e.nc.Flush(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	return te
}

func (te *turnEvents) expect(id string) (first chan time.Time, end chan string) {
	first, end = make(chan time.Time, 1), make(chan string, 1)
	te.mu.Lock()
	te.firstDelta[id], te.end[id] = first, end
	te.mu.Unlock()
	return first, end
}

// withTracing runs a benchmark with tracing off (the API's no-op
// provider: a service started without OTEL_* variables) and on
// (telemetry.Setup as a service runs it, every turn sampled, exporting
// OTLP/HTTP in batches to a receiver that discards what it gets), so that
// docs/benchmarks.md can give what tracing costs.
func withTracing(b *testing.B, f func(*testing.B)) {
	b.Run("tracing=off", f)
	b.Run("tracing=on", func(b *testing.B) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
		defer srv.Close()
		prev := otel.GetTracerProvider()
		// The exporter reads the process environment, as in a service.
		b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
		b.Setenv("OTEL_TRACES_SAMPLER", "always_on")
		shutdown, on, err := telemetry.Setup(context.Background(), telemetry.Config{Service: "llmw-bench"})
		if err != nil || !on {
			b.Fatalf("telemetry.Setup: on %v, %v", on, err)
		}
		defer func() {
			_ = shutdown(context.Background())
			otel.SetTracerProvider(prev)
		}()
		f(b)
	})
}

// BenchmarkFirstDelta measures the overhead from the provider's first byte
// (a local replay server answering with a recorded Anthropic stream) to a
// UI subscriber receiving the first text delta: the official SDK in
// ingest, NATS, the turn service's worker and Timeline, NATS again.
func BenchmarkFirstDelta(b *testing.B) {
	withTracing(b, func(b *testing.B) { firstDelta(b, newEnv(b)) })
}

// BenchmarkFirstDeltaLazyFsync is BenchmarkFirstDelta (tracing off) on a
// server that fsyncs every two minutes: the pipeline's share of the first
// delta without the disk's.
func BenchmarkFirstDeltaLazyFsync(b *testing.B) { firstDelta(b, newLazyEnv(b)) }

func firstDelta(b *testing.B, e *env) {
	body := sse(b, "anthropic/text-ping_claude-sonnet-4-5.sse")
	var firstByte atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		firstByte.Store(time.Now().UnixNano())
		_, _ = w.Write(body)
		w.(http.Flusher).Flush()
	}))
	defer srv.Close()
	e.startIngest(provider.Builtin(provider.Config{Anthropic: anthropic.Config{APIKey: "k", BaseURL: srv.URL, MaxRetries: -1}}))
	e.startTurn(turn.Config{})
	te := e.turnEvents(b)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		id := "fd-" + strconv.Itoa(i)
		first, end := te.expect(id)
		e.submit(events.TurnRequest{TurnID: id, Model: "anthropic:claude-sonnet-4-5", Messages: []events.Message{events.UserText("hi")}})
		select {
		case t1 := <-first:
			lat = append(lat, t1.Sub(time.Unix(0, firstByte.Load())))
		case <-time.After(waitFor):
			b.Fatal("no first delta")
		}
		if typ := waitEnd(b, end); typ != events.TypeTurnCompleted {
			b.Fatalf("turn ended %s", typ)
		}
	}
	b.StopTimer()
	b.ReportMetric(ms(percentile(lat, 0.5)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
}

// tenSteps is an instant model that calls the echo tool until the turn has
// nine tool results, then answers: ten model calls per turn.
func tenSteps() llm.Provider {
	return llm.ProviderFunc(func(ctx context.Context, req *llm.Request) (llm.Stream, error) {
		results := 0
		for _, m := range req.Messages {
			for _, p := range m.Content {
				if p.Type == events.PartToolResult {
					results++
				}
			}
		}
		if results >= 9 {
			return llm.SliceStream(llmtest.TextStep("done").Events...), nil
		}
		id := "call_" + strconv.Itoa(results)
		return llm.SliceStream(llmtest.ToolStep(llmtest.ToolCallSpec{ID: id, Name: "echo", Input: `{"n":` + strconv.Itoa(results) + `}`}).Events...), nil
	})
}

type echoArgs struct {
	N int `json:"n"`
}

func echoTool() tool.Tool {
	return tool.Must("echo", "echoes n", func(ctx context.Context, a echoArgs) (string, error) {
		return strconv.Itoa(a.N), nil
	})
}

// BenchmarkStepOverhead runs the same 10-step tool turn (instant model,
// instant tool) in-process with pkg/worker and through NATS (ingest, turn
// with its checkpoints, toolexec) and reports the distributed overhead per
// step, and the tool round trip (llmw.tool.started → llmw.tool.result as a
// UI sees them: turn → toolexec → turn) at p50 and p99.
func BenchmarkStepOverhead(b *testing.B) {
	withTracing(b, func(b *testing.B) { stepOverhead(b, newEnv(b)) })
}

// BenchmarkStepOverheadLazyFsync is BenchmarkStepOverhead (tracing off)
// on a server that fsyncs every two minutes: the pipeline's share of a
// step without the disk's.
func BenchmarkStepOverheadLazyFsync(b *testing.B) { stepOverhead(b, newLazyEnv(b)) }

func stepOverhead(b *testing.B, e *env) {
	e.scripted(tenSteps())
	e.startToolexec(toolexec.Config{}, echoTool())
	e.startTurn(turn.Config{})
	te := e.turnEvents(b)
	w, err := worker.New(worker.Config{Provider: tenSteps(), Model: "test:m", Tools: []tool.Tool{echoTool()}})
	if err != nil {
		b.Fatal(err)
	}
	var inproc, dist time.Duration
	var inMsgs, inBytes int64 // what the server received during the distributed turns
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		res, err := w.Run(context.Background(), []events.Message{events.UserText("go")})
		if err != nil || res.Status != worker.StatusCompleted || res.Steps != 10 {
			b.Fatalf("in-process: %v %+v", err, res)
		}
		inproc += time.Since(start)

		id := "so-" + strconv.Itoa(i)
		_, end := te.expect(id)
		m0, b0 := serverIn(e)
		start = time.Now()
		e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}, Tools: []string{"echo"}})
		if typ := waitEnd(b, end); typ != events.TypeTurnCompleted {
			b.Fatalf("distributed turn %s ended %s", id, typ)
		}
		dist += time.Since(start)
		m1, b1 := serverIn(e)
		inMsgs, inBytes = inMsgs+m1-m0, inBytes+b1-b0
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(inMsgs)/n, "server-msgs/turn")
	b.ReportMetric(float64(inBytes)/n/1024, "server-KiB/turn")
	b.ReportMetric(ms(inproc)/n, "inproc-ms/turn")
	b.ReportMetric(ms(dist)/n, "nats-ms/turn")
	b.ReportMetric((ms(dist)-ms(inproc))/n/10, "overhead-ms/step")
	te.mu.Lock()
	defer te.mu.Unlock()
	b.ReportMetric(ms(percentile(te.toolLat, 0.5)), "tool-rt-p50-ms")
	b.ReportMetric(ms(percentile(te.toolLat, 0.99)), "tool-rt-p99-ms")
}

// BenchmarkDeltaThroughput streams text deltas of 50 concurrent turns
// (1000 deltas each) from ingest through the turn service to one UI
// subscriber of every turn's events. It checks that the UI got every
// byte of every turn's text and reports the provider deltas carried to
// the UI per second (deltas/s), the llmw.block.delta events the UI
// received per second (events/s) and the CPU time of the whole process
// (ingest, turn service, server, UI) per provider delta (cpu-ns/delta).
// Deltas that are already waiting travel joined: ingest joins those its
// provider stream has read ahead (ingest.Config.KeepDeltas), the turn
// service those that queue behind an unacknowledged event
// (emit.EventPublisher), so under load one message carries several.
func BenchmarkDeltaThroughput(b *testing.B) { deltaThroughput(b, newEnv(b)) }

// BenchmarkDeltaThroughputLazyFsync is BenchmarkDeltaThroughput on a
// server that fsyncs every two minutes (natsutil.EmbeddedOptions.
// SyncInterval): what the pipeline moves when the disk is not the bound.
func BenchmarkDeltaThroughputLazyFsync(b *testing.B) { deltaThroughput(b, newLazyEnv(b)) }

// newLazyEnv is newEnv on a server that fsyncs every two minutes
// (natsutil.EmbeddedOptions.SyncInterval) instead of at every write.
func newLazyEnv(b *testing.B) *env {
	emb, err := natsutil.StartEmbedded(natsutil.EmbeddedOptions{SyncInterval: 2 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(emb.Shutdown)
	e := &env{t: b, url: emb.URL(), emb: emb}
	e.nc = e.connect()
	if e.js, err = jetstream.New(e.nc); err != nil {
		b.Fatal(err)
	}
	return e
}

func deltaThroughput(b *testing.B, e *env) {
	const turns, deltas = 50, 1000
	chunks := make([]string, deltas)
	textLen := 0
	for i := range chunks {
		chunks[i] = "tok" + strconv.Itoa(i) + " "
		textLen += len(chunks[i])
	}
	p := llmtest.NewScripted()
	p.SetFallback(llmtest.TextStep(chunks...))
	e.scripted(p)
	e.startTurn(turn.Config{})
	var gotEvents, gotText atomic.Int64
	ends := make(chan struct{}, turns)
	sub, err := e.nc.Subscribe("llmw.events.>", func(m *nats.Msg) {
		switch m.Header.Get(events.HeaderType) {
		case events.TypeBlockDelta:
			var d struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal(m.Data, &d); err != nil {
				b.Errorf("delta %q: %v", m.Data, err)
			}
			gotEvents.Add(1)
			gotText.Add(int64(len(d.Text)))
		case events.TypeTurnCompleted, events.TypeTurnFailed, events.TypeTurnAborted:
			ends <- struct{}{}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	defer sub.Unsubscribe()
	_ = e.nc.Flush()
	var total, cpu time.Duration
	var stored int64
	b.ResetTimer()
	for i := range b.N {
		cpu0 := cpuTime()
		gotEvents.Store(0)
		gotText.Store(0)
		start := time.Now()
		e.submitMany(b, "tp"+strconv.Itoa(i), turns)
		for range turns {
			select {
			case <-ends:
			case <-time.After(time.Minute):
				b.Fatal("turns did not end")
			}
		}
		total += time.Since(start)
		cpu += cpuTime() - cpu0
		if gotText.Load() != turns*int64(textLen) {
			b.Fatalf("UI got %d bytes of text, want %d", gotText.Load(), turns*textLen)
		}
		stored += gotEvents.Load()
	}
	b.StopTimer()
	b.ReportMetric(float64(turns*deltas*b.N)/total.Seconds(), "deltas/s")
	b.ReportMetric(float64(stored)/total.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(turns*deltas*b.N), "cpu-ns/delta")
}

// BenchmarkHeapPerActiveTurn holds 1000 turns open on one replica, each
// blocked mid-answer after its first delta, and reports the heap they take
// (HeapAlloc after GC, minus the idle baseline, / 1000: "KiB/turn"). Ingest
// and the NATS server run in the same process, so their memory is
// included: an upper bound. The baseline is taken before the first turn,
// so what the server allocates for the streams being written, its
// file-store block buffers (1–8 MiB each, taken as a block fills), is
// divided among the turns; it also holds what the turns of the iteration
// before still hold while they finish.
//
// "KiB/turn-marginal" leaves both out: once the previous iteration's turns
// are gone, the turns are submitted in two halves, and it is the heap the
// second 500 add, less the server's block buffers (allocations made by
// its getMsgBlockBuf, read from the heap profile), / 500.
//
// "KiB/turn-replica" is the part of the marginal a turn replica holds in
// a deployment, where the server and ingest are processes of their own:
// the same difference less everything the heap profile attributes to the
// server (a nats-server function on the allocation's stack, block
// buffers included) and to ingest's side of the model calls (an
// ingest.(*Service) method on it: the request it decoded, the provider's
// stream, the stream's writer).
func BenchmarkHeapPerActiveTurn(b *testing.B) {
	const n = 1000
	// Sample every allocation of 16 KiB or more, so that the heap profile
	// counts each block buffer (256 KiB and up).
	if runtime.MemProfileRate > 16<<10 {
		defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
		runtime.MemProfileRate = 16 << 10
	}
	e := newEnv(b)
	p := llmtest.NewScripted()
	p.SetFallback(llmtest.BlockingStep("partial"))
	e.scripted(p)
	svc := e.startTurn(turn.Config{AckWait: time.Minute})
	te := e.turnEvents(b)
	heap := func() (all, blockBufs, others float64) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		bufs, server, ingestSide := inUseBy()
		return float64(ms.HeapAlloc), float64(bufs), float64(server + ingestSide)
	}
	var perTurn, marginal, replica float64
	for i := range b.N {
		before, _, _ := heap()
		ends := make([]chan string, n)
		firsts := make([]chan time.Time, n)
		ids := make([]string, n)
		for j := range n {
			// the ids submitMany gives half j/(n/2)
			ids[j] = "heap-" + strconv.Itoa(i) + "-h" + strconv.Itoa(j/(n/2)) + "-" + strconv.Itoa(j%(n/2))
			firsts[j], ends[j] = te.expect(ids[j])
		}
		deadline := time.Now().Add(time.Minute)
		for len(svc.Running()) > 0 {
			if time.Now().After(deadline) {
				b.Fatal("the turns of the previous iteration did not finish")
			}
			time.Sleep(10 * time.Millisecond)
		}
		var half, halfBufs, halfOthers float64
		for h := range 2 {
			e.submitMany(b, "heap-"+strconv.Itoa(i)+"-h"+strconv.Itoa(h), n/2)
			for j := h * n / 2; j < (h+1)*n/2; j++ {
				select {
				case <-firsts[j]:
				case <-time.After(time.Minute):
					b.Fatalf("turn %d never streamed", j)
				}
			}
			if h == 0 {
				half, halfBufs, halfOthers = heap()
			}
		}
		during, duringBufs, duringOthers := heap()
		perTurn += (during - before) / n
		marginal += ((during - duringBufs) - (half - halfBufs)) / (n / 2)
		replica += ((during - duringOthers) - (half - halfOthers)) / (n / 2)
		for _, id := range ids {
			e.cancelTurn(id)
		}
		for j := range n {
			select {
			case <-ends[j]:
			case <-time.After(time.Minute):
				b.Fatalf("turn %d did not end", j)
			}
		}
	}
	b.ReportMetric(perTurn/float64(b.N)/1024, "KiB/turn")
	b.ReportMetric(marginal/float64(b.N)/1024, "KiB/turn-marginal")
	b.ReportMetric(replica/float64(b.N)/1024, "KiB/turn-replica")
}

// inUseBy is what the heap profile (as of the last GC) counts in use of
// the embedded nats-server's file-store block buffers (allocations with
// getMsgBlockBuf on their stack), of everything the server allocated
// (block buffers included), and of what ingest's side of the model calls
// allocated (an ingest.(*Service) method on the stack).
func inUseBy() (blockBufs, server, ingestSide int64) {
	const (
		serverPkg = "github.com/nats-io/nats-server/v2/"
		blockBuf  = serverPkg + "server.getMsgBlockBuf"
		ingestSvc = "github.com/llmworker/llmworker/pkg/ingest.(*Service)."
	)
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs = make([]runtime.MemProfileRecord, n+50)
		var ok bool
		if n, ok = runtime.MemProfile(recs, true); ok {
			recs = recs[:n]
			break
		}
	}
	for i := range recs {
		r := &recs[i]
		// The profile samples one allocation per MemProfileRate bytes on
		// average; scale each record as pprof does (every block buffer is
		// sampled: its scale is 1).
		bytes := r.InUseBytes()
		if objs := r.InUseObjects(); objs > 0 && bytes > 0 {
			avg := float64(bytes) / float64(objs)
			bytes = int64(float64(bytes) / (1 - math.Exp(-avg/float64(runtime.MemProfileRate))))
		}
		frames := runtime.CallersFrames(r.Stack())
		var isServer, isBuf, isIngest bool
		for {
			f, more := frames.Next()
			switch {
			case f.Function == blockBuf:
				isBuf = true
				fallthrough
			case strings.HasPrefix(f.Function, serverPkg):
				isServer = true
			case strings.HasPrefix(f.Function, ingestSvc):
				isIngest = true
			}
			if !more {
				break
			}
		}
		switch {
		case isServer:
			server += bytes
			if isBuf {
				blockBufs += bytes
			}
		case isIngest:
			ingestSide += bytes
		}
	}
	return blockBufs, server, ingestSide
}

func waitEnd(b testing.TB, end chan string) string {
	select {
	case typ := <-end:
		return typ
	case <-time.After(time.Minute):
		b.Fatal("the turn did not end within a minute")
		return ""
	}
}

// serverIn is what the embedded server has received from its clients so
// far: messages (publishes and requests, every stored write among them)
// and their bytes.
func serverIn(e *env) (msgs, bytes int64) {
	v, err := e.emb.Server.Varz(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return v.InMsgs, v.InBytes
}
