package quota_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/quota"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// replica is one limiter on a connection of its own, as an ingest replica
// has.
type replica struct {
	nc *nats.Conn
	l  *quota.Limiter
}

func replicas(t *testing.T, s *natstest.Server, n int, lim quota.Limits) []replica {
	t.Helper()
	out := make([]replica, n)
	for i := range out {
		nc := s.Connect(t)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		l, err := quota.New(natstest.Context(t), js, quota.Config{Replica: fmt.Sprintf("r%d", i), Limits: lim})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		out[i] = replica{nc: nc, l: l}
	}
	return out
}

// Three replicas hold one concurrency limit together: 60 calls spread
// over them never run more than 5 at once, and all of them run.
func TestReplicasShareConcurrency(t *testing.T) {
	s := natstest.Start(t, natstest.Options{Provision: true})
	rs := replicas(t, s, 3, quota.Limits{LeaseTTL: 5 * time.Second, Limits: []quota.Limit{{Key: "stub", Concurrent: 5}}})
	ctx := natstest.Context(t)
	var running, peak, done atomic.Int64
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := rs[i%3].l
			lease, err := l.Acquire(ctx, quota.Request{Provider: "stub", Model: "m", Session: fmt.Sprint("s", i%7)})
			if err != nil {
				t.Errorf("acquire %d: %v", i, err)
				return
			}
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(2 * time.Millisecond)
			running.Add(-1)
			lease.Release(ctx, 0)
			done.Add(1)
		}()
	}
	wg.Wait()
	if done.Load() != 60 {
		t.Fatalf("%d of 60 calls ran", done.Load())
	}
	if p := peak.Load(); p > 5 || p < 1 {
		t.Fatalf("peak concurrency %d, the limit is 5", p)
	}
	u, err := rs[0].l.Usage(ctx, "stub")
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Running) != 0 || u.Requests != 60 {
		t.Fatalf("usage after all calls released: %+v, want nothing running and 60 requests", u)
	}
}

