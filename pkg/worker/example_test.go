package worker_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/timeline"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// A turn with a typed tool and a hook. The provider is a scripted test
// double standing in for a model: it asks for the weather, then answers.
func Example() {
	type args struct {
		City string `json:"city" jsonschema:"description=City name"`
	}
	weather := tool.Must("get_weather", "Current weather of a city.",
		func(_ context.Context, a args) (string, error) { return "sunny in " + a.City, nil })

	hooks := &hook.Chain{}
	_ = hooks.BeforeToolCall(hook.BeforeToolCallFunc(func(_ context.Context, in *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
		fmt.Printf("calling %s %s\n", in.Call.Name, in.Call.Input)
		return hook.BeforeToolCallResult{}, nil
	}), hook.Options{Name: "log"})

	model := llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "get_weather", Input: `{"city":"Oslo"}`}),
		llmtest.TextStep("It is sunny in Oslo."),
	)
	w, err := worker.New(worker.Config{Provider: model, Model: "openai:gpt-4.1-mini", Tools: []tool.Tool{weather}, Hooks: hooks})
	if err != nil {
		panic(err)
	}
	res, err := w.Run(context.Background(), []events.Message{events.UserText("Weather in Oslo?")})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.Steps, "steps")
	for _, m := range res.Messages {
		for _, p := range m.Content {
			switch p.Type {
			case events.PartText:
				fmt.Printf("%s: %s\n", m.Role, p.Text)
			case events.PartToolUse:
				fmt.Printf("%s: tool_use %s %s\n", m.Role, p.Name, p.Input)
			case events.PartToolResult:
				fmt.Printf("%s: tool_result %s\n", m.Role, p.Content)
			}
		}
	}
	// Output:
	// calling get_weather {"city":"Oslo"}
	// completed 2 steps
	// user: Weather in Oslo?
	// assistant: tool_use get_weather {"city":"Oslo"}
	// tool: tool_result sunny in Oslo
	// assistant: It is sunny in Oslo.
}

// The WorkerSubscriber UI example of docs/architecture.md#the-turn-loop: block scopes are UI
// components, created fresh per block and dropped after it; complete events
// feed the history.
func ExampleSubscribe() {
	w, _ := worker.New(worker.Config{
		Provider: llmtest.NewScripted(
			llmtest.NewStep(
				llmtest.TextBlockEvents(0, "Let me ", "check."),
				llmtest.ToolUseBlockEvents(1, llmtest.ToolCallSpec{ID: "call_1", Name: "get_weather", Input: `{"city":"Oslo"}`}),
			),
			llmtest.TextStep("Sunny", "!"),
		),
		Tools: []tool.Tool{tool.Must("get_weather", "weather",
			func(context.Context, struct {
				City string `json:"city"`
			}) (string, error) {
				return "sunny", nil
			})},
	})
	ui := &MyUI{view: &ChatView{}}
	worker.Subscribe(w, ui)
	_, _ = w.Run(context.Background(), []events.Message{events.UserText("Weather?")})
	fmt.Println("history:", strings.Join(ui.view.history, " | "))
	// Output:
	// turn 1 started
	// view: "Let me "
	// view: "Let me check."
	// tool indicator: get_weather
	// tool call: get_weather {"city":"Oslo"}
	// turn 1 ended
	// turn 2 started
	// view: "Sunny"
	// view: "Sunny!"
	// turn 2 ended
	// history: Let me check. | Sunny!
}

// TextComponent is the scope of a text block: a component of the chat
// view that grows with each delta.
type TextComponent struct {
	text      strings.Builder
	immutable bool
}

// ToolComponent is the scope of a tool_use block.
type ToolComponent struct {
	name  string
	input strings.Builder
	final bool
}

// ChatView stands in for a UI toolkit.
type ChatView struct{ history []string }

func (v *ChatView) update(c *TextComponent)             { fmt.Printf("view: %q\n", c.text.String()) }
func (v *ChatView) showToolIndicator(c *ToolComponent)  { fmt.Println("tool indicator:", c.name) }
func (v *ChatView) addToHistory(text string)            { v.history = append(v.history, text) }
func (v *ChatView) updateToolResult(name, input string) { fmt.Println("tool call:", name, input) }

