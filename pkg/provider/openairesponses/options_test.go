package openairesponses_test

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

func ptrTo[T any](v T) *T { return &v }

var weatherTool = events.ToolDefinition{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}

// Every model option with a Responses field is in the body under the name
// the API reference gives it (text.format, tool_choice, reasoning.effort,
// prompt_cache_key ...); stop, seed, the penalties and top_k, which the
// API does not have, are not sent and are the stream's warnings;
// provider_options["openai-responses"] is merged over the body last (a
// new key added, an object merged key by key, null removing a field).
func TestRequestModelOptions(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(doneBody(t)))
	req := &llm.Request{
		Model: "openai-responses:o3", Messages: []events.Message{events.UserText("Weather in Paris?")},
		Tools: []events.ToolDefinition{weatherTool}, Temperature: ptrTo(0.2),
		ModelOptions: events.ModelOptions{
			ResponseFormat: &events.ResponseFormat{Type: events.FormatJSONSchema, Name: "forecast", Description: "A forecast",
				Schema: json.RawMessage(`{"type":"object","properties":{"temp":{"type":"number","maximum":1e2}},"required":["temp"],"additionalProperties":false}`)},
			ToolChoice:        events.ForceTool("get_weather"),
			ParallelToolCalls: ptrTo(false),
			Stop:              []string{"END"},
			TopP:              ptrTo(0.9),
			TopK:              ptrTo(40),
			Seed:              ptrTo(int64(7)),
			PresencePenalty:   ptrTo(0.5),
			FrequencyPenalty:  ptrTo(-0.5),
			ReasoningEffort:   events.EffortMedium,
			CacheKey:          "session-42",
			ProviderOptions: map[string]json.RawMessage{
				"openai-responses": json.RawMessage(`{"service_tier":"flex","reasoning":{"summary":"detailed"},"temperature":null}`),
				"openai":           json.RawMessage(`{"seed":1}`),
			},
		},
	}
	s, err := newProvider(t, srv).Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	w, ok := s.(llm.Warner)
	if !ok {
		t.Fatalf("%T is not an llm.Warner", s)
	}
	var settings []string
	for _, x := range w.Warnings() {
		if x.Message == "" {
			t.Errorf("warning %+v has no message", x)
		}
		settings = append(settings, x.Setting)
	}
	sort.Strings(settings)
	if want := []string{"frequency_penalty", "presence_penalty", "seed", "stop", "top_k"}; !reflect.DeepEqual(settings, want) {
		t.Fatalf("warnings for %v, want %v", settings, want)
	}
	if _, err := providertest.Collect(s); err != nil {
		t.Fatal(err)
	}
	want := `{
	  "model": "o3", "stream": true, "store": false,
	  "input": [{"role": "user", "content": "Weather in Paris?"}],
	  "tools": [{"type": "function", "name": "get_weather", "strict": false, "parameters": {"type":"object","properties":{"city":{"type":"string"}}}}],
	  "text": {"format": {"type": "json_schema", "name": "forecast", "description": "A forecast", "strict": true,
	    "schema": {"type":"object","properties":{"temp":{"type":"number","maximum":100}},"required":["temp"],"additionalProperties":false}}},
	  "tool_choice": {"type": "function", "name": "get_weather"},
	  "parallel_tool_calls": false,
	  "top_p": 0.9,
	  "reasoning": {"effort": "medium", "summary": "detailed"},
	  "include": ["reasoning.encrypted_content"],
	  "prompt_cache_key": "session-42",
	  "service_tier": "flex"
	}`
	providertest.AssertJSON(t, srv.LastRequest().Body, want)
}

// The other forms of each option, field by field.
func TestRequestModelOptionForms(t *testing.T) {
	for name, tc := range map[string]struct {
		opts   events.ModelOptions
		tools  bool
		budget int
		want   map[string]string // body field → its JSON
		absent []string
	}{
		"json object": {opts: events.ModelOptions{ResponseFormat: &events.ResponseFormat{Type: events.FormatJSON}},
			want: map[string]string{"text": `{"format":{"type":"json_object"}}`}},
		"schema not strict, default name": {opts: events.ModelOptions{ResponseFormat: &events.ResponseFormat{Type: events.FormatJSONSchema, Schema: json.RawMessage(`{"type":"object"}`), Strict: ptrTo(false)}},
			want: map[string]string{"text": `{"format":{"type":"json_schema","name":"output","strict":false,"schema":{"type":"object"}}}`}},
		"tool choice required": {opts: events.ModelOptions{ToolChoice: &events.ToolChoice{Mode: events.ToolRequired}}, tools: true,
			want: map[string]string{"tool_choice": `"required"`}},
		"tool choice none": {opts: events.ModelOptions{ToolChoice: &events.ToolChoice{Mode: events.ToolNone}}, tools: true,
			want: map[string]string{"tool_choice": `"none"`}},
		"tool choice auto": {opts: events.ModelOptions{ToolChoice: &events.ToolChoice{Mode: events.ToolAuto}, ParallelToolCalls: ptrTo(true)}, tools: true,
			want: map[string]string{"tool_choice": `"auto"`, "parallel_tool_calls": `true`}},
		"no tools": {opts: events.ModelOptions{ToolChoice: &events.ToolChoice{Mode: events.ToolNone}, ParallelToolCalls: ptrTo(false)},
			absent: []string{"tool_choice", "parallel_tool_calls"}},
		"cache off": {opts: events.ModelOptions{Cache: ptrTo(false), CacheKey: "session-42"},
			absent: []string{"prompt_cache_key"}},
		"nothing set": {absent: []string{"prompt_cache_key", "top_p", "text", "tool_choice", "reasoning", "include"}},
		"effort over budget": {opts: events.ModelOptions{ReasoningEffort: events.EffortHigh}, budget: 1024,
			want: map[string]string{"reasoning": `{"effort":"high","summary":"auto"}`, "include": `["reasoning.encrypted_content"]`}},
		"effort alone": {opts: events.ModelOptions{ReasoningEffort: events.EffortLow},
			want: map[string]string{"reasoning": `{"effort":"low","summary":"auto"}`, "include": `["reasoning.encrypted_content"]`}},
	} {
		t.Run(name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE(doneBody(t)))
			req := &llm.Request{Model: "openai-responses:gpt-5", Messages: []events.Message{events.UserText("hi")}, ModelOptions: tc.opts}
			if tc.tools {
				req.Tools = []events.ToolDefinition{weatherTool}
			}
			if tc.budget > 0 {
				req.Thinking = &events.ThinkingConfig{BudgetTokens: tc.budget}
			}
			s, err := newProvider(t, srv).Stream(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if w := s.(llm.Warner).Warnings(); len(w) != 0 {
				t.Errorf("warnings %+v", w)
			}
			if _, err := providertest.Collect(s); err != nil {
				t.Fatal(err)
			}
			assertFields(t, srv.LastRequest().Body, tc.want, tc.absent)
		})
	}
}

// assertFields checks the fields of a request body named in want (as JSON
// values) and that the fields in absent are not there.
func assertFields(t *testing.T, body []byte, want map[string]string, absent []string) {
	t.Helper()
	var got map[string]json.RawMessage
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	for k, w := range want {
		var g, e any
		if err := json.Unmarshal(got[k], &g); err != nil {
			t.Fatalf("%s: %v in %s", k, err, body)
		}
		if err := json.Unmarshal([]byte(w), &e); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, e) {
			t.Errorf("%s = %s, want %s", k, got[k], w)
		}
	}
	for _, k := range absent {
		if v, ok := got[k]; ok {
			t.Errorf("%s = %s, want it absent", k, v)
		}
	}
}
