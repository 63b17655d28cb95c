package gemini_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// A recorded function call without an id: the adapter synthesizes one, and
// the stop reason says the model wants the tool run.
func Example() {
	body, err := providertest.LoadFixture("gemini/function-call_gemini-2.0-flash.sse")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := providertest.Start(providertest.SSE(body))
	defer srv.Close()

	p, err := gemini.New(gemini.Config{APIKey: "key", BaseURL: srv.URL()})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := p.Stream(context.Background(), &llm.Request{Model: "gemini:gemini-2.0-flash",
		Messages: []events.Message{events.UserText("capital of France?")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	for s.Next() {
		switch e := s.Current().(type) {
		case events.BlockStart:
			fmt.Println("call:", e.Name, strings.HasPrefix(e.ID, gemini.SynthesizedIDPrefix))
		case events.BlockDelta:
			fmt.Println("input:", e.Content)
		case events.BlockStop:
			fmt.Println("stop:", e.StopReason)
		case events.StatusEvent:
			fmt.Println("status:", e.Status)
		}
	}
	// Output:
	// status: started
	// call: get_capital true
	// input: {"country":"France"}
	// stop: tool_use
	// status: completed
}
