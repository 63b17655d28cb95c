package gemini_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

const textFixture = "gemini/text-usage_gemini-2.0-flash-exp.sse"

func newProvider(t *testing.T, cfg gemini.Config) *gemini.Provider {
	t.Helper()
	if cfg.APIKey == "" {
		cfg.APIKey = "test-key"
	}
	return providertest.MustNew(t, gemini.New, cfg)
}

func simpleRequest() *llm.Request {
	return providertest.SimpleRequest("gemini:gemini-test")
}

func TestRequestMapping(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(providertest.MustLoadFixture(t, textFixture)))
	p := newProvider(t, gemini.Config{BaseURL: srv.URL()})
	temp := 0.5
	sigBytes := []byte{1, 2, 3, 250}
	sig := base64.StdEncoding.EncodeToString(sigBytes)
	synth := gemini.SynthesizedIDPrefix + "abc_0"
	req := &llm.Request{
		Model: "gemini:gemini-2.5-pro", System: "be brief", MaxTokens: 1000, Temperature: &temp,
		Thinking: &events.ThinkingConfig{BudgetTokens: 512},
		Tools: []events.ToolDefinition{{Name: "get_weather", Description: "weather",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
		Messages: []events.Message{
			events.UserText("weather in Paris and Rome?"),
			{Role: events.RoleAssistant, Content: []events.Part{
				events.ThinkingPart("two calls", ""),
				{Type: events.PartToolUse, ID: synth, Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`), Signature: sig},
				events.ToolUsePart("call-x", "get_weather", json.RawMessage(`{"city":"Rome"}`)),
			}},
			{Role: events.RoleTool, Content: []events.Part{
				events.ToolResultPart(synth, "sunny", false),
				events.ToolResultPart("call-x", "no such city", true),
			}},
			{Role: events.RoleAssistant, Content: []events.Part{{Type: events.PartText, Text: "Sunny in Paris.", Signature: sig}}},
		},
	}
	s, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	providertest.MustCollect(t, s)
	got := srv.LastRequest()
	if got.Path != "/v1beta/models/gemini-2.5-pro:streamGenerateContent" || got.Header.Get("X-Goog-Api-Key") != "test-key" {
		t.Errorf("request %s with key %q", got.Path, got.Header.Get("X-Goog-Api-Key"))
	}
	var body map[string]any
	if err := json.Unmarshal(got.Body, &body); err != nil {
		t.Fatal(err)
	}
	// The generateContent body the Gemini API documents for this transcript.
	want := map[string]any{
		"systemInstruction": map[string]any{"role": "user", "parts": []any{map[string]any{"text": "be brief"}}},
		"generationConfig": map[string]any{"maxOutputTokens": 1000.0, "temperature": 0.5,
			"thinkingConfig": map[string]any{"thinkingBudget": 512.0, "includeThoughts": true}},
		"tools": []any{map[string]any{"functionDeclarations": []any{map[string]any{"name": "get_weather", "description": "weather",
			"parametersJsonSchema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}},
		"contents": []any{
			map[string]any{"role": "user", "parts": []any{map[string]any{"text": "weather in Paris and Rome?"}}},
			map[string]any{"role": "model", "parts": []any{
				map[string]any{"text": "two calls", "thought": true},
				// A synthesized id is not sent; the signature goes back on its part.
				map[string]any{"functionCall": map[string]any{"name": "get_weather", "args": map[string]any{"city": "Paris"}}, "thoughtSignature": sig},
				map[string]any{"functionCall": map[string]any{"id": "call-x", "name": "get_weather", "args": map[string]any{"city": "Rome"}}},
			}},
			map[string]any{"role": "user", "parts": []any{
				map[string]any{"functionResponse": map[string]any{"name": "get_weather", "response": map[string]any{"output": "sunny"}}},
				map[string]any{"functionResponse": map[string]any{"id": "call-x", "name": "get_weather", "response": map[string]any{"error": "no such city"}}},
			}},
			map[string]any{"role": "model", "parts": []any{map[string]any{"text": "Sunny in Paris.", "thoughtSignature": sig}}},
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

// backends are the Gemini API's and Vertex AI's ("vertex:", a
// service-account file whose token endpoint is local): a test run on
// both gets the provider for a server's URL and a request to it.
var backends = []struct {
	name string
	open func(t *testing.T, url string) (llm.Provider, *llm.Request)
}{
	{"gemini", func(t *testing.T, url string) (llm.Provider, *llm.Request) {
		return newProvider(t, gemini.Config{BaseURL: url}), simpleRequest()
	}},
	{"vertex", func(t *testing.T, url string) (llm.Provider, *llm.Request) {
		vertexEnv(t, url)
		return providertest.MustNew(t, gemini.NewVertex, gemini.VertexConfig{}), providertest.SimpleRequest("vertex:gemini-test")
	}},
}

// A streamed answer with a signed function call goes back with the same
// signature on the call, and the result names the call.
func TestSignatureRoundTrip(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { signatureRoundTrip(t, b.open) })
	}
}

func signatureRoundTrip(t *testing.T, open func(t *testing.T, url string) (llm.Provider, *llm.Request)) {
	body := providertest.MustLoadFixture(t, "gemini/function-call-thought-signature_gemini-3-pro-preview.sse")
	srv := providertest.NewServer(t, providertest.SSE(body))
	p, first := open(t, srv.URL())
	s, err := p.Stream(context.Background(), first)
	if err != nil {
		t.Fatal(err)
	}
	var part events.Part
	for _, e := range providertest.MustCollect(t, s) {
		switch e := e.(type) {
		case events.BlockStart:
			if e.BlockType == events.BlockToolUse {
				part = events.Part{Type: events.PartToolUse, ID: e.ID, Name: e.Name}
			}
		case events.BlockDelta:
			part.Input = append(part.Input, e.Content...)
		case events.BlockStop:
			if e.BlockType == events.BlockToolUse {
				part.Signature = e.Signature
			}
		}
	}
	req := *first
	req.Messages = append(slices.Clip(req.Messages), events.Message{Role: events.RoleAssistant, Content: []events.Part{part}},
		events.Message{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart(part.ID, "France", false)}})
	if s, err = p.Stream(context.Background(), &req); err != nil {
		t.Fatal(err)
	}
	providertest.MustCollect(t, s)
	var sent struct {
		Contents []struct {
			Parts []map[string]any `json:"parts"`
		} `json:"contents"`
	}
	_ = json.Unmarshal(srv.LastRequest().Body, &sent)
	var rec struct {
		Candidates []struct {
			Content struct {
				Parts []map[string]any `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	_ = json.Unmarshal(providertest.ChunkLines(body)[0], &rec)
	wantCall := rec.Candidates[0].Content.Parts[0] // {functionCall, thoughtSignature} as recorded
	got := sent.Contents[1].Parts[0]
	// genai omits an empty args object (omitempty); the API reads a
	// missing args as {}.
	if fc, _ := got["functionCall"].(map[string]any); fc != nil && fc["args"] == nil {
		fc["args"] = map[string]any{}
	}
	if !reflect.DeepEqual(got, wantCall) {
		t.Errorf("call sent back = %v\nwant %v", got, wantCall)
	}
	fr := sent.Contents[2].Parts[0]["functionResponse"].(map[string]any)
	if fr["name"] != wantCall["functionCall"].(map[string]any)["name"] {
		t.Errorf("function response %v not named after its call", fr)
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	body := providertest.MustLoadFixture(t, textFixture)
	srv := providertest.NewServer(t,
		providertest.Status(http.StatusTooManyRequests, "1", `{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}`),
		providertest.SSE(body))
	p := newProvider(t, gemini.Config{BaseURL: srv.URL()})
	start := time.Now()
	s, err := p.Stream(context.Background(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Errorf("retried after %v, want Retry-After: 1s", el)
	}
	if got := providertest.Summarize(t, providertest.MustCollect(t, s)); got.Status != events.StatusCompleted || got.Text == "" {
		t.Errorf("after retry: %+v", got)
	}
	if n := srv.RequestCount(); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
	// The retried request is the same request.
	if r := srv.Requests(); string(r[0].Body) != string(r[1].Body) {
		t.Error("retry sent a different body")
	}
}

func TestRetriesAreBounded(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Status(http.StatusServiceUnavailable, "0", `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`))
	p := newProvider(t, gemini.Config{BaseURL: srv.URL(), MaxRetries: 2})
	_, err := p.Stream(context.Background(), simpleRequest())
	if !errors.Is(err, gemini.ErrRequestFailed) || !strings.Contains(err.Error(), "overloaded") {
		t.Fatalf("err = %v, want ErrRequestFailed", err)
	}
	if n := srv.RequestCount(); n != 3 {
		t.Errorf("%d requests, want 1 + 2 retries", n)
	}
	srv.SetScript(providertest.Status(http.StatusBadRequest, "", `{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}`))
	before := srv.RequestCount()
	if _, err := p.Stream(context.Background(), simpleRequest()); !errors.Is(err, gemini.ErrRequestFailed) {
		t.Fatalf("err = %v", err)
	}
	if n := srv.RequestCount() - before; n != 1 {
		t.Errorf("400 sent %d times, want once", n)
	}
}

func TestConnectionRefusedIsRetried(t *testing.T) {
	addr := providertest.ClosedAddr(t)
	dials := 0
	tr := &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		dials++
		return (&net.Dialer{}).DialContext(ctx, network, a)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	p := newProvider(t, gemini.Config{BaseURL: "http://" + addr, MaxRetries: 1, HTTPClient: &http.Client{Transport: tr}})
	if _, err := p.Stream(context.Background(), simpleRequest()); !errors.Is(err, gemini.ErrRequestFailed) {
		t.Fatalf("err = %v, want ErrRequestFailed", err)
	}
	if dials != 2 {
		t.Errorf("%d dials, want 1 + 1 retry", dials)
	}
}

func TestMidStreamError(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { midStreamError(t, b.open) })
	}
}

func midStreamError(t *testing.T, open func(t *testing.T, url string) (llm.Provider, *llm.Request)) {
	body := "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hel\"}],\"role\": \"model\"}}]}\r\n\r\n" +
		"data: {\"error\": {\"code\": 500, \"message\": \"internal\", \"status\": \"INTERNAL\"}}\r\n\r\n"
	srv := providertest.NewServer(t, providertest.SSE([]byte(body)))
	p, req := open(t, srv.URL())
	s, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	evs := providertest.MustCollect(t, s)
	if err := providertest.StrictWellFormed(evs); err != nil {
		t.Fatal(err)
	}
	got := providertest.Summarize(t, evs)
	if got.Status != events.StatusFailed || got.Text != "Hel" || len(got.Errors) != 1 || got.Errors[0].Code != "internal" {
		t.Errorf("mid-stream error: %+v", got)
	}
	if _, ok := evs[len(evs)-3].(events.BlockAbort); !ok {
		t.Errorf("open block not aborted: %#v", evs[len(evs)-3])
	}
}

func TestIdleTimeout(t *testing.T) {
	body := "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hel\"}],\"role\": \"model\"}}]}\r\n\r\n"
	srv := providertest.NewServer(t, providertest.Response{Body: []byte(body), Stall: true})
	p := newProvider(t, gemini.Config{BaseURL: srv.URL(), IdleTimeout: 200 * time.Millisecond})
	s, err := p.Stream(context.Background(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	evs := providertest.MustCollect(t, s)
	if err := providertest.StrictWellFormed(evs); err != nil {
		t.Fatal(err)
	}
	if got := providertest.Summarize(t, evs); got.Status != events.StatusFailed || got.Errors[0].Code != "idle_timeout" {
		t.Errorf("silent provider: %+v", got)
	}
}

func TestCancel(t *testing.T) {
	body := "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hel\"}],\"role\": \"model\"}}]}\r\n\r\n"
	srv := providertest.NewServer(t, providertest.Response{Body: []byte(body), Stall: true})
	p := newProvider(t, gemini.Config{BaseURL: srv.URL()})
	providertest.CollectCancelled(t, p, simpleRequest(), func(e events.Event) bool {
		_, ok := e.(events.BlockDelta)
		return ok
	})
}

func TestConfigFromEnvironment(t *testing.T) {
	t.Setenv(gemini.EnvGoogleAPIKey, "")
	t.Setenv(gemini.EnvGeminiAPIKey, "")
	if _, err := gemini.New(gemini.Config{}); !errors.Is(err, gemini.ErrMissingAPIKey) {
		t.Fatalf("err = %v, want ErrMissingAPIKey", err)
	}
	srv := providertest.NewServer(t, providertest.SSE(providertest.MustLoadFixture(t, textFixture)))
	t.Setenv(gemini.EnvGeminiAPIKey, "env-key")
	t.Setenv(gemini.EnvBaseURL, srv.URL())
	p, err := gemini.New(gemini.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Stream(context.Background(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	providertest.MustCollect(t, s)
	if k := srv.LastRequest().Header.Get("X-Goog-Api-Key"); k != "env-key" {
		t.Errorf("key %q, want the environment's", k)
	}
}

func TestInvalidRequest(t *testing.T) {
	p := newProvider(t, gemini.Config{BaseURL: "http://127.0.0.1:1"})
	req := simpleRequest()
	req.Messages = append(req.Messages, events.Message{Role: events.RoleTool,
		Content: []events.Part{events.ToolResultPart("unknown", "x", false)}})
	if _, err := p.Stream(context.Background(), req); !errors.Is(err, gemini.ErrInvalidRequest) {
		t.Fatalf("err = %v, want ErrInvalidRequest", err)
	}
}

// The ids synthesized for calls without one are keys of the turn's tool
// calls (docs/protocol.md §3): they must differ between the streams of a
// turn, not only within one stream.
func TestSynthesizedIDsDifferAcrossStreams(t *testing.T) {
	body := providertest.MustLoadFixture(t, "gemini/vertex-parallel-function-calls-streamed-args_gemini-3.1-pro-preview.chunks.jsonl")
	p := newProvider(t, gemini.Config{BaseURL: "http://replay.invalid", HTTPClient: providertest.FixedClient(body)})
	seen := map[string]int{}
	for i := range 3 {
		s, err := p.Stream(context.Background(), simpleRequest())
		if err != nil {
			t.Fatal(err)
		}
		calls := providertest.Summarize(t, providertest.MustCollect(t, s)).Calls
		if len(calls) != 2 {
			t.Fatalf("stream %d: %d calls, want the fixture's 2", i, len(calls))
		}
		for _, c := range calls {
			if !strings.HasPrefix(c.ID, gemini.SynthesizedIDPrefix) {
				t.Errorf("stream %d: id %q, want a synthesized one", i, c.ID)
			}
			if j, ok := seen[c.ID]; ok {
				t.Errorf("stream %d: id %q was given out in stream %d already", i, c.ID, j)
			}
			seen[c.ID] = i
		}
	}
}
