package turn

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// Cancels that the server sent to a replica as it stops are answered by
// it: Stop drains the cancel subscriptions, so that the cancels waiting
// in the replica's client when it stops are handled, not dropped. The
// replica's queue handler is held on the first of three cancels (a
// replica busy with other cancels) until Stop has begun to close the
// subscription; the two behind it are then pending in the client.
func TestStopAnswersTheCancelsItReceived(t *testing.T) {
	s, ns := internalService(t, Config{})
	ctx := natstest.Context(t)
	unknown, paused1, paused2 := "stop-unknown", "stop-paused-1", "stop-paused-2"
	pausedState(t, s, paused1)
	pausedState(t, s, paused2)
	next := rejectedOf(t, ns.NC, s, unknown)

	// The replica's queue subscription, with its handler held.
	held, release := make(chan struct{}, 3), make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	if err := s.queuedCancelSub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	sub, err := s.nc.QueueSubscribe(s.subjects.TurnCancelAny(), ServiceName, func(m *nats.Msg) {
		held <- struct{}{}
		<-release
		s.onQueuedCancel(m)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.queuedCancelSub = sub
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{unknown, paused1, paused2} {
		if err := ns.NC.Publish(s.subjects.TurnCancel(id), nil); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the first cancel never reached the replica")
	}
	// Pending counts the message being handled until its handler returns.
	natstest.Eventually(t, "the other two cancels pending in the replica's client", func() bool {
		n, _, _ := sub.Pending()
		return n == 3
	})

	stopped := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		stopped <- s.Stop(sctx)
	}()
	natstest.Eventually(t, "Stop to close the cancel subscription", func() bool {
		return sub.IsDraining() || !sub.IsValid()
	})
	releaseOnce()
	if err := <-stopped; err != nil {
		t.Fatalf("Stop = %v", err)
	}

	if rj := next(); rj.Code != events.RejectUnknownTurn || rj.Request != events.TypeTurnCancel {
		t.Fatalf("answer to the cancel of an id with no turn: %+v, want unknown_turn", rj)
	}
	for _, id := range []string{paused1, paused2} {
		e, err := s.stateKV.Get(ctx, kvKey(id))
		if err != nil {
			t.Fatal(err)
		}
		var st State
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			t.Fatal(err)
		}
		if st.Status != StatusAborted || st.Code != CodeCancelled {
			t.Fatalf("%s after its cancel reached the stopping replica: %s (%s), want aborted (cancelled)", id, st.Status, st.Code)
		}
	}
}
