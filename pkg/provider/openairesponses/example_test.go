package openairesponses_test

import (
	"context"
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openairesponses"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// A Responses stream with a reasoning summary and text, as §3 events; the
// thinking block's signature carries the reasoning item for the next
// request.
func Example() {
	body, _ := providertest.ChunksToSSE(providertest.FormatOpenAIResponses, []byte(
		`{"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]}}
{"type":"response.reasoning_summary_part.added","output_index":0,"item_id":"rs_1","summary_index":0,"part":{"type":"summary_text","text":""}}
{"type":"response.reasoning_summary_text.delta","output_index":0,"item_id":"rs_1","summary_index":0,"delta":"Simple."}
{"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning","id":"rs_1","encrypted_content":"gAAA","summary":[{"type":"summary_text","text":"Simple."}]}}
{"type":"response.output_item.added","output_index":1,"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}
{"type":"response.output_text.delta","output_index":1,"content_index":0,"item_id":"msg_1","delta":"4"}
{"type":"response.completed","response":{"id":"resp_1","model":"o3-2025-04-16","status":"completed","output":[],"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":3}}}}
`))
	srv := providertest.Start(providertest.SSE(body))
	defer srv.Close()

	p, err := openairesponses.New(openairesponses.Config{APIKey: "sk-test", BaseURL: srv.URL()})
	if err != nil {
		panic(err)
	}
	s, err := p.Stream(context.Background(), &llm.Request{
		Model:    "openai-responses:o3",
		Messages: []events.Message{events.UserText("2+2?")},
		Thinking: &events.ThinkingConfig{BudgetTokens: 1024},
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
	// llmw.llm.block.start {"index":0,"block_type":"thinking"}
	// llmw.llm.block.delta {"index":0,"thinking":"Simple."}
	// llmw.llm.block.stop {"index":0,"block_type":"thinking","stop_reason":null,"signature":"{\"t\":\"openai.reasoning\",\"id\":\"rs_1\",\"encrypted_content\":\"gAAA\",\"summary\":[\"Simple.\"]}"}
	// llmw.llm.block.start {"index":1,"block_type":"text"}
	// llmw.llm.block.delta {"index":1,"text":"4"}
	// llmw.llm.usage {"input_tokens":10,"output_tokens":5,"total_tokens":15,"cache_read_input_tokens":0,"reasoning_tokens":3}
	// llmw.llm.block.stop {"index":1,"block_type":"text","stop_reason":"end_turn"}
	// llmw.llm.status {"status":"completed","model":"o3-2025-04-16","response_id":"resp_1"}
}
