package anthropic_test

import (
	"context"
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// A recorded refusal: no content blocks, so the stream says so with an
// error event and a refusal stop reason.
func Example() {
	body, err := providertest.LoadFixture("anthropic/refusal-stop-details-no-content-blocks_claude-fable-5-1.sse")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := providertest.Start(providertest.SSE(body))
	defer srv.Close()

	p, err := anthropic.New(anthropic.Config{APIKey: "key", BaseURL: srv.URL()})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := p.Stream(context.Background(), &llm.Request{Model: "anthropic:claude-fable-5-1",
		Messages: []events.Message{events.UserText("...")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	for s.Next() {
		switch e := s.Current().(type) {
		case events.BlockStop:
			fmt.Println("stop:", e.StopReason)
		case events.ErrorEvent:
			fmt.Println("error:", e.Code)
		case events.StatusEvent:
			fmt.Println("status:", e.Status)
		}
	}
	// Output:
	// status: started
	// stop: refusal
	// error: refusal
	// status: completed
}

// Structured output on a model without structured outputs: the format is a
// tool the model must call, and the stream gives its input back as the
// answer's text. Seed and penalties do not exist in the Messages API, so
// the stream says they were not sent.
func Example_structuredOutput() {
	srv := providertest.Start(providertest.SSE(forcedToolSSE("city", `{"name":"Paris"}`)))
	defer srv.Close()
	p, err := anthropic.New(anthropic.Config{APIKey: "key", BaseURL: srv.URL()})
	if err != nil {
		fmt.Println(err)
		return
	}
	seed := int64(42)
	s, err := p.Stream(context.Background(), &llm.Request{Model: "anthropic:claude-3-5-haiku-latest",
		Messages: []events.Message{events.UserText("Name the capital of France.")},
		ModelOptions: events.ModelOptions{Seed: &seed, ResponseFormat: &events.ResponseFormat{
			Type: events.FormatJSONSchema, Name: "city",
			Schema: []byte(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	if w, ok := s.(llm.Warner); ok {
		for _, x := range w.Warnings() {
			fmt.Println("not sent:", x.Setting)
		}
	}
	for s.Next() {
		switch e := s.Current().(type) {
		case events.BlockDelta:
			fmt.Print(e.Content)
		case events.StatusEvent:
			// The message's stop reason comes after its blocks.
			if e.Status == events.StatusCompleted {
				fmt.Println("\nstop:", e.StopReason)
			}
		}
	}
	// Output:
	// not sent: seed
	// {"name":"Paris"}
	// stop: end_turn
}
