package ingest_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
)

// deltaStream is a provider stream of n text deltas in one block, made
// without allocating so that the benchmark measures ingest, not the fake.
type deltaStream struct {
	n, i int
	cur  events.Event
}

// The events are boxed once: assigning a struct to an interface allocates.
var (
	benchStarted events.Event = events.StatusEvent{Status: events.StatusStarted}
	benchStart   events.Event = events.BlockStart{Index: 0, BlockType: events.BlockText}
	benchDelta   events.Event = events.TextDelta(0, "token ")
	benchStop    events.Event = events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn}
	benchDone    events.Event = events.StatusEvent{Status: events.StatusCompleted}
)

func (s *deltaStream) Next() bool {
	s.i++
	switch {
	case s.i == 1:
		s.cur = benchStarted
	case s.i == 2:
		s.cur = benchStart
	case s.i <= s.n+2:
		s.cur = benchDelta
	case s.i == s.n+3:
		s.cur = benchStop
	case s.i == s.n+4:
		s.cur = benchDone
	default:
		return false
	}
	return true
}
func (s *deltaStream) Current() events.Event { return s.cur }
func (s *deltaStream) Err() error            { return nil }
func (s *deltaStream) Close() error          { return nil }

// BenchmarkPublishDeltas measures how many delta events per second ingest
// publishes to an embedded NATS server: one request whose provider streams
// b.N text deltas ("token "), so ns/op is the cost of one delta. Run it as
//
//	go test -run xxx -bench PublishDeltas -benchmem -cpu 1 ./pkg/ingest/
//
// binary and structured are timed from the request until a subscriber on
// the stream subject (in the same process, so on the same core with -cpu 1)
// has received the last event: the receiver's decoding is included.
// binary-noreceiver has no subscriber and is timed until the stream ended
// and the server has read everything ingest wrote (a flush round trip):
// ingest and the server alone. Every delta is a message of its own
// (Config.KeepDeltas): this is the cost per message; what joining the
// deltas that are waiting saves shows in BenchmarkClientStream's joined
// runs.
func BenchmarkPublishDeltas(b *testing.B) {
	for _, mode := range []struct {
		name       string
		structured bool
		receiver   bool
	}{{"binary", false, true}, {"structured", true, true}, {"binary-noreceiver", false, false}} {
		b.Run(mode.name, func(b *testing.B) {
			url := startNATS(b)
			n := b.N
			prov := llm.ProviderFunc(func(context.Context, *llm.Request) (llm.Stream, error) {
				return &deltaStream{n: n}, nil
			})
			inc := connect(b, url)
			svc, err := ingest.New(inc, ingest.Config{Structured: mode.structured, Logger: quietLogger(), KeepDeltas: true,
				Providers: map[string]ingest.Factory{"bench": ingest.Static(prov)}})
			if err != nil {
				b.Fatal(err)
			}
			if err := svc.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = svc.Stop(context.Background()) }()
			nc := connect(b, url)
			total, count := n+4, 0
			done := make(chan struct{})
			if mode.receiver {
				sub, err := nc.Subscribe("llmw.llm.stream.bench", func(*nats.Msg) {
					if count++; count == total {
						close(done)
					}
				})
				if err != nil {
					b.Fatal(err)
				}
				if err := sub.SetPendingLimits(-1, -1); err != nil {
					b.Fatal(err)
				}
				if err := nc.Flush(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			complete(b, nc, "bench", "bench:m")
			if mode.receiver {
				select {
				case <-done:
				case <-time.After(time.Minute):
					b.Fatalf("received %d of %d events", count, total)
				}
			} else {
				// A fine poll of its own: a coarser one (natstest's) would
				// show in the time measured.
				for len(svc.Running()) > 0 {
					time.Sleep(100 * time.Microsecond)
				}
				if err := inc.Flush(); err != nil {
					b.Fatal(err)
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
		})
	}
}

// BenchmarkClientStream measures the requester's side of a stream: ingest
// publishes b.N text deltas in all (split over the given number of
// concurrent streams) and ingest.Client reads them back, so ns/op is the
// cost of one delta from ingest's publish to the reader's decoded event,
// ingest included. In the kept runs every delta is a message
// (Config.KeepDeltas); in the joined runs ingest joins the deltas its
// read-ahead holds, as it does by default. Run it as
//
//	go test -run xxx -bench ClientStream -benchmem ./pkg/ingest/
func BenchmarkClientStream(b *testing.B) {
	for _, streams := range []int{1, 16} {
		for _, keep := range []bool{true, false} {
			name := "streams=" + strconv.Itoa(streams) + "/kept"
			if !keep {
				name = "streams=" + strconv.Itoa(streams) + "/joined"
			}
			b.Run(name, func(b *testing.B) { clientStream(b, streams, keep) })
		}
	}
}

func clientStream(b *testing.B, streams int, keep bool) {
	url := startNATS(b)
	per := max(b.N/streams, 1)
	prov := llm.ProviderFunc(func(context.Context, *llm.Request) (llm.Stream, error) {
		return &deltaStream{n: per}, nil
	})
	startService(b, url, ingest.Config{KeepDeltas: keep, Providers: map[string]ingest.Factory{"bench": ingest.Static(prov)}})
	// Ingest has no flow control: a reader that falls behind by more
	// than Buffer events loses some, so the buffer holds a whole stream.
	c := ingest.NewClient(connect(b, url), ingest.ClientOptions{Buffer: per + 4})
	want := per * len(benchDelta.(events.BlockDelta).Content)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range streams {
		wg.Go(func() {
			s, err := c.Stream(context.Background(), &llm.Request{Model: "bench:m", Messages: []events.Message{events.UserText("hi")}})
			if err != nil {
				b.Error(err)
				return
			}
			defer s.Close()
			text := 0
			for s.Next() {
				if d, ok := s.Current().(events.BlockDelta); ok {
					text += len(d.Content)
				}
			}
			if last, ok := s.Current().(events.StatusEvent); !ok || last.Status != events.StatusCompleted || text != want {
				b.Errorf("stream ended with %#v after %d bytes of text, want completed after %d", s.Current(), text, want)
			}
		})
	}
	wg.Wait()
}
