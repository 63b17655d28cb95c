package anthropic_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/openairesponses"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// byPrefix calls the provider of each request's model prefix, as ingest
// does.
type byPrefix map[string]llm.Provider

func (b byPrefix) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	prefix, _ := events.SplitModel(req.Model)
	return b[prefix].Stream(ctx, req)
}

// compactedAnswer is a Messages API stream in the form the compaction
// beta documents (and the pinned SDK's beta stream types read): the
// compaction block first (content_block_start with null content, one
// compaction_delta with the summary and the opaque content, the stop),
// then a call of the tool "lookup"; usage.iterations reports the
// compaction's tokens apart from the answer's.
const compactedAnswer = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_c1","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"usage":{"input_tokens":900,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":0,"content_block":{"type":"compaction","content":null,"encrypted_content":null}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"compaction_delta","content":"The user asked two questions about tides.","encrypted_content":"opaque-compaction-payload"}}` + "\n\n" +
	"event: content_block_stop\n" +
	`data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"lookup","input":{}}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"q\":\"tides\"}"}}` + "\n\n" +
	"event: content_block_stop\n" +
	`data: {"type":"content_block_stop","index":1}` + "\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":900,"output_tokens":20,"iterations":[{"type":"compaction","input_tokens":160000,"output_tokens":700,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},{"type":"message","input_tokens":900,"output_tokens":20,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}]}}` + "\n\n" +
	"event: message_stop\n" +
	`data: {"type":"message_stop"}` + "\n\n"

// A turn whose provider compacted its context natively (Anthropic), then
// failed, falls back to another provider (OpenAI Responses), which reads
// the originals and no Anthropic compaction block; the compaction is
// llmw.turn.compacted with policy native:anthropic and its tokens are in
// the step's usage.
func TestNativeCompactionThenFallback(t *testing.T) {
	a := providertest.NewServer(t,
		providertest.SSE([]byte(compactedAnswer)),
		providertest.Status(529, "", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	b := providertest.NewServer(t, providertest.SSE(providertest.MustLoadFixture(t, "openai-responses/text_gpt-4o.sse")))
	ap, err := anthropic.New(anthropic.Config{APIKey: "k", BaseURL: a.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	bp, err := openairesponses.New(openairesponses.Config{APIKey: "k", BaseURL: b.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	lookup, err := tool.New("lookup", "looks up", func(ctx context.Context, in struct {
		Q string `json:"q"`
	}) (string, error) {
		return "high tide at noon", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		evs []worker.Event
	)
	rec := worker.ObserverFunc(func(ev worker.Event) {
		mu.Lock()
		evs = append(evs, ev)
		mu.Unlock()
	})
	ofType := func(typ string) []any {
		mu.Lock()
		defer mu.Unlock()
		var out []any
		for _, ev := range evs {
			if ev.Type() == typ {
				out = append(out, ev.Data)
			}
		}
		return out
	}
	on := true
	w, err := worker.New(worker.Config{
		Provider: byPrefix{"anthropic": ap, "openai-responses": bp},
		Model:    "anthropic:claude-sonnet-4-6", FallbackModels: []string{"openai-responses:gpt-4o"},
		ModelLimits: func(string) (llm.ModelLimits, bool) {
			return llm.ModelLimits{ContextWindow: 200000, MaxOutputTokens: 8192}, true
		},
		Compaction: events.CompactionConfig{Native: &on},
		Tools:      []tool.Tool{lookup}, TurnID: "t1", Observer: rec,
		// Step 1 uses 161,620 tokens, the compaction's included; the next
		// call is estimated from the projection after the compaction, not
		// from the 160,900 input tokens of the compacted call.
		MaxTotalTokens: 200000,
	})
	if err != nil {
		t.Fatal(err)
	}
	originals := []events.Message{events.UserText("first question"), events.AssistantText("answer one"), events.UserText("second question")}
	res, err := w.Run(context.Background(), originals)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}

	reqs := a.Requests()
	if len(reqs) != 2 || b.RequestCount() != 1 {
		t.Fatalf("%d Anthropic and %d OpenAI requests, want 2 and 1", len(reqs), b.RequestCount())
	}
	// The first call asks for the compaction, at the threshold (0.8) of
	// the room: 200,000 − 8,192 max output − 4,000 reserve (2%).
	if got := reqs[0].Header.Values("anthropic-beta"); !strings.Contains(strings.Join(got, ","), "compact-2026-01-12") {
		t.Errorf("anthropic-beta %q, want compact-2026-01-12", got)
	}
	var first struct {
		ContextManagement struct {
			Edits []struct {
				Type    string `json:"type"`
				Trigger struct {
					Type  string `json:"type"`
					Value int64  `json:"value"`
				} `json:"trigger"`
			} `json:"edits"`
		} `json:"context_management"`
	}
	if err := json.Unmarshal(reqs[0].Body, &first); err != nil {
		t.Fatal(err)
	}
	if e := first.ContextManagement.Edits; len(e) != 1 || e[0].Type != "compact_20260112" || e[0].Trigger.Type != "input_tokens" || e[0].Trigger.Value != 150246 {
		t.Errorf("context_management %+v, want one compact_20260112 edit triggered at 150246 input tokens", e)
	}
	// The second call reads the projection: the answer that begins with
	// the compaction block, as it came, and what followed it.
	var second struct {
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[1].Body, &second); err != nil {
		t.Fatal(err)
	}
	if len(second.Messages) != 2 || second.Messages[0].Role != "assistant" || len(second.Messages[0].Content) != 2 {
		t.Fatalf("second Anthropic request %s, want the compacted answer and the tool result", reqs[1].Body)
	}
	var block map[string]any
	if err := json.Unmarshal(second.Messages[0].Content[0], &block); err != nil {
		t.Fatal(err)
	}
	if block["type"] != "compaction" || block["content"] != "The user asked two questions about tides." || block["encrypted_content"] != "opaque-compaction-payload" {
		t.Errorf("first block %s, want the compaction block as received", second.Messages[0].Content[0])
	}
	if got := reqs[1].Header.Values("anthropic-beta"); !strings.Contains(strings.Join(got, ","), "compact-2026-01-12") {
		t.Errorf("second request's anthropic-beta %q, want compact-2026-01-12: it sends a compaction block", got)
	}
	if strings.Contains(string(reqs[1].Body), "first question") {
		t.Errorf("second Anthropic request holds a message the compaction replaced: %s", reqs[1].Body)
	}

	// The fallback reads the originals, the call and its result, and no
	// compaction.
	body := string(b.Requests()[0].Body)
	for _, want := range []string{"first question", "answer one", "second question", `"call_id":"toolu_1"`, "high tide at noon"} {
		if !strings.Contains(body, want) {
			t.Errorf("OpenAI request lacks %q: %s", want, body)
		}
	}
	for _, not := range []string{`"type":"compaction"}`, "opaque-compaction-payload", "two questions about tides"} {
		if strings.Contains(body, not) {
			t.Errorf("OpenAI request holds %q of the Anthropic compaction: %s", not, body)
		}
	}
	var input struct {
		Input []struct {
			Type string `json:"type"`
		} `json:"input"`
	}
	if err := json.Unmarshal(b.Requests()[0].Body, &input); err != nil {
		t.Fatal(err)
	}
	for i, it := range input.Input {
		if it.Type == "compaction" {
			t.Errorf("OpenAI input item %d is a compaction item: %s", i, body)
		}
	}

	var cs []events.TurnCompacted
	for _, d := range ofType(events.TypeTurnCompacted) {
		cs = append(cs, d.(events.TurnCompacted))
	}
	if len(cs) != 1 || cs[0].Policy != "native:anthropic" || cs[0].To != 3 || cs[0].Step != 1 || cs[0].ID != "t1.c1" {
		t.Fatalf("compactions %+v, want one native:anthropic to 3 at step 1", cs)
	}
	// The compaction's tokens are in the step's usage: 160,000 + 900 in,
	// 700 + 20 out.
	var step1 *events.UsageReport
	for _, d := range ofType(events.TypeUsage) {
		if u := d.(events.UsageReport); u.Step == 1 {
			step1 = &u
		}
	}
	if step1 == nil || step1.Usage.InputTokens == nil || *step1.Usage.InputTokens != 160900 || *step1.Usage.OutputTokens != 720 {
		t.Errorf("step 1 usage %s, want 160900 input and 720 output tokens", string(mustJSON(t, step1)))
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// failedCompaction is a compaction the API could not summarize (content
// null, which the API treats as nothing), then the answer.
const failedCompaction = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_f","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":0,"content_block":{"type":"compaction","content":null,"encrypted_content":null}}` + "\n\n" +
	"event: content_block_stop\n" +
	`data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"ok"}}` + "\n\n" +
	"event: content_block_stop\n" +
	`data: {"type":"content_block_stop","index":1}` + "\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}` + "\n\n" +
	"event: message_stop\n" +
	`data: {"type":"message_stop"}` + "\n\n"

