package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

const textFixture = "anthropic/text-ping_claude-sonnet-4-5.sse"

func newProvider(t *testing.T, cfg anthropic.Config) *anthropic.Provider {
	t.Helper()
	if cfg.APIKey == "" {
		cfg.APIKey = "test-key"
	}
	return providertest.MustNew(t, anthropic.New, cfg)
}

func simpleRequest() *llm.Request {
	return providertest.SimpleRequest("anthropic:claude-test")
}

func TestRequestMapping(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(providertest.MustLoadFixture(t, textFixture)))
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL()})
	temp := 1.0 // the only temperature the API takes while thinking
	req := &llm.Request{
		Model: "anthropic:claude-sonnet-4-5", System: "be brief", MaxTokens: 8000, Temperature: &temp,
		Thinking: &events.ThinkingConfig{BudgetTokens: 2048},
		Tools: []events.ToolDefinition{{Name: "get_weather", Description: "weather for a city",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)}},
		Messages: []events.Message{
			events.UserText("weather in Paris?"),
			{Role: events.RoleAssistant, Content: []events.Part{
				events.ThinkingPart("need the tool", "sig-1"),
				{Type: events.PartThinking, Signature: anthropic.RedactedSignaturePrefix + "opaque"},
				events.TextPart("Let me check."),
				events.ToolUsePart("toolu_1", "get_weather", json.RawMessage(`{"city":"Paris"}`)),
			}},
			{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("toolu_1", "sunny", false)}},
			events.UserText("and tomorrow?"),
		},
	}
	s, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	providertest.MustCollect(t, s)
	got := srv.LastRequest()
	if got.Path != "/v1/messages" || got.Header.Get("X-Api-Key") != "test-key" {
		t.Errorf("request %s with key %q", got.Path, got.Header.Get("X-Api-Key"))
	}
	var body map[string]any
	if err := json.Unmarshal(got.Body, &body); err != nil {
		t.Fatal(err)
	}
	// The request body the Messages API documents for this transcript,
	// with the default prompt-cache breakpoints: the last tool, the system
	// prompt, the newest message's last block and the last block of the
	// message before the newest assistant message.
	eph := map[string]any{"type": "ephemeral"}
	want := map[string]any{
		"model": "claude-sonnet-4-5", "max_tokens": 8000.0, "temperature": 1.0, "stream": true,
		"system":   []any{map[string]any{"type": "text", "text": "be brief", "cache_control": eph}},
		"thinking": map[string]any{"type": "enabled", "budget_tokens": 2048.0},
		"tools": []any{map[string]any{"name": "get_weather", "description": "weather for a city", "cache_control": eph,
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
				"required": []any{"city"}, "additionalProperties": false}}},
		"messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "weather in Paris?", "cache_control": eph}}},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "thinking", "thinking": "need the tool", "signature": "sig-1"},
				map[string]any{"type": "redacted_thinking", "data": "opaque"},
				map[string]any{"type": "text", "text": "Let me check."},
				map[string]any{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": map[string]any{"city": "Paris"}},
			}},
			// Tool results travel in a user turn; the following user text
			// joins it, since turns must alternate.
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": false,
					"content": []any{map[string]any{"type": "text", "text": "sunny"}}},
				map[string]any{"type": "text", "text": "and tomorrow?", "cache_control": eph},
			}},
		},
	}
	for k, w := range want {
		if !reflect.DeepEqual(body[k], w) {
			gb, _ := json.Marshal(body[k])
			wb, _ := json.Marshal(w)
			t.Errorf("%s =\n %s\nwant\n %s", k, gb, wb)
		}
	}
}

