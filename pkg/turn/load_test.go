package turn_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// barrier is a scripted model step that holds every call until n calls
// are in flight at once.
type barrier struct {
	n       int64
	in      atomic.Int64
	reached chan struct{}
	once    sync.Once
}

func newBarrier(n int) *barrier { return &barrier{n: int64(n), reached: make(chan struct{})} }

func (b *barrier) step(chunks ...string) llmtest.Script {
	s := llmtest.TextStep(chunks...)
	s.OnCall = func(ctx context.Context, _ *llm.Request) error {
		if b.in.Add(1) >= b.n {
			b.once.Do(func() { close(b.reached) })
		}
		select {
		case <-b.reached:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s
}

// submitMany publishes n turn requests asynchronously.
func (e *env) submitMany(t testing.TB, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		ids[i] = prefix + "-" + strconv.Itoa(i)
		env, err := events.NewEnvelope(events.Source("test", "client"), events.TypeTurnSubmit, events.TurnRequest{
			TurnID: ids[i], Model: "test:m", Messages: []events.Message{events.UserText("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		m := &nats.Msg{Subject: e.subj.TurnSubmit(), Header: nats.Header(env.BinaryHeader()), Data: env.Data}
		m.Header.Set(events.HeaderMsgID, ids[i])
		if _, err := e.js.PublishMsgAsync(m); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(waitFor):
		t.Fatal("publishing the requests timed out")
	}
	return ids
}

// counter counts the terminal events of every turn.
type counter struct {
	completed, other atomic.Int64
}

func (e *env) countEnds(t testing.TB) *counter {
	c := &counter{}
	sub, err := e.nc.Subscribe("llmw.events.*.*.turn", func(m *nats.Msg) {
		switch m.Header.Get(events.HeaderType) {
		case events.TypeTurnCompleted:
			c.completed.Add(1)
		case events.TypeTurnFailed, events.TypeTurnAborted:
			c.other.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return c
}

// 1000 turns run at once on one replica (every model call waits until all
// 1000 are in flight) and all complete.
func TestThousandConcurrentTurns(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	const n = 1000
	e := newEnv(t)
	b := newBarrier(n)
	p := llmtest.NewScripted()
	p.SetFallback(b.step("o", "k"))
	e.scripted(p)
	// Ingest opens the provider call before it replies, so the reply
	// waits for the barrier too.
	e.startTurn(turn.Config{AckWait: time.Minute, IngestTimeout: time.Minute})
	c := e.countEnds(t)
	e.submitMany(t, "load", n)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%d of %d turns completed (%d failed or aborted); %d model calls in flight",
				c.completed.Load(), n, c.other.Load(), b.in.Load())
		}
	})
	natstest.EventuallyWithin(t, 2*time.Minute, "every turn to end", func() bool {
		return c.completed.Load()+c.other.Load() >= n
	})
	if c.completed.Load() != n || c.other.Load() != 0 {
		t.Fatalf("%d completed, %d failed or aborted", c.completed.Load(), c.other.Load())
	}
	e.consumerIdle(t)
}