// A replica that dies holding leases frees them when they expire: the
// others wait at most the lease TTL after its last renewal.
func TestDeadReplicaLeasesExpire(t *testing.T) {
	const ttl = 2 * time.Second
	s := natstest.Start(t, natstest.Options{Provision: true})
	rs := replicas(t, s, 3, quota.Limits{LeaseTTL: ttl, MaxWait: time.Minute, Limits: []quota.Limit{{Key: "stub", Concurrent: 5}}})
	ctx := natstest.Context(t)
	for i := range 5 {
		if _, err := rs[0].l.Acquire(ctx, quota.Request{Provider: "stub", Model: "m", Session: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Renewals keep them past the TTL while r0 lives.
	time.Sleep(2*ttl + ttl/6)
	u, err := rs[1].l.Usage(ctx, "stub")
	if err != nil || u.Running["r0"] != 5 {
		t.Fatalf("r0's leases after 2 TTLs alive: %+v, %v; want 5", u.Running, err)
	}
	// The last renewal is at most a third of a TTL ago: after the kill
	// the leases live at most ttl more.
	rs[0].nc.Close()
	killed := time.Now()
	got := make(chan time.Duration, 1)
	go func() {
		lease, err := rs[1].l.Acquire(ctx, quota.Request{Provider: "stub", Model: "m"})
		if err != nil {
			t.Error(err)
		}
		got <- time.Since(killed)
		lease.Release(ctx, 0)
	}()
	select {
	case d := <-got:
		t.Logf("dead replica's leases freed %v after the kill (lease TTL %v)", d.Round(time.Millisecond), ttl)
		// A second of slack for a loaded machine's scheduling.
		if d > ttl+time.Second {
			t.Fatalf("leases freed %v after the kill, the TTL is %v", d, ttl)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the dead replica's leases were never freed")
	}
}

// A 429 reported on one replica stops the limit's calls on all of them
// until the cooldown ends.
func TestCooldownReachesEveryReplica(t *testing.T) {
	s := natstest.Start(t, natstest.Options{Provision: true})
	rs := replicas(t, s, 3, quota.Limits{Limits: []quota.Limit{{Key: "anthropic", Concurrent: 5}}})
	ctx := natstest.Context(t)
	const cool = 1500 * time.Millisecond
	start := time.Now()
	if err := rs[0].l.Cooldown(ctx, "anthropic", "claude", cool); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, r := range rs[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := r.l.Acquire(ctx, quota.Request{Provider: "anthropic", Model: "claude"})
			if err != nil {
				t.Error(err)
				return
			}
			defer lease.Release(ctx, 0)
			// Millisecond records: a few ms of rounding.
			if d := time.Since(start); d < cool-10*time.Millisecond {
				t.Errorf("a call went through %v into a %v cooldown", d, cool)
			}
		}()
	}
	wg.Wait()
	// Another provider's limits are not cooled.
	u, err := rs[2].l.Usage(ctx, "openai")
	if err != nil || !u.CoolUntil.IsZero() {
		t.Fatalf("openai cooled down: %+v %v", u, err)
	}
}

// A full queue refuses at once; a call that waits too long gives up.
func TestQueueBounds(t *testing.T) {
	s := natstest.Start(t, natstest.Options{Provision: true})
	rs := replicas(t, s, 1, quota.Limits{MaxQueue: 1, MaxWait: 300 * time.Millisecond, Limits: []quota.Limit{{Key: "p:m", Concurrent: 1}}})
	ctx := natstest.Context(t)
	l := rs[0].l
	held, err := l.Acquire(ctx, quota.Request{Provider: "p", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx, 0)
	queued := make(chan int, 1)
	waitErr := make(chan error, 1)
	go func() {
		_, err := l.Acquire(ctx, quota.Request{Provider: "p", Model: "m", Queued: func(p int) { queued <- p }})
		waitErr <- err
	}()
	if p := <-queued; p != 1 {
		t.Fatalf("queued at position %d, want 1", p)
	}
	if _, err := l.Acquire(ctx, quota.Request{Provider: "p", Model: "m"}); !errors.Is(err, quota.ErrQueueFull) {
		t.Fatalf("third call: %v, want ErrQueueFull", err)
	}
	if err := <-waitErr; !errors.Is(err, quota.ErrQueueTimeout) {
		t.Fatalf("waiting call: %v, want ErrQueueTimeout", err)
	}
	// Another model of the provider is not limited.
	free, err := l.Acquire(ctx, quota.Request{Provider: "p", Model: "other"})
	if err != nil {
		t.Fatal(err)
	}
	free.Release(ctx, 0)
}

// Requests per window: the fourth of three allowed waits until the first
// leaves the window; tokens are charged by estimate and corrected.
func TestPerWindowLimits(t *testing.T) {
	s := natstest.Start(t, natstest.Options{Provision: true})
	const window = time.Second
	rs := replicas(t, s, 2, quota.Limits{Window: window, Limits: []quota.Limit{
		{Key: "rpm", RequestsPerMinute: 3},
		{Key: "tpm", TokensPerMinute: 100},
	}})
	ctx := natstest.Context(t)
	start := time.Now()
	for i := range 4 {
		lease, err := rs[i%2].l.Acquire(ctx, quota.Request{Provider: "rpm", Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		lease.Release(ctx, 0)
	}
	if d := time.Since(start); d < window*8/10 {
		t.Fatalf("4 requests under 3 per %v took %v", window, d)
	}

	// 80 estimated, 10 used: 90 more fit at once.
	a, err := rs[0].l.Acquire(ctx, quota.Request{Provider: "tpm", Model: "m", Tokens: 80})
	if err != nil {
		t.Fatal(err)
	}
	a.Release(ctx, 10)
	t0 := time.Now()
	b, err := rs[1].l.Acquire(ctx, quota.Request{Provider: "tpm", Model: "m", Tokens: 90})
	if err != nil {
		t.Fatal(err)
	}
	b.Release(ctx, -1)
	if d := time.Since(t0); d > window/2 {
		t.Logf("note: the corrected call waited %v (a slow machine?)", d)
	}
	u, err := rs[0].l.Usage(ctx, "tpm")
	if err != nil || u.Tokens != 100 {
		t.Fatalf("tokens in the window: %d (%v), want 10 + 90", u.Tokens, err)
	}
	// One more token does not fit until the window moves on.
	t1 := time.Now()
	c, err := rs[0].l.Acquire(ctx, quota.Request{Provider: "tpm", Model: "m", Tokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	c.Release(ctx, 1)
	if d := time.Since(t1); d < window/2 {
		t.Fatalf("a token over the budget went through after %v", d)
	}
}

// The bucket's config key replaces every replica's own limits, and its
// deletion brings them back.
func TestConfigKeyReachesEveryReplica(t *testing.T) {
	s := natstest.Start(t, natstest.Options{Provision: true})
	own := quota.Limits{Limits: []quota.Limit{{Key: "a", Concurrent: 1}}}
	rs := replicas(t, s, 2, own)
	ctx := natstest.Context(t)
	shared := quota.Limits{Limits: []quota.Limit{{Key: "b", Concurrent: 7}}}
	if err := quota.PutLimits(ctx, s.JS, shared); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		natstest.Eventually(t, "the shared limits", func() bool {
			l := r.l.Limits().Limits
			return len(l) == 1 && l[0].Key == "b" && l[0].Concurrent == 7
		})
	}
	kv, err := s.JS.KeyValue(ctx, "LLMW_QUOTA")
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, quota.ConfigKey); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the replica's own limits again", func() bool {
		l := rs[1].l.Limits().Limits
		return len(l) == 1 && l[0].Key == "a"
	})
	// A key that does not parse leaves the limits in force.
	if _, err := kv.Put(ctx, quota.ConfigKey, []byte("limits: [{key: x, concurrent: -1}]")); err != nil {
		t.Fatal(err)
	}
	if err := quota.PutLimits(ctx, s.JS, shared); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the next valid limits", func() bool { return rs[0].l.Limits().Limits[0].Key == "b" })
}

func TestNewWithoutBucket(t *testing.T) {
	s := natstest.Start(t, natstest.Options{})
	if _, err := quota.New(natstest.Context(t), s.JS, quota.Config{}); !errors.Is(err, quota.ErrNotProvisioned) {
		t.Fatalf("New without LLMW_QUOTA: %v, want ErrNotProvisioned", err)
	}
}

func TestParse(t *testing.T) {
	l, err := quota.Parse([]byte(`
window: 1s
lease_ttl: 10s
limits:
  - key: anthropic
    concurrent: 5
    requests_per_minute: 60
  - key: team-key
    match: [openai, "anthropic:claude-sonnet-4-5"]
    tokens_per_minute: 100000
`))
	if err != nil {
		t.Fatal(err)
	}
	if l.Window != time.Second || l.LeaseTTL != 10*time.Second || len(l.Limits) != 2 {
		t.Fatalf("parsed %+v", l)
	}
	keys := func(ls []quota.Limit) (out []string) {
		for _, x := range ls {
			out = append(out, x.Key)
		}
		return out
	}
	if got := fmt.Sprint(keys(l.For("anthropic", "claude-sonnet-4-5"))); got != "[anthropic team-key]" {
		t.Errorf("limits of anthropic:claude-sonnet-4-5: %s", got)
	}
	if got := fmt.Sprint(keys(l.For("anthropic", "claude-haiku-4-5"))); got != "[anthropic]" {
		t.Errorf("limits of anthropic:claude-haiku-4-5: %s", got)
	}
	if got := fmt.Sprint(keys(l.For("openai", "gpt-4o"))); got != "[team-key]" {
		t.Errorf("limits of openai:gpt-4o: %s", got)
	}
	// JSON is YAML.
	if _, err := quota.Parse([]byte(`{"limits":[{"key":"openai","concurrent":2}]}`)); err != nil {
		t.Error(err)
	}
	for in, field := range map[string]string{
		`limits: [{key: a, concurrent: -1}]`:        "limits[0].concurrent",
		`limits: [{key: a}, {key: a}]`:              "limits[1].key",
		`limits: [{concurrent: 1}]`:                 "limits[0].key",
		`window: 1ms`:                               "window",
		`limits: [{key: a, tokens_per_minute: -5}]`: "limits[0].tokens_per_minute",
		`limits: [{key: a, match: [""]}]`:           "limits[0].match[0]",
		`limits: [{key: a, requests_per_minit: 5}]`: "requests_per_minit",
	} {
		_, err := quota.Parse([]byte(in))
		if !errors.Is(err, quota.ErrInvalidLimits) || !strings.Contains(err.Error(), field) {
			t.Errorf("Parse(%q): %v, want ErrInvalidLimits naming %s", in, err, field)
		}
	}
}

// Calls that wait are served round-robin across sessions: a session that
// queued three calls first does not make a later session's one call wait
// for all three.
func TestWaitingCallsTakeTurnsBySession(t *testing.T) {
	s := natstest.Start(t, natstest.Options{Provision: true})
	rs := replicas(t, s, 1, quota.Limits{Limits: []quota.Limit{{Key: "p", Concurrent: 1}}})
	ctx := natstest.Context(t)
	l := rs[0].l
	held, err := l.Acquire(ctx, quota.Request{Provider: "p", Model: "m", Session: "x"})
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 4)
	var wg sync.WaitGroup
	for _, name := range []string{"a1", "a2", "a3", "b1"} {
		queued := make(chan int, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Acquire(ctx, quota.Request{Provider: "p", Model: "m", Session: name[:1], Queued: func(p int) { queued <- p }})
			if err != nil {
				t.Error(err)
				return
			}
			order <- name
			lease.Release(ctx, 0)
		}()
		<-queued // in the queue before the next one comes
	}
	held.Release(ctx, 0)
	wg.Wait()
	close(order)
	var got []string
	for n := range order {
		got = append(got, n)
	}
	if want := "[a1 b1 a2 a3]"; fmt.Sprint(got) != want {
		t.Fatalf("served %v, want %s", got, want)
	}
}
