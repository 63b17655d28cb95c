package openai_test

import (
	"context"
	"encoding/json"
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

// An image and a structured-output request: the image goes as an
// image_url part, the schema as response_format, and top_k, which Chat
// Completions does not have, comes back as a warning instead of being
// sent.
func Example_imageAndStructuredOutput() {
	srv := providertest.Start(providertest.SSE([]byte(
		`data: {"choices":[{"index":0,"delta":{"content":"{\"animal\":\"cat\"}"},"finish_reason":"stop"}]}` + "\n\n" +
			"data: [DONE]\n\n")))
	defer srv.Close()

	p, err := openai.New(openai.Config{APIKey: "sk-test", BaseURL: srv.URL()})
	if err != nil {
		panic(err)
	}
	topK := 20
	s, err := p.Stream(context.Background(), &llm.Request{
		Model: "openai:gpt-4o",
		Messages: []events.Message{{Role: events.RoleUser, Content: []events.Part{
			events.TextPart("Which animal is this?"),
			events.ImageURLPart("image/jpeg", "https://example.com/cat.jpg"),
		}}},
		ModelOptions: events.ModelOptions{
			ResponseFormat: &events.ResponseFormat{Type: events.FormatJSONSchema, Name: "animal",
				Schema: []byte(`{"type":"object","properties":{"animal":{"type":"string"}},"required":["animal"],"additionalProperties":false}`)},
			TopK: &topK,
		},
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	for _, w := range s.(llm.Warner).Warnings() {
		fmt.Println("warning:", w.Setting, "-", w.Message)
	}
	for s.Next() {
		if d, ok := s.Current().(events.BlockDelta); ok {
			fmt.Println(d.Content)
		}
	}
	body := srv.LastRequest().Body
	var sent struct {
		ResponseFormat struct {
			Type string `json:"type"`
		} `json:"response_format"`
		Messages []struct {
			Content []struct {
				Type string `json:"type"`
			} `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &sent)
	fmt.Println("response_format:", sent.ResponseFormat.Type)
	for _, c := range sent.Messages[0].Content {
		fmt.Println("part:", c.Type)
	}
	// Output:
	// warning: top_k - openai has no top_k setting; it was not sent
	// {"animal":"cat"}
	// response_format: json_schema
	// part: text
	// part: image_url
}
