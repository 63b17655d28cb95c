package turn_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// A replica's fetch asks the server to end its pull (the pull request's
// expires) half a second before the replica stops reading it, so that
// the server's end, which follows every request it delivered, comes
// first; and the replica pulls again when a pull ended. The test reads
// the replica's pull requests as the server receives them.
func TestFetchEndsItsPullBeforeItStopsReading(t *testing.T) {
	e := newEnv(t)
	pulls := make(chan *nats.Msg, 16)
	sub, err := e.nc.ChanSubscribe(jetstream.DefaultAPIPrefix+"CONSUMER.MSG.NEXT."+events.StreamTurns+"."+turn.ConsumerName, pulls)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	e.startTurn(turn.Config{})
	var first *nats.Msg
	for i := range 2 {
		select {
		case m := <-pulls:
			if i == 0 {
				first = m
			}
		case <-time.After(waitFor):
			t.Fatalf("no pull request %d within %s", i+1, waitFor)
		}
	}
	var req struct {
		Expires time.Duration `json:"expires"`
	}
	if err := json.Unmarshal(first.Data, &req); err != nil || req.Expires <= 0 {
		t.Fatalf("pull request %s: %v, want one that expires", first.Data, err)
	}
	if margin := turn.FetchWait - req.Expires; margin < 400*time.Millisecond {
		t.Fatalf("the pull expires after %s and the replica reads it for %s: the server's end comes %s before the replica stops reading, want at least 400ms", req.Expires, turn.FetchWait, margin)
	}
}

// A request delivered to a fetch that dropped it unread (a fetch the
// client ended before it read the delivery: Service.fetchLoop) is the
// consumer's again after AckWait, and runs then: the test waits AckWait
// for the turn to start.
func TestRequestAFetchDroppedRunsAfterAckWait(t *testing.T) {
	e := newEnv(t)
	e.scripted(llmtest.NewScripted(llmtest.TextStep("hello")))
	const ackWait = 2 * time.Second
	// The first replica makes the consumer; stopped, it fetches no more.
	first := e.startTurn(turn.Config{AckWait: ackWait})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	cons, err := e.js.Consumer(ctx, events.StreamTurns, turn.ConsumerName)
	if err != nil {
		t.Fatal(err)
	}
	id := newID("dropped")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("hi")}})
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(waitFor))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := <-batch.Messages()
	if !ok {
		t.Fatalf("the request was not delivered: %v", batch.Error())
	}
	delivered := time.Now()
	if md, err := m.Metadata(); err != nil || md.NumDelivered != 1 {
		t.Fatalf("delivery %+v, %v: want the request's first", md, err)
	}

	e.startTurn(turn.Config{AckWait: ackWait})
	w.waitType(events.TypeTurnStarted)
	if since := time.Since(delivered); since < ackWait-100*time.Millisecond {
		t.Fatalf("the turn started %s after the dropped delivery, before AckWait (%s) made the request the consumer's again", since, ackWait)
	}
	if end := w.waitEnd(); end.Type != events.TypeTurnCompleted {
		t.Fatalf("the turn ended %s, want completed", end.Type)
	}
}
