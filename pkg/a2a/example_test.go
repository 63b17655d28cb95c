package a2a_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/a2a"
	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// a2a-go's client talking to an agent of the registry: the client is
// resolved from the agent's card and sends a message; the answer is the
// task of the turn the message started, completed, with the answer as an
// artifact. Against `llmworker up` only the client's part is needed, with
// the card at http://127.0.0.1:8080/a2a/NAME.
func Example() {
	// A turn service whose model is scripted, an agent in the registry,
	// and the A2A server (which the gateway serves on its --http address).
	srv, err := natstest.New(natstest.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx := context.Background()
	svc, err := turn.New(srv.NC, turn.Config{
		Provider: llmtest.NewScripted(llmtest.TextStep("Paris", " is the capital.")),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	if err := svc.Start(ctx); err != nil {
		panic(err)
	}
	defer svc.Stop(ctx)
	js, err := jetstream.New(srv.NC)
	if err != nil {
		panic(err)
	}
	def := events.AgentDefinition{Name: "capitals", Description: "Knows the capitals.", Model: "scripted:demo"}
	if _, _, err := agents.New(js).Put(ctx, def, agents.PutOptions{}); err != nil {
		panic(err)
	}
	s, err := a2a.New(ctx, srv.NC, a2a.Config{})
	if err != nil {
		panic(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	defer s.Close()

	// The client.
	card, err := agentcard.DefaultResolver.Resolve(ctx, hs.URL+"/a2a/capitals")
	if err != nil {
		panic(err)
	}
	c, err := a2aclient.NewFromCard(ctx, card)
	if err != nil {
		panic(err)
	}
	defer c.Destroy()
	res, err := c.SendMessage(ctx, &spec.SendMessageRequest{
		Message: spec.NewMessage(spec.MessageRoleUser, spec.NewTextPart("Capital of France?")),
	})
	if err != nil {
		panic(err)
	}
	task := res.(*spec.Task)
	fmt.Println(card.Name, card.Description)
	fmt.Println(task.Status.State)
	fmt.Println(task.Artifacts[0].Parts[0].Text())
	// Output:
	// capitals Knows the capitals.
	// TASK_STATE_COMPLETED
	// Paris is the capital.
}
