package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/quota"
)

// standIn is a provider with a quota of its own: it answers 429 to a call
// over maxConc running at once or over perWindow started in the last
// window, as a provider's rate limiter does.
type standIn struct {
	maxConc, perWindow int
	window, hold       time.Duration
	retryAfter         time.Duration

	mu       sync.Mutex
	running  int
	peak     int
	starts   []time.Time // accepted calls of the last window
	accepted []time.Time // every accepted call
	refused  atomic.Int64
	refuse   atomic.Int64 // refuse this many calls whatever the counts
}

// retryAfterErr is a provider's 429 with its Retry-After.
type retryAfterErr struct{ after time.Duration }

func (e retryAfterErr) Error() string             { return "429 Too Many Requests" }
func (e retryAfterErr) RetryAfter() time.Duration { return e.after }

func (p *standIn) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	keep := p.starts[:0]
	for _, s := range p.starts {
		if now.Sub(s) < p.window {
			keep = append(keep, s)
		}
	}
	p.starts = keep
	if p.refuse.Load() > 0 || p.running >= p.maxConc || len(p.starts) >= p.perWindow {
		p.refuse.Add(-1)
		p.refused.Add(1)
		return nil, &llm.APIError{Status: 429, Err: retryAfterErr{p.retryAfter}}
	}
	p.running++
	p.peak = max(p.peak, p.running)
	p.starts = append(p.starts, now)
	p.accepted = append(p.accepted, now)
	in, out := int64(10), int64(5)
	return &standInStream{p: p, ctx: ctx, evs: []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "ok"),
		events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn},
		events.UsageEvent{InputTokens: &in, OutputTokens: &out},
		events.StatusEvent{Status: events.StatusCompleted},
	}}, nil
}

func (p *standIn) stats() (peak int, accepted []time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak, append([]time.Time(nil), p.accepted...)
}

// standInStream takes hold to answer, then streams its events.
type standInStream struct {
	p      *standIn
	ctx    context.Context
	evs    []events.Event
	cur    events.Event
	waited bool
	once   sync.Once
}

func (s *standInStream) Next() bool {
	if !s.waited {
		s.waited = true
		select {
		case <-time.After(s.p.hold):
		case <-s.ctx.Done():
			s.evs = []events.Event{events.StatusEvent{Status: events.StatusCancelled}}
		}
	}
	if len(s.evs) == 0 {
		return false
	}
	s.cur, s.evs = s.evs[0], s.evs[1:]
	return true
}
func (s *standInStream) Current() events.Event { return s.cur }
func (s *standInStream) Err() error            { return nil }
func (s *standInStream) Close() error {
	s.once.Do(func() {
		s.p.mu.Lock()
		s.p.running--
		s.p.mu.Unlock()
	})
	return nil
}

// quotaReplica is an ingest replica with its limiter, on a connection of
// its own.
type quotaReplica struct {
	nc  *nats.Conn
	l   *quota.Limiter
	svc *ingest.Service
}