// The compaction request: a trigger below the API's smallest is raised
// to it with a warning, none leaves the API's default; a failed
// compaction is no block; a compaction of another provider, or one in a
// user message, is not sent.
func TestNativeCompactionRequest(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE([]byte(failedCompaction)))
	p, err := anthropic.New(anthropic.Config{APIKey: "k", BaseURL: srv.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	openaiItem := events.Part{Type: events.PartThinking, Origin: "openai-responses",
		Signature: llm.NativeCompactionSignature(`{"t":"openai.compaction","id":"cmp_1","encrypted_content":"ENC"}`)}
	ours := events.Part{Type: events.PartThinking, Origin: "anthropic",
		Signature: llm.NativeCompactionSignature(`{"type":"compaction","content":"S","encrypted_content":"E"}`)}
	req := &llm.Request{Model: "anthropic:claude-sonnet-4-6", Compaction: &events.NativeCompaction{Trigger: 1000}, Messages: []events.Message{
		{Role: events.RoleUser, Content: []events.Part{ours, events.TextPart("hi")}},
		{Role: events.RoleAssistant, Content: []events.Part{openaiItem, events.TextPart("earlier")}},
		events.UserText("again"),
	}}
	s, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := providertest.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	for _, w := range s.(llm.Warner).Warnings() {
		warned = append(warned, w.Setting)
	}
	if strings.Join(warned, ",") != "compaction.trigger" {
		t.Errorf("warnings %v, want compaction.trigger", warned)
	}
	for _, ev := range evs {
		if st, ok := ev.(events.BlockStart); ok && st.BlockType != events.BlockText {
			t.Errorf("a %s block: a failed compaction is no block", st.BlockType)
		}
	}
	providertest.AssertJSON(t, srv.LastRequest().Body, `{
	  "model": "claude-sonnet-4-6", "max_tokens": 4096, "stream": true,
	  "context_management": {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50000}}]},
	  "messages": [
	    {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
	    {"role": "assistant", "content": [{"type": "text", "text": "earlier"}]},
	    {"role": "user", "content": [{"type": "text", "text": "again", "cache_control": {"type": "ephemeral"}}]}
	  ]
	}`)

	req.Compaction = &events.NativeCompaction{}
	providertest.MustRun(t, p, req)
	var body struct {
		ContextManagement json.RawMessage `json:"context_management"`
	}
	if err := json.Unmarshal(srv.LastRequest().Body, &body); err != nil {
		t.Fatal(err)
	}
	providertest.AssertJSON(t, body.ContextManagement, `{"edits": [{"type": "compact_20260112"}]}`)

	// Without a compaction asked for, a block sent back still names the
	// beta, and goes first in its message, as it came.
	req.Compaction = nil
	req.Messages = []events.Message{events.UserText("hi"), {Role: events.RoleAssistant, Content: []events.Part{ours, events.TextPart("earlier")}}, events.UserText("again")}
	providertest.MustRun(t, p, req)
	last := srv.LastRequest()
	if got := last.Header.Values("anthropic-beta"); !strings.Contains(strings.Join(got, ","), "compact-2026-01-12") {
		t.Errorf("anthropic-beta %q, want compact-2026-01-12", got)
	}
	providertest.AssertJSON(t, last.Body, `{
	  "model": "claude-sonnet-4-6", "max_tokens": 4096, "stream": true,
	  "messages": [
	    {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
	    {"role": "assistant", "content": [{"type": "compaction", "content": "S", "encrypted_content": "E"}, {"type": "text", "text": "earlier"}]},
	    {"role": "user", "content": [{"type": "text", "text": "again", "cache_control": {"type": "ephemeral"}}]}
	  ]
	}`)
}
