package ingest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/quota"
)

// BenchmarkQuotaThroughput measures completed model calls through three
// ingest replicas, without limits and with limits configured that never
// make a call wait (so the difference is the limiter's cost: an acquire
// and a release in LLMW_QUOTA per call, batched per limit). Each call
// streams 20 or 500 deltas (a short and a typical answer) from an
// in-memory provider, so the machine's CPU is the bottleneck, not a
// provider; 24 callers keep the replicas busy. ns/op is per call. Run it as
//
//	go test -run xxx -bench QuotaThroughput -benchtime 2000x -count 3 ./pkg/ingest/
func BenchmarkQuotaThroughput(b *testing.B) {
	for _, c := range []struct {
		deltas  int
		limited bool
	}{{20, false}, {20, true}, {500, false}, {500, true}} {
		limited := c.limited
		name := fmt.Sprintf("deltas=%d/nolimits", c.deltas)
		if limited {
			name = fmt.Sprintf("deltas=%d/limits", c.deltas)
		}
		b.Run(name, func(b *testing.B) {
			srv := natstest.Start(b, natstest.Options{Provision: true})
			ctx := natstest.Context(b)
			prov := llm.ProviderFunc(func(context.Context, *llm.Request) (llm.Stream, error) {
				return &deltaStream{n: c.deltas}, nil
			})
			for i := range 3 {
				nc := connect(b, srv.URL())
				cfg := ingest.Config{Instance: fmt.Sprint("ingest-", i), Providers: map[string]ingest.Factory{"stub": ingest.Static(prov)}, Logger: quietLogger()}
				if limited {
					js, _ := jetstream.New(nc)
					l, err := quota.New(ctx, js, quota.Config{Replica: cfg.Instance, Logger: quietLogger(), Limits: quota.Limits{Limits: []quota.Limit{
						{Key: "stub", Concurrent: 10000, RequestsPerMinute: 1 << 30, TokensPerMinute: 1 << 40},
					}}})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = l.Close() })
					cfg.Quota = l
				}
				svc, err := ingest.New(nc, cfg)
				if err != nil {
					b.Fatal(err)
				}
				if err := svc.Start(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = svc.Stop(context.Background()) })
			}
			client := ingest.NewClient(connect(b, srv.URL()), ingest.ClientOptions{})
			b.Cleanup(func() { _ = client.Close() })
			work := make(chan int)
			var wg sync.WaitGroup
			b.ResetTimer()
			for range 24 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range work {
						s, err := client.Stream(ctx, &llm.Request{Model: "stub:m", Messages: []events.Message{events.UserText(fmt.Sprint(i))}})
						if err != nil {
							b.Error(err)
							continue
						}
						for s.Next() {
						}
						_ = s.Close()
					}
				}()
			}
			for i := range b.N {
				work <- i
			}
			close(work)
			wg.Wait()
		})
	}
}
