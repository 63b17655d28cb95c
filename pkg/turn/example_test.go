package turn_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// A turn service on an embedded NATS server (with an in-process scripted
// model instead of ingest), and a client that submits a turn and follows
// its worker events as a UI does. A program of your own does the client's
// part against a running installation: nats.Connect(its URL), then
// turn.NewClient, Follow and Submit.
func Example() {
	srv, err := natstest.New(natstest.Options{}) // or nats.Connect(yourServerURL)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	nc := srv.NC

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

	tc, err := turn.NewClient(nc, turn.ClientOptions{})
	if err != nil {
		panic(err)
	}
	// Follow before Submit: the follower replays the turn from its first
	// event, so nothing is missed whenever it is published.
	f, err := tc.Follow(ctx, tc.Subjects().EventsOfTurn("t1"))
	if err != nil {
		panic(err)
	}
	defer f.Stop()
	if err := tc.Submit(ctx, &events.TurnRequest{
		TurnID: "t1", Model: "scripted:demo", Messages: []events.Message{events.UserText("Say hello")},
	}); err != nil {
		panic(err)
	}
	// The UI appends the deltas as they come: the model streamed "Hello"
	// and ", world", which arrive as two deltas or, when the second was
	// coalesced into the first while it waited to be stored, as one.
	var text strings.Builder
	for it := range f.C() {
		if it.Err != nil {
			panic(it.Err)
		}
		switch ev := it.Event.(type) {
		case events.WorkerBlockDelta:
			text.WriteString(ev.Content)
		case events.TurnCompleted:
			fmt.Printf("streamed: %s\n", text.String())
			fmt.Printf("completed: %s\n", ev.Messages[len(ev.Messages)-1].Text())
			return
		}
	}
	// Output:
	// streamed: Hello, world
	// completed: Hello, world
}
