package openairesponses_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/openairesponses"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// assistantMessage rebuilds the assistant message of a stream the way the
// worker does: one part per block, in index order, with its signature.
func assistantMessage(evs []events.Event) events.Message {
	m := events.Message{Role: events.RoleAssistant}
	at := map[int]int{}
	for _, ev := range evs {
		switch e := ev.(type) {
		case events.BlockStart:
			at[e.Index] = len(m.Content)
			switch e.BlockType {
			case events.BlockThinking:
				m.Content = append(m.Content, events.Part{Type: events.PartThinking})
			case events.BlockToolUse:
				m.Content = append(m.Content, events.Part{Type: events.PartToolUse, ID: e.ID, Name: e.Name})
			default:
				m.Content = append(m.Content, events.Part{Type: events.PartText})
			}
		case events.BlockDelta:
			p := &m.Content[at[e.Index]]
			switch e.Kind {
			case events.DeltaThinking:
				p.Thinking += e.Content
			case events.DeltaInputJSON:
				p.Input = append(p.Input, e.Content...)
			default:
				p.Text += e.Content
			}
		case events.BlockStop:
			m.Content[at[e.Index]].Signature = e.Signature
		}
	}
	return m
}

// Multi-step round trip: the reasoning item and function call of a recorded
// gpt-5 stream go back in the next request as the Responses API requires
// for stateless use — the reasoning item with its id and encrypted content,
// the function call with its call_id and item id, then the output.
func TestReasoningRoundTrip(t *testing.T) {
	body := providertest.MustLoadFixture(t, filepath.Join("openai-responses", "reasoning-then-function-call-usage_gpt-5.sse"))
	// What the file says: the reasoning item and the function_call item.
	var rsID, enc, fcID, callID, name, args string
	for _, line := range providertest.ChunkLines(body) {
		var e struct {
			Type string `json:"type"`
			Item struct {
				Type             string `json:"type"`
				ID               string `json:"id"`
				EncryptedContent string `json:"encrypted_content"`
				CallID           string `json:"call_id"`
				Name             string `json:"name"`
				Arguments        string `json:"arguments"`
			} `json:"item"`
		}
		if json.Unmarshal(line, &e) != nil || e.Type != "response.output_item.done" {
			continue
		}
		switch e.Item.Type {
		case "reasoning":
			rsID, enc = e.Item.ID, e.Item.EncryptedContent
		case "function_call":
			fcID, callID, name, args = e.Item.ID, e.Item.CallID, e.Item.Name, e.Item.Arguments
		}
	}
	if rsID == "" || enc == "" || callID == "" {
		t.Fatal("fixture lacks the reasoning or function_call item")
	}
	argsJSON, _ := json.Marshal(args)
	// The same on OpenAI and on Azure OpenAI (a deployment named gpt-5).
	for _, backend := range []string{"openai-responses", "azure-responses"} {
		t.Run(backend, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE(body), providertest.SSE(body))
			var p llm.Provider = newProvider(t, srv)
			req := simpleRequest()
			if backend == "azure-responses" {
				t.Setenv(openai.EnvAzureEndpoint, srv.URL())
				t.Setenv(openai.EnvAzureAPIKey, "azure-key")
				t.Setenv(openai.EnvAzureAPIVersion, "2025-04-01-preview")
				p = providertest.MustNew(t, openairesponses.NewAzure, openai.AzureConfig{MaxRetries: -1})
				req.Model = "azure-responses:gpt-5"
			}
			req.Thinking = &events.ThinkingConfig{BudgetTokens: 20000}
			evs := providertest.MustRun(t, p, req)
			req.Messages = append(req.Messages, assistantMessage(evs),
				events.Message{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart(callID, "42", false)}})
			providertest.MustRun(t, p, req)
			want := `{
	  "model": "gpt-5", "stream": true, "store": false,
	  "reasoning": {"effort": "high", "summary": "auto"},
	  "include": ["reasoning.encrypted_content"],
	  "input": [
	    {"role": "user", "content": "hi"},
	    {"type": "reasoning", "id": "` + rsID + `", "summary": [], "encrypted_content": "` + enc + `"},
	    {"type": "function_call", "id": "` + fcID + `", "call_id": "` + callID + `", "name": "` + name + `", "arguments": ` + string(argsJSON) + `},
	    {"type": "function_call_output", "call_id": "` + callID + `", "output": "42"}
	  ]
	}`
			providertest.AssertJSON(t, srv.LastRequest().Body, want)
		})
	}
}

