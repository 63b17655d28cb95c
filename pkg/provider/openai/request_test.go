package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

const doneBody = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"

func transcript() *llm.Request {
	temp := 0.5
	return &llm.Request{
		RequestID: "r1", Model: "openai:gpt-4o", System: "Be brief.",
		Messages: []events.Message{
			events.UserText("Weather in Paris, and the time?"),
			{Role: events.RoleAssistant, Content: []events.Part{
				events.ThinkingPart("I should call both tools.", "sig-from-elsewhere"),
				events.TextPart("Let me check."),
				events.ToolUsePart("call_1", "get_weather", json.RawMessage(`{"city":"Paris"}`)),
				events.ToolUsePart("call_2", "get_time", nil),
			}},
			{Role: events.RoleTool, Content: []events.Part{
				events.ToolResultPart("call_1", "18C", false),
				events.ToolResultPart("call_2", "no clock", true),
			}},
			events.UserText("Thanks"),
		},
		Tools: []events.ToolDefinition{
			{Name: "get_weather", Description: "Weather of a city", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
			{Name: "get_time", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
		},
		MaxTokens: 1000, Temperature: &temp, Thinking: &events.ThinkingConfig{BudgetTokens: 4096},
	}
}

// The body is the Chat Completions request the API reference documents:
// tool calls on the assistant message, one "tool" message per result,
// thinking dropped, usage requested in the stream.
func TestRequestMapping(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE([]byte(doneBody)))
	providertest.MustRun(t, newProvider(t, srv, onOpenAI(t, srv)), transcript())
	want := `{
	  "model": "gpt-4o",
	  "stream": true,
	  "stream_options": {"include_usage": true},
	  "max_completion_tokens": 1000,
	  "temperature": 0.5,
	  "reasoning_effort": "medium",
	  "messages": [
	    {"role": "system", "content": "Be brief."},
	    {"role": "user", "content": "Weather in Paris, and the time?"},
	    {"role": "assistant", "content": "Let me check.", "tool_calls": [
	      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
	      {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
	    ]},
	    {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
	    {"role": "tool", "tool_call_id": "call_2", "content": "no clock"},
	    {"role": "user", "content": "Thanks"}
	  ],
	  "tools": [
	    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
	      "parameters": {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
	    {"type": "function", "function": {"name": "get_time", "parameters": {"type":"object","properties":{}}}}
	  ]
	}`
	r := srv.LastRequest()
	if r.Method != http.MethodPost || r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer test-key" {
		t.Errorf("request %s %s auth %q", r.Method, r.Path, r.Header.Get("Authorization"))
	}
	providertest.AssertJSON(t, r.Body, want)
}

// A 429 with Retry-After is retried after the delay it asks for, and the
// stream then succeeds.
func TestRetryAfter429(t *testing.T) {
	srv := providertest.NewServer(t,
		providertest.Status(429, "1", `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`),
		providertest.SSE([]byte(doneBody)),
	)
	p := newProvider(t, srv, func(c *openai.Config) { c.MaxRetries = 2 })
	start := time.Now()
	got := summarize(t, providertest.MustRun(t, p, simpleRequest()))
	if got.Text != "ok" || got.Status != events.StatusCompleted {
		t.Fatalf("got %+v", got)
	}
	if srv.RequestCount() != 2 {
		t.Fatalf("%d requests, want 2", srv.RequestCount())
	}
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Fatalf("retried after %v, Retry-After asked for 1s", el)
	}
}

// When every attempt fails, Stream returns an error naming the status.
func TestRetriesExhausted(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Status(503, "0", `{"error":{"message":"overloaded","type":"server_error"}}`))
	p := newProvider(t, srv, func(c *openai.Config) { c.MaxRetries = 2 })
	_, err := p.Stream(context.Background(), simpleRequest())
	if !errors.Is(err, openai.ErrRequestFailed) || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "overloaded") {
		t.Fatalf("err = %v", err)
	}
	if srv.RequestCount() != 3 {
		t.Fatalf("%d requests, want 1 + 2 retries", srv.RequestCount())
	}
}

func TestConnectionRefused(t *testing.T) {
	srv := providertest.Start()
	url := srv.URL()
	srv.Close()
	p, err := openai.New(openai.Config{APIKey: "k", BaseURL: url, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Stream(context.Background(), simpleRequest()); !errors.Is(err, openai.ErrRequestFailed) {
		t.Fatalf("err = %v", err)
	}
}

// A provider that goes silent after the first bytes ends with idle_timeout
// and failed, with the open block aborted, instead of hanging.
func TestIdleTimeout(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{
		Body:  []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"he\"}}]}\n\n"),
		Stall: true,
	})
	p := newProvider(t, srv, func(c *openai.Config) { c.IdleTimeout = 200 * time.Millisecond })
	evs := providertest.MustRun(t, p, simpleRequest())
	got := summarize(t, evs)
	if got.ErrCode != "idle_timeout" || got.Status != events.StatusFailed || got.Text != "he" {
		t.Fatalf("got %+v", got)
	}
}

