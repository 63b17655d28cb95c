package natsrt_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/natsutil"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natsrt"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is one embedded server with a client connection.
type env struct {
	nc *nats.Conn
	js jetstream.JetStream
}

func start(t testing.TB, provision bool) env {
	t.Helper()
	e, err := natsutil.StartEmbedded(natsutil.EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	nc, err := nats.Connect(e.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if provision {
		if err := natsrt.Provision(ctx(t), js, natsrt.ProvisionOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return env{nc: nc, js: js}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestProvisionTwiceAndConcurrently(t *testing.T) {
	e := start(t, false)
	c := ctx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- natsrt.Provision(c, e.js, natsrt.ProvisionOptions{})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Provision: %v", err)
		}
	}
	if err := natsrt.Provision(c, e.js, natsrt.ProvisionOptions{}); err != nil {
		t.Fatalf("second Provision: %v", err)
	}

	// The configuration DESIGN.md §5–§8 asks for.
	want := map[string]struct {
		ret      jetstream.RetentionPolicy
		subjects []string
		maxAge   time.Duration
	}{
		"LLMW_TURNS":       {jetstream.WorkQueuePolicy, []string{"llmw.turn.submit", "llmw.turn.resume"}, 0},
		"LLMW_EVENTS":      {jetstream.LimitsPolicy, []string{"llmw.events.>"}, 24 * time.Hour},
		"LLMW_TOOLCALLS":   {jetstream.WorkQueuePolicy, []string{"llmw.tool.call.>"}, 24 * time.Hour},
		"LLMW_TOOLRESULTS": {jetstream.LimitsPolicy, []string{"llmw.tool.result.>"}, 24 * time.Hour},
	}
	for name, w := range want {
		st, err := e.js.Stream(c, name)
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
	if st, _ := e.js.Stream(c, "LLMW_TOOLRESULTS"); st.CachedInfo().Config.Duplicates < 2*time.Minute {
		t.Errorf("LLMW_TOOLRESULTS duplicate window %v is shorter than a few redeliveries", st.CachedInfo().Config.Duplicates)
	}
	for _, b := range []string{"LLMW_SESSIONS", "LLMW_TOOLS", "LLMW_HOOKS", "LLMW_TURN_STATE"} {
		kv, err := e.js.KeyValue(c, b)
		if err != nil {
			t.Fatalf("bucket %s: %v", b, err)
		}
		st, err := kv.Status(c)
		if err != nil || st.History() < 1 {
			t.Errorf("bucket %s: history %d, %v", b, st.History(), err)
		}
	}
}

func TestProvisionPrefix(t *testing.T) {
	e := start(t, false)
	if err := natsrt.Provision(ctx(t), e.js, natsrt.ProvisionOptions{Prefix: "acme", Memory: true, EventsMaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	st, err := e.js.Stream(ctx(t), events.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if cfg.Subjects[0] != "acme.events.>" || cfg.MaxAge != time.Hour || cfg.Storage != jetstream.MemoryStorage {
		t.Errorf("events stream: %v %v %v", cfg.Subjects, cfg.MaxAge, cfg.Storage)
	}
}