// A transcript with text, reasoning (ours and another provider's), tool
// calls and results becomes the documented input items.
func TestRequestMapping(t *testing.T) {
	done := sse(t, `{"type":"response.completed","response":{"id":"r","status":"completed","output":[]}}`)
	srv := providertest.NewServer(t, providertest.SSE(done))
	temp := 0.2
	ours := `{"t":"openai.reasoning","id":"rs_1","encrypted_content":"ENC","summary":["first","second"]}`
	req := &llm.Request{
		RequestID: "r1", Model: "openai-responses:o3", System: "Be brief.",
		Messages: []events.Message{
			events.UserText("Weather?"),
			{Role: events.RoleAssistant, Content: []events.Part{
				events.ThinkingPart("foreign thinking", "anthropic-signature"),
				events.ThinkingPart("first\n\nsecond", ours),
				events.TextPart("Checking."),
				{Type: events.PartToolUse, ID: "call_1", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`), Signature: `{"t":"openai.function_call","id":"fc_1"}`},
			}},
			{Role: events.RoleUser, Content: []events.Part{events.ToolResultPart("call_1", "18C", false), events.TextPart("And tomorrow?")}},
		},
		Tools:     []events.ToolDefinition{{Name: "get_weather", Description: "Weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
		MaxTokens: 500, Temperature: &temp, Thinking: &events.ThinkingConfig{BudgetTokens: 1024},
	}
	providertest.MustRun(t, newProvider(t, srv), req)
	want := `{
	  "model": "o3", "stream": true, "store": false, "instructions": "Be brief.",
	  "max_output_tokens": 500, "temperature": 0.2,
	  "reasoning": {"effort": "low", "summary": "auto"},
	  "include": ["reasoning.encrypted_content"],
	  "input": [
	    {"role": "user", "content": "Weather?"},
	    {"type": "reasoning", "id": "rs_1", "encrypted_content": "ENC",
	     "summary": [{"type": "summary_text", "text": "first"}, {"type": "summary_text", "text": "second"}]},
	    {"role": "assistant", "content": "Checking."},
	    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
	    {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
	    {"role": "user", "content": "And tomorrow?"}
	  ],
	  "tools": [{"type": "function", "name": "get_weather", "description": "Weather", "strict": false,
	    "parameters": {"type":"object","properties":{"city":{"type":"string"}}}}]
	}`
	r := srv.LastRequest()
	if r.Path != "/responses" {
		t.Errorf("path %q", r.Path)
	}
	providertest.AssertJSON(t, r.Body, want)
}

func TestRetryAfter429(t *testing.T) {
	done := sse(t, `{"type":"response.output_text.delta","output_index":0,"content_index":0,"item_id":"m","delta":"ok"}`,
		`{"type":"response.completed","response":{"id":"r","status":"completed","output":[]}}`)
	srv := providertest.NewServer(t,
		providertest.Status(429, "1", `{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}`),
		providertest.SSE(done))
	p := newProvider(t, srv, func(c *openairesponses.Config) { c.MaxRetries = 1 })
	start := time.Now()
	got := summarize(t, providertest.MustRun(t, p, simpleRequest()))
	if got.Text != "ok" || srv.RequestCount() != 2 || time.Since(start) < 900*time.Millisecond {
		t.Fatalf("got %+v after %d requests in %v", got, srv.RequestCount(), time.Since(start))
	}
}

func TestRetriesExhausted(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Status(429, "0", `{"error":{"message":"Rate limit reached"}}`))
	p := newProvider(t, srv, func(c *openairesponses.Config) { c.MaxRetries = 2 })
	_, err := p.Stream(context.Background(), simpleRequest())
	if !errors.Is(err, openairesponses.ErrRequestFailed) || !strings.Contains(err.Error(), "429") {
		t.Fatalf("err = %v", err)
	}
	if srv.RequestCount() != 3 {
		t.Fatalf("%d requests", srv.RequestCount())
	}
}

func TestIdleTimeout(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{
		Body:  sse(t, `{"type":"response.output_text.delta","output_index":0,"content_index":0,"item_id":"m","delta":"he"}`),
		Stall: true,
	})
	p := newProvider(t, srv, func(c *openairesponses.Config) { c.IdleTimeout = 200 * time.Millisecond })
	got := summarize(t, providertest.MustRun(t, p, simpleRequest()))
	if got.ErrCode != "idle_timeout" || got.Status != events.StatusFailed || got.Text != "he" {
		t.Fatalf("got %+v", got)
	}
}

// Close from another goroutine ends a Next that waits for a silent provider
// (the stream is read inline by llm.Normalize: the adapter's Close must
// cancel the request itself).
func TestCloseUnblocksAStalledRead(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{
		Body:  sse(t, `{"type":"response.output_text.delta","output_index":0,"content_index":0,"item_id":"m","delta":"he"}`),
		Stall: true,
	})
	providertest.CheckCloseUnblocks(t, newProvider(t, srv, func(c *openairesponses.Config) { c.IdleTimeout = time.Hour }), simpleRequest())
}
