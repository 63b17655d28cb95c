package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

func ptrTo[T any](v T) *T { return &v }

// weatherTool is a tool for requests that set tool options.
var weatherTool = events.ToolDefinition{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}

// Every model option with a Chat Completions field is in the body under
// the name the API reference gives it; top_k, which the API does not
// have, is not sent and is the stream's one warning; provider_options
// ["openai"] is merged over the body last (a new key added, an object
// merged key by key, null removing a field).
func TestRequestModelOptions(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE([]byte(doneBody)))
	req := &llm.Request{
		Model: "openai:o4-mini", Messages: []events.Message{events.UserText("Weather in Paris?")},
		Tools: []events.ToolDefinition{weatherTool}, Temperature: ptrTo(0.2),
		ModelOptions: events.ModelOptions{
			ResponseFormat: &events.ResponseFormat{Type: events.FormatJSONSchema, Name: "forecast", Description: "A forecast",
				Schema: json.RawMessage(`{"type":"object","properties":{"temp":{"type":"number","maximum":1e2}},"required":["temp"],"additionalProperties":false}`)},
			ToolChoice:        events.ForceTool("get_weather"),
			ParallelToolCalls: ptrTo(false),
			Stop:              []string{"END", "\n\n"},
			TopP:              ptrTo(0.9),
			TopK:              ptrTo(40),
			Seed:              ptrTo(int64(7)),
			PresencePenalty:   ptrTo(0.5),
			FrequencyPenalty:  ptrTo(-0.5),
			ReasoningEffort:   events.EffortHigh,
			CacheKey:          "session-42",
			ProviderOptions: map[string]json.RawMessage{
				"openai":    json.RawMessage(`{"service_tier":"flex","stream_options":{"include_obfuscation":false},"temperature":null}`),
				"anthropic": json.RawMessage(`{"top_k":3}`),
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
	if got := w.Warnings(); len(got) != 1 || got[0].Setting != "top_k" || got[0].Message == "" {
		t.Fatalf("warnings %+v, want one for top_k", got)
	}
	if _, err := providertest.Collect(s); err != nil {
		t.Fatal(err)
	}
	want := `{
	  "model": "o4-mini", "stream": true,
	  "stream_options": {"include_usage": true, "include_obfuscation": false},
	  "messages": [{"role": "user", "content": "Weather in Paris?"}],
	  "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type":"object","properties":{"city":{"type":"string"}}}}}],
	  "response_format": {"type": "json_schema", "json_schema": {
	    "name": "forecast", "description": "A forecast", "strict": true,
	    "schema": {"type":"object","properties":{"temp":{"type":"number","maximum":100}},"required":["temp"],"additionalProperties":false}}},
	  "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
	  "parallel_tool_calls": false,
	  "stop": ["END", "\n\n"],
	  "top_p": 0.9,
	  "seed": 7,
	  "presence_penalty": 0.5,
	  "frequency_penalty": -0.5,
	  "reasoning_effort": "high",
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
			want: map[string]string{"response_format": `{"type":"json_object"}`}},
		"schema not strict, default name": {opts: events.ModelOptions{ResponseFormat: &events.ResponseFormat{Type: events.FormatJSONSchema, Schema: json.RawMessage(`{"type":"object"}`), Strict: ptrTo(false)}},
			want: map[string]string{"response_format": `{"type":"json_schema","json_schema":{"name":"output","strict":false,"schema":{"type":"object"}}}`}},
		"tool choice required": {opts: events.ModelOptions{ToolChoice: &events.ToolChoice{Mode: events.ToolRequired}}, tools: true,
			want: map[string]string{"tool_choice": `"required"`}},
		"tool choice none": {opts: events.ModelOptions{ToolChoice: &events.ToolChoice{Mode: events.ToolNone}}, tools: true,
			want: map[string]string{"tool_choice": `"none"`}},
		"tool choice auto": {opts: events.ModelOptions{ToolChoice: &events.ToolChoice{Mode: events.ToolAuto}, ParallelToolCalls: ptrTo(true)}, tools: true,
			want: map[string]string{"tool_choice": `"auto"`, "parallel_tool_calls": `true`}},
		// The API refuses both without tools; auto and none mean nothing then.
		"no tools": {opts: events.ModelOptions{ToolChoice: &events.ToolChoice{Mode: events.ToolNone}, ParallelToolCalls: ptrTo(false)},
			absent: []string{"tool_choice", "parallel_tool_calls"}},
		"cache off": {opts: events.ModelOptions{Cache: ptrTo(false), CacheKey: "session-42"},
			absent: []string{"prompt_cache_key"}},
		"no cache key": {absent: []string{"prompt_cache_key", "stop", "top_p", "seed", "response_format", "tool_choice", "reasoning_effort"}},
		"effort over budget": {opts: events.ModelOptions{ReasoningEffort: events.EffortLow}, budget: 20000,
			want: map[string]string{"reasoning_effort": `"low"`}},
		"budget alone": {budget: 20000, want: map[string]string{"reasoning_effort": `"high"`}},
	} {
		t.Run(name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE([]byte(doneBody)))
			req := &llm.Request{Model: "openai:gpt-4o", Messages: []events.Message{events.UserText("hi")}, ModelOptions: tc.opts}
			if tc.tools {
				req.Tools = []events.ToolDefinition{weatherTool}
			}
			if tc.budget > 0 {
				req.Thinking = &events.ThinkingConfig{BudgetTokens: tc.budget}
			}
			providertest.MustRun(t, newProvider(t, srv), req)
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

// FuzzExtraFields: whatever provider_options holds, ExtraFields returns an
// error or extra fields that give a JSON object body holding every key of
// the options that is not null, and none that is.
func FuzzExtraFields(f *testing.F) {
	for _, s := range []string{
		`{"service_tier":"flex"}`, `{"stream_options":{"include_obfuscation":false}}`, `{"temperature":null}`,
		`{"stream_options":{"include_usage":null,"x":{"y":[1,{"z":null}]}}}`, `{"a.b":1,"c*":2,"":3}`, `[]`, `null`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, opts []byte) {
		p := sdk.ChatCompletionNewParams{Model: "gpt-4o", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hi")}}
		p.StreamOptions.IncludeUsage = param.NewOpt(true)
		p.Temperature = param.NewOpt(0.5)
		extra, err := openai.ExtraFields(p, opts)
		if err != nil {
			return
		}
		p.SetExtraFields(extra)
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("options %s: body: %v", opts, err)
		}
		var body, in map[string]json.RawMessage
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("options %s: body %s is not a JSON object: %v", opts, b, err)
		}
		if err := json.Unmarshal(opts, &in); err != nil {
			t.Fatalf("options %s accepted but not an object: %v", opts, err)
		}
		for k, v := range in {
			_, has := body[k]
			if null := string(bytes.TrimSpace(v)) == "null"; has == null {
				t.Fatalf("options %s: key %q in body %v, its value %s", opts, k, has, v)
			}
		}
	})
}
