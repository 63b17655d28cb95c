package bedrock_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/bedrock"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// A recorded ConverseStream answer with a streamed tool call, served in
// the binary event-stream framing: the call's input arrives in pieces and
// the stop reason says the model wants the tool run.
func Example() {
	body, err := providertest.LoadFixture("bedrock/text-then-tool-use-streamed-input.chunks.jsonl")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := providertest.Start(providertest.EventStreamResponse(body))
	defer srv.Close()

	p, err := bedrock.New(bedrock.Config{
		Region:      "us-east-1",
		BaseURL:     srv.URL(),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := p.Stream(context.Background(), &llm.Request{Model: "bedrock:us.anthropic.claude-sonnet-4-20250514-v1:0",
		Messages: []events.Message{events.UserText("weather in Paris?")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	for s.Next() {
		switch e := s.Current().(type) {
		case events.BlockStart:
			fmt.Printf("start: %s %q\n", e.BlockType, e.Name)
		case events.BlockDelta:
			fmt.Printf("delta: %q\n", e.Content)
		case events.BlockStop:
			fmt.Printf("stop: %q\n", e.StopReason)
		case events.StatusEvent:
			fmt.Println("status:", e.Status)
		}
	}
	// Output:
	// status: started
	// start: text ""
	// delta: "I'll look up"
	// delta: " the weather."
	// stop: ""
	// start: tool_use "get_weather"
	// delta: "{\"city\": \"Par"
	// delta: "is\", \"unit\""
	// delta: ": \"celsius\"}"
	// stop: "tool_use"
	// status: completed
}