// A streamed pause_turn answer (thinking, server tool calls and their
// results) goes back into the next request as the API requires: the same
// blocks, in order.
func TestServerToolRoundTrip(t *testing.T) {
	body := providertest.MustLoadFixture(t, "anthropic/server-web-search-pause-turn_claude-sonnet-4-5.sse")
	srv := providertest.NewServer(t, providertest.SSE(body))
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL()})
	s, err := p.Stream(context.Background(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	evs := providertest.MustCollect(t, s)
	// Build the assistant message from the stream, as a worker does.
	var parts []events.Part
	bufs := map[int]*strings.Builder{}
	starts := map[int]events.BlockStart{}
	for _, e := range evs {
		switch e := e.(type) {
		case events.BlockStart:
			starts[e.Index], bufs[e.Index] = e, &strings.Builder{}
		case events.BlockDelta:
			bufs[e.Index].WriteString(e.Content)
		case events.BlockStop:
			st, text := starts[e.Index], bufs[e.Index].String()
			switch st.BlockType {
			case events.BlockText:
				parts = append(parts, events.TextPart(text))
			case events.BlockThinking:
				parts = append(parts, events.ThinkingPart(text, e.Signature))
			case events.BlockToolUse:
				parts = append(parts, events.ToolUsePart(st.ID, st.Name, json.RawMessage(text)))
			case events.BlockToolResult:
				parts = append(parts, events.ToolResultPart(st.ToolUseID, text, false))
			}
		}
	}
	req := simpleRequest()
	req.Messages = append(req.Messages, events.Message{Role: events.RoleAssistant, Content: parts})
	s, err = p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	providertest.MustCollect(t, s)
	var sent struct {
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(srv.LastRequest().Body, &sent); err != nil {
		t.Fatal(err)
	}
	asst := sent.Messages[len(sent.Messages)-1]
	// Expected from the fixture: its blocks in order, by type and id.
	var wantTypes, gotTypes []string
	for _, line := range providertest.ChunkLines(body) {
		var ev struct {
			Type         string `json:"type"`
			ContentBlock struct {
				Type      string `json:"type"`
				ID        string `json:"id"`
				ToolUseID string `json:"tool_use_id"`
			} `json:"content_block"`
		}
		_ = json.Unmarshal(line, &ev)
		if ev.Type == "content_block_start" {
			wantTypes = append(wantTypes, ev.ContentBlock.Type+":"+ev.ContentBlock.ID+ev.ContentBlock.ToolUseID)
		}
	}
	for _, c := range asst.Content {
		id, _ := c["id"].(string)
		tid, _ := c["tool_use_id"].(string)
		gotTypes = append(gotTypes, c["type"].(string)+":"+id+tid)
	}
	if asst.Role != "assistant" || !reflect.DeepEqual(gotTypes, wantTypes) {
		t.Errorf("assistant blocks sent back:\n%q\nwant\n%q", gotTypes, wantTypes)
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	body := providertest.MustLoadFixture(t, textFixture)
	srv := providertest.NewServer(t,
		providertest.Status(http.StatusTooManyRequests, "1", `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`),
		providertest.SSE(body))
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL(), MaxRetries: 2})
	start := time.Now()
	s, err := p.Stream(context.Background(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Errorf("retried after %v, want Retry-After: 1s", el)
	}
	evs := providertest.MustCollect(t, s)
	if got := providertest.Summarize(t, evs); got.Status != events.StatusCompleted || got.Text != "2" {
		t.Errorf("after retry: %+v", got)
	}
	if n := srv.RequestCount(); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestRetriesAreBounded(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Status(http.StatusServiceUnavailable, "0", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL(), MaxRetries: 2})
	_, err := p.Stream(context.Background(), simpleRequest())
	if !errors.Is(err, anthropic.ErrRequestFailed) {
		t.Fatalf("err = %v, want ErrRequestFailed", err)
	}
	if n := srv.RequestCount(); n != 3 {
		t.Errorf("%d requests, want 1 + 2 retries", n)
	}
	// Not retried: a client error.
	srv.SetScript(providertest.Status(http.StatusBadRequest, "", `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`))
	before := srv.RequestCount()
	if _, err := p.Stream(context.Background(), simpleRequest()); !errors.Is(err, anthropic.ErrRequestFailed) {
		t.Fatalf("err = %v", err)
	}
	if n := srv.RequestCount() - before; n != 1 {
		t.Errorf("400 sent %d times, want once", n)
	}
}

func TestConnectionRefused(t *testing.T) {
	addr := providertest.ClosedAddr(t)
	p := newProvider(t, anthropic.Config{BaseURL: "http://" + addr, MaxRetries: -1})
	if _, err := p.Stream(context.Background(), simpleRequest()); !errors.Is(err, anthropic.ErrRequestFailed) {
		t.Fatalf("err = %v, want ErrRequestFailed", err)
	}
}

// midStreamError is a Messages stream that breaks with an error event
// (overloaded_error) after the first text delta ("Hel").
const midStreamError = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"x\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n" +
	"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"

func TestMidStreamError(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE([]byte(midStreamError)))
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL()})
	s, err := p.Stream(context.Background(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	evs := providertest.MustCollect(t, s)
	if err := providertest.StrictWellFormed(evs); err != nil {
		t.Fatal(err)
	}
	n := len(evs)
	if ab, ok := evs[n-3].(events.BlockAbort); !ok || ab.BlockType != events.BlockText {
		t.Errorf("open text block not aborted: %#v", evs[n-3])
	}
	if e, ok := evs[n-2].(events.ErrorEvent); !ok || e.Code != "overloaded_error" || e.Message != "Overloaded" {
		t.Errorf("error event %#v", evs[n-2])
	}
	if st := evs[n-1].(events.StatusEvent); st.Status != events.StatusFailed {
		t.Errorf("status %s", st.Status)
	}
}

func TestTruncatedStreamFails(t *testing.T) {
	full := providertest.MustLoadFixture(t, textFixture)
	cut := full[:strings.Index(string(full), "event: content_block_stop")]
	srv := providertest.NewServer(t, providertest.SSE(cut))
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL()})
	s, err := p.Stream(context.Background(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	evs := providertest.MustCollect(t, s)
	if err := providertest.StrictWellFormed(evs); err != nil {
		t.Fatal(err)
	}
	if got := providertest.Summarize(t, evs); got.Status != events.StatusFailed || len(got.Errors) != 1 || got.Text != "2" {
		t.Errorf("truncated stream: %+v", got)
	}
}

func TestIdleTimeout(t *testing.T) {
	full := providertest.MustLoadFixture(t, textFixture)
	cut := full[:strings.Index(string(full), "event: content_block_stop")]
	srv := providertest.NewServer(t, providertest.Response{Body: cut, Stall: true})
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL(), IdleTimeout: 200 * time.Millisecond})
	s, err := p.Stream(context.Background(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	evs := providertest.MustCollect(t, s)
	if err := providertest.StrictWellFormed(evs); err != nil {
		t.Fatal(err)
	}
	got := providertest.Summarize(t, evs)
	if got.Status != events.StatusFailed || len(got.Errors) != 1 || got.Errors[0].Code != "idle_timeout" {
		t.Errorf("silent provider: %+v", got)
	}
}

func TestCancel(t *testing.T) {
	full := providertest.MustLoadFixture(t, textFixture)
	cut := full[:strings.Index(string(full), "event: content_block_stop")]
	srv := providertest.NewServer(t, providertest.Response{Body: cut, Stall: true})
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL()})
	providertest.CollectCancelled(t, p, simpleRequest(), func(e events.Event) bool {
		d, ok := e.(events.BlockDelta)
		return ok && d.Content == "2"
	})
}

