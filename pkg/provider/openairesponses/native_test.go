package openairesponses_test

import (
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// Provider-native compaction: the request asks for server-side
// compaction at the trigger (context_management, as the Responses API
// reference and the pinned SDK's ResponseNewParamsContextManagement
// name it); the compaction output item is a thinking block without text
// whose signature carries the item, and it goes back in the next
// request as a compaction input item, before the answer that followed
// it. Another provider's compaction block is not sent.
func TestNativeCompactionRoundTrip(t *testing.T) {
	body := sse(t,
		`{"type":"response.output_item.added","output_index":0,"item":{"type":"compaction","id":"cmp_1","encrypted_content":""}}`,
		`{"type":"response.output_item.done","output_index":0,"item":{"type":"compaction","id":"cmp_1","encrypted_content":"ENC-CMP"}}`,
		// One without content cannot go back: no block.
		`{"type":"response.output_item.added","output_index":2,"item":{"type":"compaction","id":"cmp_x","encrypted_content":""}}`,
		`{"type":"response.output_item.done","output_index":2,"item":{"type":"compaction","id":"cmp_x","encrypted_content":""}}`,
		`{"type":"response.output_item.added","output_index":1,"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}`,
		`{"type":"response.content_part.added","output_index":1,"content_index":0,"item_id":"msg_1","part":{"type":"output_text","text":""}}`,
		`{"type":"response.output_text.delta","output_index":1,"content_index":0,"item_id":"msg_1","delta":"ok"}`,
		`{"type":"response.completed","response":{"id":"r","status":"completed","model":"gpt-5","output":[],"usage":{"input_tokens":300,"output_tokens":5,"total_tokens":305}}}`,
	)
	srv := providertest.NewServer(t, providertest.SSE(body))
	p := newProvider(t, srv)
	req := simpleRequest()
	req.Compaction = &events.NativeCompaction{Trigger: 120000}
	evs := providertest.MustRun(t, p, req)
	if err := providertest.StrictWellFormed(evs); err != nil {
		t.Fatalf("not well-formed: %v", err)
	}
	for _, ev := range evs {
		if d, ok := ev.(events.BlockDelta); ok && d.Kind == events.DeltaThinking {
			t.Errorf("a thinking delta %q streamed: the compaction is not the assistant's", d.Content)
		}
	}
	providertest.AssertJSON(t, srv.LastRequest().Body, `{
	  "model": "gpt-5", "stream": true, "store": false,
	  "context_management": [{"type": "compaction", "compact_threshold": 120000}],
	  "input": [{"role": "user", "content": "hi"}]
	}`)
	answer := assistantMessage(evs)
	if len(answer.Content) != 2 || answer.Content[0].Thinking != "" || !strings.HasPrefix(answer.Content[0].Signature, llm.NativeCompactionPrefix) || answer.Content[1].Text != "ok" {
		t.Fatalf("answer %+v, want the compaction block then the text", answer.Content)
	}

	// Another provider's compaction (an Anthropic block) in the
	// transcript, then this one's.
	foreign := events.Message{Role: events.RoleAssistant, Content: []events.Part{
		{Type: events.PartThinking, Signature: llm.NativeCompactionSignature(`{"type":"compaction","content":"summary","encrypted_content":"anthropic-opaque"}`), Origin: "anthropic"},
		events.TextPart("earlier"),
	}}
	req.Messages = append(req.Messages, foreign, events.UserText("more"), answer, events.UserText("again"))
	req.Compaction = nil
	providertest.MustRun(t, p, req)
	providertest.AssertJSON(t, srv.LastRequest().Body, `{
	  "model": "gpt-5", "stream": true, "store": false,
	  "input": [
	    {"role": "user", "content": "hi"},
	    {"role": "assistant", "content": "earlier"},
	    {"role": "user", "content": "more"},
	    {"type": "compaction", "id": "cmp_1", "encrypted_content": "ENC-CMP"},
	    {"role": "assistant", "content": "ok"},
	    {"role": "user", "content": "again"}
	  ]
	}`)
}
