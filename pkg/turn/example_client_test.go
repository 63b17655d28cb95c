package turn_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/builtin"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/turn"
)

// A turn paused for a person's approval, and the client that settles it:
// the hook chain pauses every delete_file call; the client sees
// llmw.turn.paused with the pending calls and publishes the decisions with
// Resume. The turn then runs the approved call and completes.
func ExampleClient_Resume() {
	srv, err := natstest.New(natstest.Options{}) // or nats.Connect(yourServerURL)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx := context.Background()

	type deleteArgs struct {
		Path string `json:"path"`
	}
	deleteFile := tool.Must("delete_file", "Deletes a file.",
		func(_ context.Context, a deleteArgs) (string, error) { return "deleted " + a.Path, nil })
	hooks := &hook.Chain{}
	ask, err := builtin.RequireApproval{Pattern: "^delete_file$"}.Hook()
	if err != nil {
		panic(err)
	}
	if err := hooks.BeforeToolCall(ask, hook.Options{Name: "ask-first"}); err != nil {
		panic(err)
	}
	stop := startTurnService(ctx, srv, turn.Config{
		Provider: llmtest.NewScripted(
			llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "delete_file", Input: `{"path":"/tmp/old.log"}`}),
			llmtest.TextStep("Deleted /tmp/old.log."),
		),
		Hooks: hooks, Tools: []tool.Tool{deleteFile},
	})
	defer stop()

	// The client's side.
	tc, err := turn.NewClient(srv.NC, turn.ClientOptions{})
	if err != nil {
		panic(err)
	}
	f, err := tc.Follow(ctx, tc.Subjects().EventsOfTurn("t-approve"))
	if err != nil {
		panic(err)
	}
	defer f.Stop()
	if err := tc.Submit(ctx, &events.TurnRequest{
		TurnID: "t-approve", Model: "scripted:demo", Tools: []string{"delete_file"},
		Messages: []events.Message{events.UserText("Delete /tmp/old.log")},
	}); err != nil {
		panic(err)
	}
	for it := range f.C() {
		if it.Err != nil {
			panic(it.Err)
		}
		switch ev := it.Event.(type) {
		case events.TurnPaused:
			decisions := map[string]events.Decision{}
			for _, call := range ev.Pending {
				fmt.Printf("paused by %s: %s %s\n", ev.Hook, call.Name, call.Input)
				decisions[call.ID] = events.Decision{Kind: events.DecisionApprove} // or DecisionDeny, DecisionEdit
			}
			if err := tc.Resume(ctx, &events.ResumeRequest{TurnID: "t-approve", Decisions: decisions}); err != nil {
				panic(err)
			}
		case events.TurnResumed:
			fmt.Println("resumed")
		case events.ToolCallResult:
			fmt.Println("tool result:", ev.Content)
		case events.TurnCompleted:
			fmt.Println("completed:", ev.Messages[len(ev.Messages)-1].Text())
			return
		case events.TurnFailed:
			fmt.Println("failed:", ev.Reason)
			return
		}
	}
	// Output:
	// paused by ask-first: delete_file {"path":"/tmp/old.log"}
	// resumed
	// tool result: deleted /tmp/old.log
	// completed: Deleted /tmp/old.log.
}

// Cancel stops a running turn: whichever replica runs it cancels the
// model call or the tool in flight, and the turn ends with
// llmw.turn.aborted, code "cancelled". A paused turn is cancelled the
// same way.
func ExampleClient_Cancel() {
	srv, err := natstest.New(natstest.Options{}) // or nats.Connect(yourServerURL)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx := context.Background()

	type buildArgs struct {
		Target string `json:"target"`
	}
	// A tool that runs until its call is cancelled.
	build := tool.Must("build", "Builds a target.",
		func(ctx context.Context, _ buildArgs) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		})
	stop := startTurnService(ctx, srv, turn.Config{
		Provider: llmtest.NewScripted(
			llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "build", Input: `{"target":"all"}`}),
		),
		Tools: []tool.Tool{build},
	})
	defer stop()

	tc, err := turn.NewClient(srv.NC, turn.ClientOptions{})
	if err != nil {
		panic(err)
	}
	f, err := tc.Follow(ctx, tc.Subjects().EventsOfTurn("t-cancel"))
	if err != nil {
		panic(err)
	}
	defer f.Stop()
	if err := tc.Submit(ctx, &events.TurnRequest{
		TurnID: "t-cancel", Model: "scripted:demo", Tools: []string{"build"},
		Messages: []events.Message{events.UserText("Build everything")},
	}); err != nil {
		panic(err)
	}
	for it := range f.C() {
		if it.Err != nil {
			panic(it.Err)
		}
		switch ev := it.Event.(type) {
		case events.ToolStarted:
			fmt.Println("tool started:", ev.Name)
			if err := tc.Cancel(ctx, "t-cancel"); err != nil {
				panic(err)
			}
		case events.TurnAborted:
			fmt.Println("aborted:", ev.Code)
			return
		case events.TurnCompleted, events.TurnFailed:
			fmt.Println("unexpected end:", it.Env.Type)
			return
		}
	}
	// Output:
	// tool started: build
	// aborted: cancelled
}

// startTurnService runs a turn service on srv until the returned stop is
// called. A real installation runs it as `llmworker up` or cmd/turn, with
// ingest calling the model; cfg.Provider stands in for both here.
func startTurnService(ctx context.Context, srv *natstest.Server, cfg turn.Config) (stop func()) {
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := turn.New(srv.NC, cfg)
	if err != nil {
		panic(err)
	}
	if err := svc.Start(ctx); err != nil {
		panic(err)
	}
	return func() { _ = svc.Stop(ctx) }
}
