package turn_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/natsutil"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/turn"
)

// A turn service on an embedded NATS server (with an in-process scripted
// model instead of ingest), a turn submitted on P.turn.submit, and a UI
// following its worker events.
func Example() {
	emb, err := natsutil.StartEmbedded(natsutil.EmbeddedOptions{})
	if err != nil {
		panic(err)
	}
	defer emb.Shutdown()
	nc, err := nats.Connect(emb.URL())
	if err != nil {
		panic(err)
	}
	defer nc.Close()

	ctx := context.Background()
	svc, err := turn.New(nc, turn.Config{
		Provider: llmtest.NewScripted(llmtest.TextStep("Hello", ", world")),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	if err := svc.Start(ctx); err != nil {
		panic(err)
	}
	defer svc.Stop(ctx)

	// The UI subscribes before the turn is submitted.
	ui, err := nc.SubscribeSync(events.NewSubjects("").EventsOfTurn("t1"))
	if err != nil {
		panic(err)
	}
	env, err := events.NewEnvelope(events.Source("example", "1"), events.TypeTurnSubmit, events.TurnRequest{
		TurnID: "t1", Model: "scripted:demo", Messages: []events.Message{events.UserText("Say hello")},
	})
	if err != nil {
		panic(err)
	}
	js, _ := jetstream.New(nc)
	msg := &nats.Msg{Subject: events.NewSubjects("").TurnSubmit(), Header: nats.Header(env.BinaryHeader()), Data: env.Data}
	if _, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID("t1")); err != nil {
		panic(err)
	}
	// The UI appends the deltas as they come: the model streamed "Hello"
	// and ", world", which arrive as two deltas or, when the second was
	// coalesced into the first while it waited to be stored, as one.
	var text strings.Builder
	for {
		m, err := ui.NextMsg(10 * time.Second)
		if err != nil {
			panic(err)
		}
		e, _ := events.DecodeEnvelope(m.Header, m.Data)
		switch e.Type {
		case events.TypeBlockDelta:
			d, _ := events.DecodeData[events.WorkerBlockDelta](e)
			text.WriteString(d.Content)
		case events.TypeTurnCompleted:
			c, _ := events.DecodeData[events.TurnCompleted](e)
			fmt.Printf("streamed: %s\n", text.String())
			fmt.Printf("completed: %s\n", c.Messages[len(c.Messages)-1].Text())
			return
		}
	}
	// Output:
	// streamed: Hello, world
	// completed: Hello, world
}

// A turn's worker events: one seq across channels, subjects by session,
// turn and channel, CloudEvents in binary mode.
func ExampleEventPublisher() {
	srv, _ := natsutil.StartEmbedded(natsutil.EmbeddedOptions{})
	defer srv.Shutdown()
	nc, _ := nats.Connect(srv.URL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := provision.Provision(context.Background(), js, provision.Options{Memory: true}); err != nil {
		fmt.Println(err)
		return
	}
	ui, _ := nc.SubscribeSync("llmw.events.s1.>")

	ep := turn.NewPublisher(nc, turn.PublisherOptions{}).Turn("t1", "s1", turn.Position{})
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
