package emit_test

import (
	"fmt"
	"time"

	"github.com/llmworker/llmworker/pkg/emit"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// A turn's worker events: one seq across channels, subjects by session,
// turn and channel, CloudEvents in binary mode.
func ExampleEventPublisher() {
	srv, err := natstest.New(natstest.Options{Provision: true})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	nc := srv.NC
	ui, _ := nc.SubscribeSync("llmw.events.s1.>")

	ep := emit.NewPublisher(nc, emit.PublisherOptions{}).Turn("t1", "s1", emit.Position{})
	_, _ = ep.Publish(events.TurnStarted{TurnID: "t1", SessionID: "s1"})
	_, _ = ep.Publish(events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "Hi"), Step: 1})

	for range 2 {
		m, _ := ui.NextMsg(5 * time.Second)
		env, _ := events.DecodeEnvelope(m.Header, m.Data)
		fmt.Println(m.Subject, env.Type, env.Seq, string(env.Data))
	}
	// Output:
	// llmw.events.s1.t1.turn llmw.turn.started 1 {"turn_id":"t1","session_id":"s1"}
	// llmw.events.s1.t1.text llmw.block.delta 2 {"index":0,"text":"Hi","step":1}
}
