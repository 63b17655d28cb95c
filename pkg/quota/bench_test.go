package quota_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/quota"
)

// BenchmarkAcquire measures what the limiter adds to a model call: three
// replicas (limiters on connections of their own to one embedded server)
// acquire and release one shared limit at the same time, so the records'
// compare-and-set races are included. The limit never makes a call wait:
// what is measured is the bucket's round trips. Run it as
//
//	go test -run xxx -bench Acquire -benchtime 3000x ./pkg/quota/
//
// p50-acquire-ms is the median time Acquire takes (the latency added
// before the provider call opens); release runs after the stream's last
// event was published, so it delays no event.
func BenchmarkAcquire(b *testing.B) {
	s := natstest.Start(b, natstest.Options{Provision: true})
	ctx := natstest.Context(b)
	lim := quota.Limits{Limits: []quota.Limit{{Key: "anthropic", Concurrent: 10000, RequestsPerMinute: 1 << 30, TokensPerMinute: 1 << 40}}}
	var ls []*quota.Limiter
	for i := range 3 {
		nc, err := nats.Connect(s.URL())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		l, err := quota.New(ctx, js, quota.Config{Replica: fmt.Sprint("r", i), Limits: lim})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = l.Close() })
		ls = append(ls, l)
	}
	acq := make([][]time.Duration, 3)
	rel := make([][]time.Duration, 3)
	b.ResetTimer()
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := r; i < b.N; i += 3 {
				t0 := time.Now()
				lease, err := ls[r].Acquire(ctx, quota.Request{Provider: "anthropic", Model: "claude", Session: fmt.Sprint(i % 16), Tokens: 1000})
				if err != nil {
					b.Error(err)
					return
				}
				t1 := time.Now()
				lease.Release(ctx, 800)
				acq[r] = append(acq[r], t1.Sub(t0))
				rel[r] = append(rel[r], time.Since(t1))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	p := func(ds [][]time.Duration, q float64) float64 {
		all := slices.Concat(ds...)
		if len(all) == 0 {
			return 0
		}
		slices.Sort(all)
		return float64(all[int(q*float64(len(all)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(p(acq, 0.5), "p50-acquire-ms")
	b.ReportMetric(p(acq, 0.99), "p99-acquire-ms")
	b.ReportMetric(p(rel, 0.5), "p50-release-ms")
}
