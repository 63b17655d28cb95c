package turn_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// An agent with a sub-agent: its model calls the sub-agent as a tool,
// the call runs as a child turn (its id derived from the parent's turn
// and call ids), and the parent's stream names the child as it starts
// and ends (llmw.tool.child) before the call's result, the child's
// answer.
func Example_subAgents() {
	srv, err := natstest.New(natstest.Options{}) // or nats.Connect(yourServerURL)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx := context.Background()
	// One scripted model for both turns: the parent calls researcher,
	// the child answers, the parent answers with the child's answer.
	svc, err := turn.New(srv.NC, turn.Config{
		Provider: llmtest.NewScripted(
			llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "researcher", Input: `{"prompt":"What is the capital of France?"}`}),
			llmtest.TextStep("Paris"),
			llmtest.TextStep("The researcher says: Paris."),
		),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	if err := svc.Start(ctx); err != nil { // provisions LLMW_AGENTS too
		panic(err)
	}
	defer svc.Stop(ctx)

	reg := agents.New(srv.JS)
	if _, _, err := reg.Put(ctx, events.AgentDefinition{Name: "researcher", Description: "Looks facts up.", Model: "scripted:small"}, agents.PutOptions{}); err != nil {
		panic(err)
	}
	if _, _, err := reg.Put(ctx, events.AgentDefinition{Name: "lead", Model: "scripted:large", Agents: []string{"researcher"}}, agents.PutOptions{}); err != nil {
		panic(err)
	}

	tc, err := turn.NewClient(srv.NC, turn.ClientOptions{})
	if err != nil {
		panic(err)
	}
	f, err := tc.Follow(ctx, tc.Subjects().EventsOfTurn("t1"))
	if err != nil {
		panic(err)
	}
	defer f.Stop()
	if err := tc.Submit(ctx, &events.TurnRequest{TurnID: "t1", Agent: "lead", Messages: []events.Message{events.UserText("Capital of France?")}}); err != nil {
		panic(err)
	}
	for it := range f.C() {
		if it.Err != nil {
			panic(it.Err)
		}
		switch ev := it.Event.(type) {
		case events.ToolChild:
			fmt.Printf("child %s %s (depth %d, same id as ChildTurnID: %v)\n", ev.Name, ev.Status, ev.Depth, ev.ChildTurnID == turn.ChildTurnID("t1", "call_1"))
		case events.ToolCallResult:
			fmt.Printf("result of %s: %s\n", ev.CallID, ev.Content)
		case events.TurnCompleted:
			fmt.Println("answer:", ev.Messages[len(ev.Messages)-1].Text())
			return
		}
	}
	// Output:
	// child researcher started (depth 1, same id as ChildTurnID: true)
	// child researcher completed (depth 1, same id as ChildTurnID: true)
	// result of call_1: Paris
	// answer: The researcher says: Paris.
}
