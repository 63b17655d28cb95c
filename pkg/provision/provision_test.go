package provision_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/provision"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestProvisionTwiceAndConcurrently(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	c := natstest.Context(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- provision.Provision(c, e.JS, provision.Options{})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Provision: %v", err)
		}
	}
	if err := provision.Provision(c, e.JS, provision.Options{}); err != nil {
		t.Fatalf("second Provision: %v", err)
	}

	// The configuration docs/protocol.md documents.
	want := map[string]struct {
		ret      jetstream.RetentionPolicy
		subjects []string
		maxAge   time.Duration
	}{
		"LLMW_TURNS":       {jetstream.WorkQueuePolicy, []string{"llmw.turn.submit", "llmw.turn.resume"}, 24 * time.Hour},
		"LLMW_EVENTS":      {jetstream.LimitsPolicy, []string{"llmw.emit.>"}, 24 * time.Hour},
		"LLMW_TOOLCALLS":   {jetstream.WorkQueuePolicy, []string{"llmw.tool.call.>"}, 24 * time.Hour},
		"LLMW_TOOLRESULTS": {jetstream.LimitsPolicy, []string{"llmw.tool.result.>"}, 24 * time.Hour},
	}
	for name, w := range want {
		st, err := e.JS.Stream(c, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		cfg := st.CachedInfo().Config
		if cfg.Retention != w.ret || cfg.MaxAge != w.maxAge || cfg.Storage != jetstream.FileStorage {
			t.Errorf("%s: retention %v max age %v storage %v", name, cfg.Retention, cfg.MaxAge, cfg.Storage)
		}
		if len(cfg.Subjects) != len(w.subjects) {
			t.Fatalf("%s: subjects %v, want %v", name, cfg.Subjects, w.subjects)
		}
		for i := range w.subjects {
			if cfg.Subjects[i] != w.subjects[i] {
				t.Errorf("%s: subjects %v, want %v", name, cfg.Subjects, w.subjects)
			}
		}
	}
	if st, _ := e.JS.Stream(c, "LLMW_TOOLRESULTS"); st.CachedInfo().Config.Duplicates < 2*time.Minute {
		t.Errorf("LLMW_TOOLRESULTS duplicate window %v is shorter than a few redeliveries", st.CachedInfo().Config.Duplicates)
	}
	// Sessions expire 30 days after their last turn; the other buckets'
	// keys expire one by one (per-key TTLs) or live as long as their
	// writer wants them.
	ttls := map[string]time.Duration{"LLMW_SESSIONS": 30 * 24 * time.Hour, "LLMW_TOOLS": 0, "LLMW_HOOKS": 0, "LLMW_TURN_STATE": 0, "LLMW_QUOTA": 0}
	for b, ttl := range ttls {
		kv, err := e.JS.KeyValue(c, b)
		if err != nil {
			t.Fatalf("bucket %s: %v", b, err)
		}
		st, err := kv.Status(c)
		if err != nil || st.History() != 1 || st.TTL() != ttl {
			t.Errorf("bucket %s: history %d, TTL %v (want 1, %v), %v", b, st.History(), st.TTL(), ttl, err)
		}
	}
	// Media live as long as the transcripts that name them; a completion
	// request too large for a message only until ingest has read it
	// (docs/protocol.md §2).
	for b, ttl := range map[string]time.Duration{"LLMW_MEDIA": 30 * 24 * time.Hour, "LLMW_REQUESTS": time.Hour} {
		obs, err := e.JS.ObjectStore(c, b)
		if err != nil {
			t.Fatalf("object store %s: %v", b, err)
		}
		st, err := obs.Status(c)
		if err != nil {
			t.Fatalf("object store %s: %v", b, err)
		}
		if st.TTL() != ttl {
			t.Errorf("object store %s: TTL %v, want %v", b, st.TTL(), ttl)
		}
	}
	// Agent definitions keep 64 revisions per name: "NAME@REV" resolves
	// while the history holds REV (docs/protocol.md §2).
	kv, err := e.JS.KeyValue(c, "LLMW_AGENTS")
	if err != nil {
		t.Fatalf("bucket LLMW_AGENTS: %v", err)
	}
	if st, err := kv.Status(c); err != nil || st.History() != 64 || st.TTL() != 0 {
		t.Errorf("bucket LLMW_AGENTS: history %d, TTL %v (want 64, 0), %v", st.History(), st.TTL(), err)
	}
}

// The operator's limits (`llmworker provision`, ApplyLimits) hold: a
// service that provisions at start with the defaults keeps them, and a
// later ApplyLimits replaces them; a negative limit is none.
func TestProvisionKeepsTheOperatorsLimits(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	c := natstest.Context(t)
	limits := func() (events, turns, sessions time.Duration) {
		t.Helper()
		for name, d := range map[string]*time.Duration{"LLMW_EVENTS": &events, "LLMW_TURNS": &turns} {
			st, err := e.JS.Stream(c, name)
			if err != nil {
				t.Fatal(err)
			}
			*d = st.CachedInfo().Config.MaxAge
		}
		kv, err := e.JS.KeyValue(c, "LLMW_SESSIONS")
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(c)
		if err != nil {
			t.Fatal(err)
		}
		return events, turns, st.TTL()
	}
	op := provision.Options{ApplyLimits: true, EventsMaxAge: 72 * time.Hour, TurnsMaxAge: -1, SessionsTTL: time.Hour}
	if err := provision.Provision(c, e.JS, op); err != nil {
		t.Fatal(err)
	}
	if ev, tu, se := limits(); ev != 72*time.Hour || tu != 0 || se != time.Hour {
		t.Fatalf("after provision: events %v turns %v sessions %v, want 72h 0 1h", ev, tu, se)
	}
	if err := provision.Provision(c, e.JS, provision.Options{}); err != nil { // a service's start
		t.Fatal(err)
	}
	if ev, tu, se := limits(); ev != 72*time.Hour || tu != 0 || se != time.Hour {
		t.Errorf("a service's start changed the limits: events %v turns %v sessions %v", ev, tu, se)
	}
	if err := provision.Provision(c, e.JS, provision.Options{ApplyLimits: true}); err != nil {
		t.Fatal(err)
	}
	if ev, tu, se := limits(); ev != 24*time.Hour || tu != 24*time.Hour || se != 30*24*time.Hour {
		t.Errorf("provision with the defaults: events %v turns %v sessions %v, want the defaults", ev, tu, se)
	}
}

