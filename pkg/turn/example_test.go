package turn_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/natsutil"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
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
		Provider: llm.NewScripted(llm.TextStep("Hello", ", world")),
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
	for {
		m, err := ui.NextMsg(10 * time.Second)
		if err != nil {
			panic(err)
		}
		e, _ := events.DecodeEnvelope(m.Header, m.Data)
		switch e.Type {
		case events.TypeBlockDelta:
			d, _ := events.DecodeData[events.WorkerBlockDelta](e)
			fmt.Printf("seq %d delta %q\n", e.Seq, d.Content)
		case events.TypeTurnCompleted:
			c, _ := events.DecodeData[events.TurnCompleted](e)
			fmt.Printf("seq %d completed: %s\n", e.Seq, c.Messages[len(c.Messages)-1].Text())
			return
		}
	}
	// Output:
	// seq 4 delta "Hello"
	// seq 5 delta ", world"
	// seq 8 completed: Hello, world
}