// MyUI implements worker.Subscriber[TextComponent, ToolComponent]; the
// embedded NopSubscriber provides the methods it does not need.
type MyUI struct {
	worker.NopSubscriber[TextComponent, ToolComponent]
	view *ChatView
}

func (u *MyUI) OnTextBlock(c *TextComponent, ev timeline.TextBlockEvent) {
	switch ev.Phase {
	case timeline.PhaseStart:
		// The component is fresh (the zero TextComponent).
	case timeline.PhaseDelta:
		c.text.WriteString(ev.Text)
		u.view.update(c)
	case timeline.PhaseStop:
		c.immutable = true // dropped after this
	}
}

func (u *MyUI) OnTextComplete(c events.TextComplete) { u.view.addToHistory(c.Text) }

func (u *MyUI) OnToolUseBlock(c *ToolComponent, ev timeline.ToolUseBlockEvent) {
	switch ev.Phase {
	case timeline.PhaseStart:
		c.name = ev.Name
		u.view.showToolIndicator(c)
	case timeline.PhaseDelta:
		c.input.WriteString(ev.InputJSON)
	case timeline.PhaseStop:
		c.final = true
	}
}

func (u *MyUI) OnToolCallComplete(c events.ToolCallComplete) {
	u.view.updateToolResult(c.Name, string(c.Input))
}

func (u *MyUI) OnTurnStart(step int) { fmt.Printf("turn %d started\n", step) }
func (u *MyUI) OnTurnEnd(step int)   { fmt.Printf("turn %d ended\n", step) }

// An Observer receives the worker events of docs/protocol.md §5 one to one, as a
// turn service publishes them.
func ExampleObserver() {
	w, _ := worker.New(worker.Config{
		Provider: llmtest.NewScripted(llmtest.TextStep("Hi!")),
		TurnID:   "t1",
		Observer: worker.ObserverFunc(func(ev worker.Event) {
			fmt.Printf("%-20s %-5s %s\n", ev.Type(), ev.Channel(), jsonData(ev.Data))
		}),
	})
	_, _ = w.Run(context.Background(), []events.Message{events.UserText("Hello")})
	// Output:
	// llmw.turn.started    turn  {"turn_id":"t1"}
	// llmw.turn.step       turn  {"step":1,"attempt":1}
	// llmw.block.start     text  {"index":0,"block_type":"text","step":1}
	// llmw.block.delta     text  {"index":0,"text":"Hi!","step":1}
	// llmw.block.stop      text  {"index":0,"block_type":"text","stop_reason":"end_turn","step":1}
	// llmw.text.complete   text  {"step":1,"index":0,"text":"Hi!"}
	// llmw.turn.completed  turn  {"messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]},{"role":"assistant","content":[{"type":"text","text":"Hi!"}]}],"stop_reason":"end_turn","usage":{}}
}

// A turn whose answer is a typed value: the response format's schema is
// reflected from the Go type, the turn checks the answer against it (and
// asks the model once to repair an answer that does not fit), and
// RunStructured decodes it. The scripted model first forgets a field.
func ExampleRunStructured() {
	type Weather struct {
		City  string  `json:"city"`
		TempC float64 `json:"temp_c" jsonschema:"description=Temperature in °C"`
	}
	format, err := worker.OutputFormat[Weather]()
	if err != nil {
		panic(err)
	}
	model := llmtest.NewScripted(
		llmtest.TextStep(`{"city":"Oslo"}`),
		llmtest.TextStep(`{"city":"Oslo","temp_c":4.5}`),
	)
	w, err := worker.New(worker.Config{Provider: model, Options: events.ModelOptions{ResponseFormat: format}})
	if err != nil {
		panic(err)
	}
	v, res, err := worker.RunStructured[Weather](context.Background(), w, []events.Message{events.UserText("Weather in Oslo?")})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s after %d steps: %+v\n", res.Status, res.Steps, v)
	repair := model.Requests()[1].Messages[2]
	fmt.Printf("%s: %s\n", repair.Role, repair.Text())
	// Output:
	// completed after 2 steps: {City:Oslo TempC:4.5}
	// user: Your answer does not fit the required output format: field "temp_c" is required. Answer again with only the corrected JSON value, fitting the schema, and nothing else.
}
