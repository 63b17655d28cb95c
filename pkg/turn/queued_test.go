package turn_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/quota"
	"github.com/llmworker/llmworker/pkg/turn"
)

// A model call that a full provider limit holds in ingest's queue shows
// llmw.turn.queued on the turn's subject while it waits, and the step's
// first delta comes after it, once the limit lets the call through.
func TestQueuedCallShowsOnTheTurnBeforeItsFirstDelta(t *testing.T) {
	e := newEnv(t)
	ctx := natstest.Context(t)
	if _, err := e.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: events.BucketQuota}); err != nil {
		t.Fatal(err)
	}
	lim, err := quota.New(ctx, e.js, quota.Config{Replica: "ingest-a", Logger: quietLogger(), Limits: quota.Limits{
		Limits: []quota.Limit{{Key: "test", Concurrent: 1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lim.Close() })
	// Another call holds the only place.
	holder, err := lim.Acquire(ctx, quota.Request{Provider: "test", Model: "m", Session: "other"})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := ingest.New(e.connect(), ingest.Config{
		Providers: map[string]ingest.Factory{"test": ingest.Static(llmtest.NewScripted(llmtest.TextStep("Hello there.")))},
		Logger:    quietLogger(), Quota: lim,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	e.startTurn(turn.Config{})

	id := newID("queued")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, SessionID: "s-queued", Model: "test:m", Messages: []events.Message{events.UserText("Hi")}})
	evs := w.waitType(events.TypeTurnQueued)
	if i := find(evs, events.TypeBlockStart); i >= 0 {
		t.Fatalf("a block started while the call was held: %s", describe(evs))
	}
	var q events.TurnQueued
	if err := json.Unmarshal(evs[find(evs, events.TypeTurnQueued)].Data, &q); err != nil {
		t.Fatal(err)
	}
	if want := (events.TurnQueued{Step: 1, Attempt: 1, Model: "test:m", Position: 1}); q != want {
		t.Errorf("llmw.turn.queued %+v, want %+v", q, want)
	}
	if evs[find(evs, events.TypeTurnQueued)].Subject != e.subj.Events("s-queued", id, events.ChannelTurn) {
		t.Errorf("queued on %s", evs[find(evs, events.TypeTurnQueued)].Subject)
	}

	holder.Release(ctx, 0)
	done := w.completed()
	if got := done.Messages[len(done.Messages)-1].Text(); got != "Hello there." {
		t.Errorf("answer %q", got)
	}
	evs = w.events()
	checkSeq(t, evs)
	qi, si, di := find(evs, events.TypeTurnQueued), find(evs, events.TypeTurnStep), find(evs, events.TypeBlockDelta)
	if !(si < qi && qi < di) || count(evs, events.TypeTurnQueued) != 1 {
		t.Errorf("want llmw.turn.step, then one llmw.turn.queued, then the first delta: %s", describe(evs))
	}
}
