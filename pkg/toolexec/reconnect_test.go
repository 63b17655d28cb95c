package toolexec_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

// A slot whose connection reconnected runs the calls it is given one
// after the other, none left for a redelivery. A pull request the slot
// made before a reconnect stays at the server until it expires, and
// keeps its interest once the connection subscribes the slot's inbox
// again: a slot that pulled on through reconnects would have several
// requests standing, each able to deliver a call into the slot's buffer
// of one while it runs another, and the call beyond it would be dropped
// (nats: slow consumer) and wait for AckWait. The test reconnects the
// slot's connection twice, makes three calls at once, and waits for the
// three results well within AckWait.
func TestReconnectedSlotDropsNoCall(t *testing.T) {
	e := start(t)
	b := newBlocker()
	const ackWait = 30 * time.Second
	_, nc := replica(t, e.url, toolexec.Config{Concurrency: 1, AckWait: ackWait}, b.tool("a"))

	// The slot's pull requests, as the server receives them.
	var pulls atomic.Int32
	sub, err := e.nc.Subscribe(jetstream.DefaultAPIPrefix+"CONSUMER.MSG.NEXT."+events.StreamToolCalls+"."+toolexec.ConsumerName("block"), func(*nats.Msg) { pulls.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	cons, err := e.js.Consumer(ctx(t), events.StreamToolCalls, toolexec.ConsumerName("block"))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the slot's pull request standing", func() bool {
		info, err := cons.Info(ctx(t))
		return err == nil && info.NumWaiting == 1
	})
	for i := 1; i <= 2; i++ {
		seen := pulls.Load()
		if err := nc.ForceReconnect(); err != nil {
			t.Fatal(err)
		}
		natstest.Eventually(t, fmt.Sprintf("reconnect %d and the slot's pull after it", i), func() bool {
			return nc.Stats().Reconnects == uint64(i) && nc.IsConnected() && pulls.Load() > seen
		})
	}

	rt := remote(t, e, "block")
	var wg sync.WaitGroup
	outs := make([]string, 3)
	errs := make([]error, 3)
	began := time.Now()
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = rt.Execute(call(ctx(t), "t1", fmt.Sprintf("c%d", i)), nil)
		}()
	}
	<-b.started // the slot runs one; the others wait for it
	close(b.release)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(ackWait / 3):
		t.Fatalf("%d of 3 calls ran within %s; a call the slot dropped waits for AckWait (%s)", b.ran.Load(), ackWait/3, ackWait)
	}
	for i := range 3 {
		if errs[i] != nil || outs[i] != "done by a" {
			t.Errorf("call c%d: %q, %v", i, outs[i], errs[i])
		}
	}
	t.Logf("three calls in %s", time.Since(began).Round(time.Millisecond))
}
