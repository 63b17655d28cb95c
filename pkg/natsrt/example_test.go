package natsrt_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/natsutil"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natsrt"
)

// A turn's worker events: one seq across channels, subjects by session,
// turn and channel, CloudEvents in binary mode.
func ExampleEventPublisher() {
	srv, _ := natsutil.StartEmbedded(natsutil.EmbeddedOptions{})
	defer srv.Shutdown()
	nc, _ := nats.Connect(srv.URL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := natsrt.Provision(context.Background(), js, natsrt.ProvisionOptions{Memory: true}); err != nil {
		fmt.Println(err)
		return
	}
	ui, _ := nc.SubscribeSync("llmw.events.s1.>")

	ep := natsrt.NewPublisher(nc, natsrt.PublisherOptions{}).Turn("t1", "s1", 0)
	_, _ = ep.Publish(events.ChannelTurn, events.TypeTurnStarted, events.TurnStarted{TurnID: "t1", SessionID: "s1"})
	_, _ = ep.Delta(events.ChannelText, events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "Hi"), Step: 1})

	for range 2 {
		m, _ := ui.NextMsg(5 * time.Second)
		env, _ := events.DecodeEnvelope(m.Header, m.Data)
		fmt.Println(m.Subject, env.Type, env.Seq, string(env.Data))
	}
	// Output:
	// llmw.events.s1.t1.turn llmw.turn.started 1 {"turn_id":"t1","session_id":"s1"}
	// llmw.events.s1.t1.text llmw.block.delta 2 {"index":0,"text":"Hi","step":1}
}
