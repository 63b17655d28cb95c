package worker_test

import (
	"context"
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/timeline"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// Example_readme is the library example of README.md; keep the two in step.
func Example_readme() {
	type args struct {
		City string `json:"city" jsonschema:"description=City name"`
	}
	weather := tool.Must("get_weather", "Current weather of a city.",
		func(_ context.Context, a args) (string, error) { return "sunny in " + a.City, nil })

	hooks := &hook.Chain{}
	hooks.BeforeToolCall(hook.BeforeToolCallFunc(
		func(_ context.Context, in *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
			fmt.Printf("calling %s %s\n", in.Call.Name, in.Call.Input)
			return hook.BeforeToolCallResult{}, nil // continue; ToolSkip/ToolAbort/ToolPause stop it
		}), hook.Options{Name: "log"})

	model := llmtest.NewScripted( // or anthropic.New(anthropic.Config{}), openai.New(...), ...
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "get_weather", Input: `{"city":"Oslo"}`}),
		llmtest.TextStep("It is sunny in Oslo."),
	)
	w, _ := worker.New(worker.Config{Provider: model, Model: "openai:gpt-4.1-mini",
		Tools: []tool.Tool{weather}, Hooks: hooks})
	worker.OnTextBlock(w, timeline.HandlerFunc[timeline.TextBlockEvent, struct{}](
		func(_ *struct{}, ev timeline.TextBlockEvent) { fmt.Print(ev.Text) })) // a UI subscriber
	res, _ := w.Run(context.Background(), []events.Message{events.UserText("Weather in Oslo?")})
	fmt.Println("\n", res.Status, res.Steps, "steps")
	// Output:
	// calling get_weather {"city":"Oslo"}
	// It is sunny in Oslo.
	//  completed 2 steps
}