func TestProvisionPrefix(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	if err := provision.Provision(natstest.Context(t), e.JS, provision.Options{Prefix: "acme", Memory: true, EventsMaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	st, err := e.JS.Stream(natstest.Context(t), events.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if cfg.Subjects[0] != "acme.emit.>" || cfg.SubjectTransform == nil || cfg.SubjectTransform.Destination != "acme.events.>" ||
		cfg.RePublish == nil || cfg.RePublish.Destination != "acme.events.>" || cfg.MaxAge != time.Hour || cfg.Storage != jetstream.MemoryStorage {
		t.Errorf("events stream: %v %v %v", cfg.Subjects, cfg.MaxAge, cfg.Storage)
	}
}

// A second installation with another prefix on the same account would
// rewrite the shared streams' subjects and cut the first one off: it is
// refused with an error naming the stream and both prefixes, and the
// first installation's streams are left as they were.
func TestProvisionRefusesAnotherPrefix(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	c := natstest.Context(t)
	if err := provision.Provision(c, e.JS, provision.Options{Prefix: "acme"}); err != nil {
		t.Fatal(err)
	}
	err := provision.Provision(c, e.JS, provision.Options{Prefix: "other"})
	if !errors.Is(err, provision.ErrPrefixConflict) {
		t.Fatalf("err = %v, want ErrPrefixConflict", err)
	}
	for _, want := range []string{`"other"`, "acme.", "LLMW_"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	for _, name := range []string{events.StreamEvents, events.StreamTurns} {
		st, err := e.JS.Stream(c, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, subj := range st.CachedInfo().Config.Subjects {
			if !strings.HasPrefix(subj, "acme.") {
				t.Errorf("%s subjects %v: the first installation's were changed", name, st.CachedInfo().Config.Subjects)
			}
		}
	}
	// The same prefix again is fine.
	if err := provision.Provision(c, e.JS, provision.Options{Prefix: "acme"}); err != nil {
		t.Fatalf("same prefix: %v", err)
	}
}

// A deployment provisioned before the buckets had per-key TTLs: Provision
// turns them on in LLMW_TOOLS (tool hosts' claims expire, docs/protocol.md
// §6) and LLMW_TURN_STATE without losing what the buckets hold.
func TestProvisionAddsKeyTTLsToExistingBuckets(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	c := natstest.Context(t)
	for _, cfg := range provision.BucketConfigs(provision.Options{}) {
		cfg.LimitMarkerTTL = 0 // as the buckets were first created
		kv, err := e.JS.CreateKeyValue(c, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.PutString(c, "old", `{"kept":true}`); err != nil {
			t.Fatal(err)
		}
	}
	if err := provision.Provision(c, e.JS, provision.Options{}); err != nil {
		t.Fatalf("Provision over the old buckets: %v", err)
	}
	for _, b := range []string{events.BucketTools, events.BucketTurnState} {
		kv, err := e.JS.KeyValue(c, b)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := kv.Get(c, "old"); err != nil || string(v.Value()) != `{"kept":true}` {
			t.Fatalf("%s: the existing key after Provision: %v", b, err)
		}
		if _, err := kv.Create(c, "short", []byte("x"), jetstream.KeyTTL(time.Second)); err != nil {
			t.Fatalf("%s: a key with a TTL: %v", b, err)
		}
		natstest.Eventually(t, b+" key to expire", func() bool {
			_, err := kv.Get(c, "short")
			return errors.Is(err, jetstream.ErrKeyNotFound)
		})
	}
}

// VerifyOnly changes nothing: on an empty account it names the first
// missing stream (a service whose identity may not create one cannot
// start before `llmworker provision`), and once provisioned it passes.
func TestProvisionVerifyOnly(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	ctx := natstest.Context(t)
	err := provision.Provision(ctx, e.JS, provision.Options{Memory: true, VerifyOnly: true})
	if !errors.Is(err, provision.ErrNotProvisioned) || !strings.Contains(err.Error(), events.StreamTurns) {
		t.Fatalf("verify on an empty account: %v, want ErrNotProvisioned naming %s", err, events.StreamTurns)
	}
	if names := e.JS.StreamNames(ctx); names.Err() == nil {
		for n := range names.Name() {
			t.Errorf("verify created stream %s", n)
		}
	}
	if err := provision.Provision(ctx, e.JS, provision.Options{Memory: true}); err != nil {
		t.Fatal(err)
	}
	if err := provision.Provision(ctx, e.JS, provision.Options{Memory: true, VerifyOnly: true}); err != nil {
		t.Fatalf("verify after provisioning: %v", err)
	}
}
