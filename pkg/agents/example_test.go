package agents_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
)

func Example() {
	srv, err := natstest.New(natstest.Options{Provision: true}) // LLMW_AGENTS included
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	reg := agents.New(srv.JS)

	def, err := agents.ParseDefinition([]byte(`
name: support
model: anthropic:claude-sonnet-4-5
system: You answer questions about orders.
tools: [lookup_order]
`))
	if err != nil {
		log.Fatal(err)
	}
	first, _, err := reg.Put(ctx, def, agents.PutOptions{})
	if err != nil {
		log.Fatal(err)
	}
	def.System = "You answer questions about orders, briefly."
	if _, _, err := reg.Put(ctx, def, agents.PutOptions{}); err != nil {
		log.Fatal(err)
	}

	latest, _ := reg.Resolve(ctx, "support")
	old, _ := reg.Resolve(ctx, events.AgentRef("support", first))
	fmt.Println("latest:", latest.System)
	fmt.Println("first: ", old.System)

	// What a turn naming the agent runs: its own fields over the
	// definition's, the revision pinned.
	req := events.TurnRequest{TurnID: "t-1", Agent: "support", Model: "openai:gpt-4.1-mini", Messages: []events.Message{events.UserText("where is order 7?")}}
	run := req.WithAgent(&latest.AgentDefinition, latest.Revision)
	fmt.Println(run.Model, run.System, run.Tools, run.Agent == latest.Ref())

	_ = reg.Delete(ctx, "support")
	_, err = reg.Resolve(ctx, "support")
	fmt.Println(errors.Is(err, agents.ErrUnknownAgent))
	// Output:
	// latest: You answer questions about orders, briefly.
	// first:  You answer questions about orders.
	// openai:gpt-4.1-mini You answer questions about orders, briefly. [lookup_order] true
	// true
}