func startQuotaReplicas(t *testing.T, url string, n int, p llm.Provider) []*quotaReplica {
	t.Helper()
	out := make([]*quotaReplica, n)
	for i := range out {
		nc := connect(t, url)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		l, err := quota.New(natstest.Context(t), js, quota.Config{Replica: fmt.Sprintf("ingest-%d", i), Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		svc, err := ingest.New(nc, ingest.Config{
			Instance: fmt.Sprintf("ingest-%d", i), Providers: map[string]ingest.Factory{"stub": ingest.Static(p)},
			Quota: l, Logger: quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			_ = svc.Stop(ctx) // a killed replica's Stop reports its closed connection
			_ = l.Close()
		})
		out[i] = &quotaReplica{nc: nc, l: l, svc: svc}
	}
	return out
}

// Three ingest replicas keep a provider that allows 5 concurrent calls
// and 60 a window under its quota: 50 concurrent calls all complete, none
// is answered 429, the provider never sees more than 5 at once, calls
// that wait are told so (queued), and a replica killed mid-run frees its
// leases within the lease TTL.
func TestReplicasStayUnderProviderQuota(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{Provision: true})
	ctx := natstest.Context(t)
	const (
		window = time.Second // the stand-in's "minute"
		ttl    = 3 * time.Second
	)
	if err := quota.PutLimits(ctx, srv.JS, quota.Limits{
		Window: window, LeaseTTL: ttl, MaxWait: time.Minute,
		Limits: []quota.Limit{{Key: "stub", Concurrent: 5, RequestsPerMinute: 60}},
	}); err != nil {
		t.Fatal(err)
	}
	prov := &standIn{maxConc: 5, perWindow: 60, window: window, hold: 30 * time.Millisecond, retryAfter: time.Second}
	rs := startQuotaReplicas(t, srv.URL(), 3, prov)
	client := ingest.NewClient(connect(t, srv.URL()), ingest.ClientOptions{RequestTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second})
	t.Cleanup(func() { _ = client.Close() })

	const calls = 50
	var completed, queued, retried, done atomic.Int64
	var rateLimited atomic.Int64
	kill := make(chan struct{})
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if done.Add(1) == calls/3 {
					close(kill)
				}
			}()
			// A call that was on the killed replica fails without a
			// 429 and is sent again, as a turn retries a model call.
			for attempt := 0; attempt < 5; attempt++ {
				req := &llm.Request{Model: "stub:m", Messages: []events.Message{events.UserText(fmt.Sprint("q", i))}}
				s, err := client.Stream(ctx, req)
				if err != nil {
					if errors.Is(err, ingest.ErrRateLimited) {
						rateLimited.Add(1)
						return
					}
					retried.Add(1)
					continue
				}
				var last events.StatusEvent
				for s.Next() {
					switch e := s.Current().(type) {
					case events.StatusEvent:
						if e.Status == events.StatusQueued {
							if e.Position < 1 {
								t.Errorf("queued at position %d", e.Position)
							}
							queued.Add(1)
						}
						last = e
					case events.ErrorEvent:
						if e.Code == string(ingest.KindRateLimited) {
							rateLimited.Add(1)
						}
					}
				}
				_ = s.Close()
				if last.Status == events.StatusCompleted {
					completed.Add(1)
					return
				}
				retried.Add(1)
			}
			t.Errorf("call %d never completed", i)
		}()
	}

	// Kill a replica that holds calls, mid-run: its connection closes
	// without a word, its leases stay until they expire.
	<-kill
	var victim *quotaReplica
	var held int
	natstest.Eventually(t, "a replica holding calls", func() bool {
		u, err := rs[0].l.Usage(ctx, "stub")
		if err != nil {
			return false
		}
		for i := 1; i < 3; i++ {
			if n := u.Running[fmt.Sprintf("ingest-%d", i)]; n > 0 {
				victim, held = rs[i], n
				return true
			}
		}
		return false
	})
	victimName := map[*quotaReplica]string{rs[1]: "ingest-1", rs[2]: "ingest-2"}[victim]
	victim.nc.Close()
	killed := time.Now()
	natstest.EventuallyWithin(t, 30*time.Second, "the killed replica's leases to expire", func() bool {
		u, err := rs[0].l.Usage(ctx, "stub")
		return err == nil && u.Running[victimName] == 0
	})
	freed := time.Since(killed)
	t.Logf("killed %s holding %d calls; its leases were freed %v later (lease TTL %v)", victimName, held, freed.Round(time.Millisecond), ttl)
	// The leases were renewed at most a third of a TTL before the kill;
	// polling and a loaded machine get a second on top.
	if freed > ttl+time.Second {
		t.Errorf("leases freed %v after the kill, the lease TTL is %v", freed, ttl)
	}

	wg.Wait()
	peak, _ := prov.stats()
	t.Logf("%d calls completed (%d attempts again after the kill), %d queued statuses, provider peak %d, refused %d",
		completed.Load(), retried.Load(), queued.Load(), peak, prov.refused.Load())
	if completed.Load() != calls {
		t.Fatalf("%d of %d calls completed", completed.Load(), calls)
	}
	if n := prov.refused.Load() + rateLimited.Load(); n != 0 {
		t.Fatalf("the provider answered 429 %d times, callers saw rate_limited %d times", prov.refused.Load(), rateLimited.Load())
	}
	if peak > 5 {
		t.Fatalf("the provider saw %d calls at once, its limit is 5", peak)
	}
	if queued.Load() == 0 {
		t.Fatal("50 calls over a limit of 5 and no call was told it was queued")
	}
}

// A 429 that gets through (another client of the same key) cools the
// limit down for every replica: no call reaches the provider before the
// Retry-After has passed.
func TestProvider429CoolsEveryReplica(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{Provision: true})
	ctx := natstest.Context(t)
	if err := quota.PutLimits(ctx, srv.JS, quota.Limits{Limits: []quota.Limit{{Key: "stub", Concurrent: 5}}}); err != nil {
		t.Fatal(err)
	}
	const retryAfter = 1500 * time.Millisecond
	prov := &standIn{maxConc: 100, perWindow: 1000, window: time.Second, retryAfter: retryAfter}
	prov.refuse.Store(1)
	startQuotaReplicas(t, srv.URL(), 3, prov)
	client := ingest.NewClient(connect(t, srv.URL()), ingest.ClientOptions{})
	t.Cleanup(func() { _ = client.Close() })

	_, err := client.Stream(ctx, &llm.Request{Model: "stub:m", Messages: []events.Message{events.UserText("first")}})
	answered := time.Now()
	if !errors.Is(err, ingest.ErrRateLimited) {
		t.Fatalf("the provider's 429: %v, want ErrRateLimited", err)
	}
	var wg sync.WaitGroup
	for i := range 9 { // spread over the replicas by the queue group
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := client.Stream(ctx, &llm.Request{Model: "stub:m", Messages: []events.Message{events.UserText(fmt.Sprint(i))}})
			if err != nil {
				t.Error(err)
				return
			}
			for s.Next() {
			}
			_ = s.Close()
		}()
	}
	wg.Wait()
	_, accepted := prov.stats()
	if len(accepted) != 9 {
		t.Fatalf("the provider took %d calls, want 9", len(accepted))
	}
	for _, at := range accepted {
		// The cooldown starts when ingest heard the 429, a moment
		// before the requester did; records are in milliseconds.
		if at.Before(answered.Add(retryAfter - 100*time.Millisecond)) {
			t.Fatalf("a call reached the provider %v after the 429, inside its Retry-After of %v", at.Sub(answered), retryAfter)
		}
	}
}
