package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/emit"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// benchTurn is a gateway on an embedded NATS server and a turn whose
// worker events the benchmark publishes itself, as the turn service does
// (emit.EventPublisher), so that only the path from a stored event to
// the client is measured.
type benchTurn struct {
	srv     *natstest.Server
	url     string
	ep      *emit.EventPublisher
	session string
	turnID  string
}

func newBenchTurn(b *testing.B) *benchTurn {
	b.Helper()
	srv := natstest.Start(b, natstest.Options{Provision: true, FileStorage: true})
	ctx := natstest.Context(b)
	g, err := gateway.New(ctx, srv.Connect(b), gateway.Config{NoUI: true, KeepAlive: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(g)
	b.Cleanup(func() {
		g.Close()
		hs.CloseClientConnections()
		hs.Close()
	})
	bt := &benchTurn{srv: srv, url: hs.URL, session: "bench", turnID: "t-bench"}
	bt.ep = emit.NewPublisher(srv.Connect(b), emit.PublisherOptions{}).Turn(bt.turnID, bt.session, emit.Position{})
	for _, ev := range []events.WorkerEvent{
		events.TurnStarted{TurnID: bt.turnID, SessionID: bt.session, Model: "bench:m"},
		events.TurnStep{Step: 1},
		events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 0, BlockType: events.BlockText}, Step: 1},
	} {
		if _, err := bt.ep.Publish(ev); err != nil {
			b.Fatal(err)
		}
	}
	if err := bt.ep.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	return bt
}

func pct(d []time.Duration, p float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[int(float64(len(s)-1)*p)].Microseconds())
}

// BenchmarkEventToSSE measures the latency the gateway adds between a
// worker event and a browser: from the turn service's publish of a text
// delta to the SSE bytes of its text-delta part read by an HTTP client,
// against the same event read by a subscriber of LLMW_EVENTS (an
// ordered consumer, what a UI on NATS uses). One event at a time, so
// no queueing is measured. Reports p50/p99 of both and of the
// difference per event (added).
func BenchmarkEventToSSE(b *testing.B) {
	bt := newBenchTurn(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The gateway's stream.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, bt.url+"/api/chat/"+bt.session+"/stream?turn="+bt.turnID, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	viaGateway := make(chan int, 1)
	go func() {
		s := gateway.NewStreamReader(resp.Body)
		for {
			typ, raw, err := s.Next()
			if err != nil {
				return
			}
			if typ == gateway.PartTextDelta {
				var i int
				_, _ = fmt.Sscanf(string(raw[strings.Index(string(raw), `"delta":"`)+9:]), "%d", &i)
				select {
				case viaGateway <- i:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	// The direct subscriber.
	tc, err := turn.NewClient(bt.srv.Connect(b), turn.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	f, err := tc.Follow(ctx, events.NewSubjects("").EventsOfTurn(bt.turnID))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Stop()
	direct := make(chan int, 1)
	go func() {
		for {
			var it turn.Item
			select {
			case it = <-f.C():
			case <-ctx.Done():
				return
			}
			if d, ok := it.Event.(events.WorkerBlockDelta); ok {
				i, _ := strconv.Atoi(d.Content)
				select {
				case direct <- i:
				case <-ctx.Done():
					return
				}
			}
		}
	}()

	gw := make([]time.Duration, 0, b.N)
	dr := make([]time.Duration, 0, b.N)
	added := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if _, err := bt.ep.Publish(events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, strconv.Itoa(i)), Step: 1}); err != nil {
			b.Fatal(err)
		}
		var tg, td time.Duration
		for tg == 0 || td == 0 {
			select {
			case j := <-viaGateway:
				if j != i {
					b.Fatalf("gateway delivered %d, want %d", j, i)
				}
				tg = time.Since(t0)
			case j := <-direct:
				if j != i {
					b.Fatalf("direct delivered %d, want %d", j, i)
				}
				td = time.Since(t0)
			case <-time.After(10 * time.Second):
				b.Fatalf("event %d not delivered", i)
			}
		}
		gw, dr, added = append(gw, tg), append(dr, td), append(added, tg-td)
	}
	b.StopTimer()
	b.ReportMetric(pct(gw, .5), "p50-sse-µs")
	b.ReportMetric(pct(gw, .99), "p99-sse-µs")
	b.ReportMetric(pct(dr, .5), "p50-direct-µs")
	b.ReportMetric(pct(dr, .99), "p99-direct-µs")
	b.ReportMetric(pct(added, .5), "p50-added-µs")
	b.ReportMetric(pct(added, .99), "p99-added-µs")
}

// BenchmarkIdleStreams opens b.N concurrent streams of one running turn
// (each its own HTTP connection and its own ordered consumer on
// LLMW_EVENTS) and reports the heap they hold, per stream, after a GC —
// the memory a gateway needs per connected browser between events. The
// clients' sockets and the embedded NATS server's consumers share the
// process, so the figure is an upper bound. Run it with -benchtime=Nx to
// pick the count.
func BenchmarkIdleStreams(b *testing.B) {
	bt := newBenchTurn(b)
	addr := strings.TrimPrefix(bt.url, "http://")
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before, goBefore := ms.HeapAlloc, runtime.NumGoroutine()
	conns := make([]net.Conn, 0, b.N)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	b.ResetTimer()
	for range b.N {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /api/chat/%s/stream?turn=%s HTTP/1.1\r\nHost: bench\r\n\r\n", bt.session, bt.turnID)
		// Read until the stream has replayed the stored events.
		r := bufio.NewReaderSize(c, 512)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if strings.Contains(line, `"text-start"`) {
				break
			}
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	per := float64(int64(ms.HeapAlloc)-int64(before)) / float64(b.N)
	b.ReportMetric(per, "heap-B/stream")
	b.ReportMetric(float64(runtime.NumGoroutine()-goBefore)/float64(b.N), "goroutines/stream")
}
