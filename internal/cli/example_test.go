package cli_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/llmworker/llmworker/internal/cli"
	"github.com/llmworker/llmworker/pkg/events"
)

// A worker event rendered for a person: the tool call with its arguments,
// its progress and its result.
func ExampleRenderer() {
	r := cli.NewRenderer(os.Stdout, false)
	for _, ev := range []struct {
		typ  string
		data any
	}{
		{events.TypeToolCallComplete, events.ToolCallComplete{Step: 1, ID: "c1", Name: "get_weather", Input: []byte(`{"city": "Paris"}`)}},
		{events.TypeToolStarted, events.ToolStarted{CallID: "c1", Name: "get_weather"}},
		{events.TypeToolProgress, events.ToolProgress{CallID: "c1", Name: "get_weather", Progress: 2, Total: 3, Message: "asking the stations"}},
		{events.TypeToolResult, events.ToolCallResult{CallID: "c1", Name: "get_weather", Content: "18°C, light rain", DurationMS: 42}},
		{events.TypeTurnCompleted, events.TurnCompleted{StopReason: events.StopEndTurn, Usage: events.UsageEvent{InputTokens: events.Int64(120), OutputTokens: events.Int64(30)}}},
	} {
		e, _ := events.NewEnvelope("/example", ev.typ, ev.data)
		if _, err := r.Render(e); err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// → get_weather {"city":"Paris"}
	//   … get_weather running
	//   … get_weather 2/3: asking the stations
	//   ← get_weather (42 ms): 18°C, light rain
	// ✓ completed · usage: 120 input, 30 output tokens
}

// Without credentials chat says what to set and exits 2.
func ExampleMain() {
	var stderr strings.Builder
	code := cli.Main(context.Background(), []string{"chat", "hello"}, cli.Env{
		Stderr: &stderr,
		Getenv: func(string) string { return "" },
	})
	fmt.Println("exit", code)
	fmt.Println(strings.Contains(stderr.String(), "OPENAI_BASE_URL=http://localhost:11434/v1"))
	// Output:
	// exit 2
	// true
}