// Cancelling the context mid-stream ends the stream as cancelled.
func TestCancel(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{
		Body:  []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"he\"}}]}\n\n"),
		Stall: true,
	})
	providertest.CollectCancelled(t, newProvider(t, srv), simpleRequest(), func(e events.Event) bool {
		d, ok := e.(events.BlockDelta)
		return ok && d.Content == "he"
	})
}

// Close from another goroutine ends a Next that waits for a silent provider
// (the stream is read inline by llm.Normalize: the adapter's Close must
// cancel the request itself).
func TestCloseUnblocksAStalledRead(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{
		Body:  []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"he\"}}]}\n\n"),
		Stall: true,
	})
	providertest.CheckCloseUnblocks(t, newProvider(t, srv, func(c *openai.Config) { c.IdleTimeout = time.Hour }), simpleRequest())
}

// The idle timeout's error names the limit, as llm.Normalize's does.
func TestIdleTimeoutMessage(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{
		Body:  []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"he\"}}]}\n\n"),
		Stall: true,
	})
	p := newProvider(t, srv, func(c *openai.Config) { c.IdleTimeout = 150 * time.Millisecond })
	for _, ev := range providertest.MustRun(t, p, simpleRequest()) {
		if e, ok := ev.(events.ErrorEvent); ok {
			if e.Code != "idle_timeout" || e.Message != "no event from the provider for 150ms" {
				t.Fatalf("error %+v", e)
			}
			return
		}
	}
	t.Fatal("no error event")
}

// onOpenAI points the provider at OpenAI's API (openai.DefaultBaseURL)
// and dials srv for it, so that a test sees what api.openai.com gets.
func onOpenAI(t *testing.T, srv *providertest.Server) func(*openai.Config) {
	return onHost(t, srv, openai.DefaultBaseURL)
}

// onHost points the provider at base and dials srv for it.
func onHost(t *testing.T, srv *providertest.Server, base string) func(*openai.Config) {
	t.Helper()
	target, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return func(c *openai.Config) {
		c.BaseURL = base
		c.HTTPClient = &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.URL.Scheme, r.URL.Host = target.Scheme, target.Host
			return tr.RoundTrip(r)
		})}
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The output limit goes in the field the server reads: OpenAI and Azure
// OpenAI take max_completion_tokens (max_tokens is deprecated there and
// refused by reasoning models); an OpenAI-compatible server (Ollama,
// llama.cpp, vLLM) reads max_tokens only, so it gets that.
func TestMaxTokensField(t *testing.T) {
	const openAIField, compatField = "max_completion_tokens", "max_tokens"
	cases := []struct {
		name string
		new  func(t *testing.T, srv *providertest.Server) llm.Provider
		want string
	}{
		{"OpenAI", func(t *testing.T, srv *providertest.Server) llm.Provider {
			return newProvider(t, srv, onOpenAI(t, srv))
		}, openAIField},
		{"OpenAI regional host", func(t *testing.T, srv *providertest.Server) llm.Provider {
			return newProvider(t, srv, onHost(t, srv, "https://eu.api.openai.com/v1/"))
		}, openAIField},
		{"Azure OpenAI v1 API as base URL", func(t *testing.T, srv *providertest.Server) llm.Provider {
			return newProvider(t, srv, onHost(t, srv, "https://my-resource.openai.azure.com/openai/v1/"))
		}, openAIField},
		{"Azure OpenAI adapter", func(t *testing.T, srv *providertest.Server) llm.Provider {
			azureEnv(t, srv, "k", "")
			p, err := openai.NewAzure(openai.AzureConfig{MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}, openAIField},
		{"local server by Config.BaseURL", func(t *testing.T, srv *providertest.Server) llm.Provider {
			return newProvider(t, srv)
		}, compatField},
		{"local server by OPENAI_BASE_URL", func(t *testing.T, srv *providertest.Server) llm.Provider {
			t.Setenv("OPENAI_BASE_URL", srv.URL()+"/v1")
			return newProvider(t, srv, func(c *openai.Config) { c.BaseURL = "" })
		}, compatField},
		{"Ollama host", func(t *testing.T, srv *providertest.Server) llm.Provider {
			return newProvider(t, srv, onHost(t, srv, "http://ollama.internal:11434/v1/"))
		}, compatField},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE([]byte(doneBody)))
			req := simpleRequest()
			req.Model = "openai:gpt-4o"
			req.MaxTokens = 321
			providertest.MustRun(t, c.new(t, srv), req)
			var body map[string]json.RawMessage
			if err := json.Unmarshal(srv.LastRequest().Body, &body); err != nil {
				t.Fatal(err)
			}
			other := compatField
			if c.want == compatField {
				other = openAIField
			}
			if string(body[c.want]) != "321" || body[other] != nil {
				t.Errorf("%s = %s, %s = %s; want %s 321 alone", c.want, body[c.want], other, body[other], c.want)
			}
		})
	}
}
