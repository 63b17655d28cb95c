package openai_test

import (
	"context"
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// A Chat Completions stream with a tool call, as §3 events.
func Example() {
	srv := providertest.Start(providertest.SSE([]byte(
		`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Checking."}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" +
			`data: {"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29}}` + "\n\n" +
			"data: [DONE]\n\n")))
	defer srv.Close()

	p, err := openai.New(openai.Config{APIKey: "sk-test", BaseURL: srv.URL()})
	if err != nil {
		panic(err)
	}
	s, err := p.Stream(context.Background(), &llm.Request{
		Model:    "openai:gpt-4o",
		Messages: []events.Message{events.UserText("Weather in Paris?")},
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	for s.Next() {
		b, _ := events.MarshalEvent(s.Current())
		fmt.Println(s.Current().EventType(), string(b))
	}
	// Output:
	// llmw.llm.status {"status":"started"}
	// llmw.llm.block.start {"index":0,"block_type":"text"}
	// llmw.llm.block.delta {"index":0,"text":"Checking."}
	// llmw.llm.block.stop {"index":0,"block_type":"text","stop_reason":null}
	// llmw.llm.block.start {"index":1,"block_type":"tool_use","id":"call_1","name":"get_weather"}
	// llmw.llm.block.delta {"index":1,"input_json":"{\"city\":"}
	// llmw.llm.block.delta {"index":1,"input_json":"\"Paris\"}"}
	// llmw.llm.block.stop {"index":1,"block_type":"tool_use","stop_reason":"tool_use"}
	// llmw.llm.usage {"input_tokens":20,"output_tokens":9,"total_tokens":29}
	// llmw.llm.status {"status":"completed"}
}