func TestConfigFromEnvironment(t *testing.T) {
	t.Setenv(anthropic.EnvAPIKey, "")
	if _, err := anthropic.New(anthropic.Config{}); !errors.Is(err, anthropic.ErrMissingAPIKey) {
		t.Fatalf("err = %v, want ErrMissingAPIKey", err)
	}
	srv := providertest.NewServer(t, providertest.SSE(providertest.MustLoadFixture(t, textFixture)))
	t.Setenv(anthropic.EnvAPIKey, "env-key")
	t.Setenv(anthropic.EnvBaseURL, srv.URL())
	p, err := anthropic.New(anthropic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Stream(context.Background(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	providertest.MustCollect(t, s)
	if k := srv.LastRequest().Header.Get("X-Api-Key"); k != "env-key" {
		t.Errorf("key %q, want the environment's", k)
	}
}

func TestInvalidRequest(t *testing.T) {
	p := newProvider(t, anthropic.Config{BaseURL: "http://127.0.0.1:1"})
	req := simpleRequest()
	req.Messages = append(req.Messages, events.Message{Role: events.RoleAssistant,
		Content: []events.Part{events.ToolUsePart("toolu_1", "f", json.RawMessage(`{not json`))}})
	if _, err := p.Stream(context.Background(), req); !errors.Is(err, anthropic.ErrInvalidRequest) {
		t.Fatalf("err = %v, want ErrInvalidRequest", err)
	}
}
