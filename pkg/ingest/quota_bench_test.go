package ingest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

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
// streams 20 deltas from an in-memory provider, either at once (latency=0:
// nothing but ingest, the limiter and the server, all on this machine's
// CPU) or after 50 ms (latency=50ms: a provider that answers, still far
// faster than a model); 24 callers keep the replicas busy. ns/op is per
// call. Run it as
//
//	go test -run xxx -bench QuotaThroughput -benchtime 1000x -count 3 ./pkg/ingest/
func BenchmarkQuotaThroughput(b *testing.B) {
	for _, c := range []struct {
		latency time.Duration
		limited bool
	}{{0, false}, {0, true}, {50 * time.Millisecond, false}, {50 * time.Millisecond, true}} {
		limited := c.limited
		name := fmt.Sprintf("latency=%v/nolimits", c.latency)
		if limited {
			name = fmt.Sprintf("latency=%v/limits", c.latency)
		}
		b.Run(name, func(b *testing.B) {
			srv := natstest.Start(b, natstest.Options{Provision: true})
			ctx := natstest.Context(b)
			prov := llm.ProviderFunc(func(ctx context.Context, _ *llm.Request) (llm.Stream, error) {
				if c.latency > 0 {
					select {
					case <-time.After(c.latency):
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				return &deltaStream{n: 20}, nil
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
