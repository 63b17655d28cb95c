package anthropic_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// Media bytes with the signatures events' validation sniffs.
var (
	pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR-test-image")
	pdfBytes = []byte("%PDF-1.4\n% test document\n")
	b64      = base64.StdEncoding.EncodeToString
)

// sent runs req through the adapter and the SDK to a local server and
// returns the JSON body the server received, decoded.
func sent(t *testing.T, req *llm.Request) (map[string]any, llm.Stream) {
	t.Helper()
	srv := providertest.NewServer(t, providertest.SSE(providertest.MustLoadFixture(t, textFixture)))
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL()})
	s, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	providertest.MustCollect(t, s)
	var body map[string]any
	if err := json.Unmarshal(srv.LastRequest().Body, &body); err != nil {
		t.Fatal(err)
	}
	return body, s
}

// jsonOf decodes a JSON literal written in a test.
func jsonOf(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad expectation %s: %v", s, err)
	}
	return v
}

func checkField(t *testing.T, body map[string]any, key string, want any) {
	t.Helper()
	if !reflect.DeepEqual(body[key], want) {
		gb, _ := json.Marshal(body[key])
		wb, _ := json.Marshal(want)
		t.Errorf("%s =\n %s\nwant\n %s", key, gb, wb)
	}
}

func noCache() *bool { f := false; return &f }

// Images and documents in a user message and inside a tool result become
// the Messages API's image and document blocks
// (https://docs.anthropic.com/en/api/messages: content block types image,
// document; tool_result content of text, image and document blocks).
func TestMediaParts(t *testing.T) {
	req := &llm.Request{Model: "anthropic:claude-sonnet-4-5", MaxTokens: 100,
		ModelOptions: events.ModelOptions{Cache: noCache()},
		Messages: []events.Message{
			{Role: events.RoleUser, Content: []events.Part{
				events.TextPart("what is in these?"),
				events.ImagePart("image/png", pngBytes),
				events.ImageURLPart("image/jpeg", "https://example.com/cat.jpg"),
				events.FilePart("application/pdf", "report.pdf", pdfBytes),
				{Type: events.PartFile, MediaType: "application/pdf", URL: "https://example.com/paper.pdf"},
				events.FilePart("text/plain", "notes.txt", []byte("plain notes")),
			}},
			{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("toolu_1", "screenshot", json.RawMessage(`{}`))}},
			{Role: events.RoleTool, Content: []events.Part{events.ToolResultParts("toolu_1", []events.Part{
				events.TextPart("the screen:"),
				events.ImagePart("image/png", pngBytes),
				events.FilePart("application/pdf", "", pdfBytes),
			}, false)}},
		}}
	body, _ := sent(t, req)
	want := jsonOf(t, `[
	 {"role":"user","content":[
	  {"type":"text","text":"what is in these?"},
	  {"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+b64(pngBytes)+`"}},
	  {"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}},
	  {"type":"document","title":"report.pdf","source":{"type":"base64","media_type":"application/pdf","data":"`+b64(pdfBytes)+`"}},
	  {"type":"document","source":{"type":"url","url":"https://example.com/paper.pdf"}},
	  {"type":"document","title":"notes.txt","source":{"type":"text","media_type":"text/plain","data":"plain notes"}}]},
	 {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"screenshot","input":{}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":false,"content":[
	  {"type":"text","text":"the screen:"},
	  {"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+b64(pngBytes)+`"}},
	  {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"`+b64(pdfBytes)+`"}}]}]}]`)
	checkField(t, body, "messages", want)
}

// An assistant turn takes no image or document blocks: an assistant
// message's images and files go in the user turn after it, led by a text
// block saying whose they are, after that turn's tool_result blocks (the
// API wants those first) and before its text. An assistant message of
// media only says where they went.
func TestAssistantMedia(t *testing.T) {
	req := &llm.Request{Model: "anthropic:claude-sonnet-4-5", MaxTokens: 100,
		ModelOptions: events.ModelOptions{Cache: noCache()},
		Messages: []events.Message{
			events.UserText("chart the sales"),
			{Role: events.RoleAssistant, Content: []events.Part{
				events.TextPart("Here is the chart."),
				events.ToolUsePart("toolu_1", "render", json.RawMessage(`{}`)),
				events.ImagePart("image/png", pngBytes),
				events.FilePart("application/pdf", "sales.pdf", pdfBytes),
			}},
			{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("toolu_1", "rendered", false)}},
			events.UserText("now in blue?"),
			{Role: events.RoleAssistant, Content: []events.Part{events.ImagePart("image/png", pngBytes)}},
		}}
	body, _ := sent(t, req)
	want := jsonOf(t, `[
	 {"role":"user","content":[{"type":"text","text":"chart the sales"}]},
	 {"role":"assistant","content":[
	  {"type":"text","text":"Here is the chart."},
	  {"type":"tool_use","id":"toolu_1","name":"render","input":{}}]},
	 {"role":"user","content":[
	  {"type":"tool_result","tool_use_id":"toolu_1","is_error":false,"content":[{"type":"text","text":"rendered"}]},
	  {"type":"text","text":"[images and files of the assistant's message above]"},
	  {"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+b64(pngBytes)+`"}},
	  {"type":"document","title":"sales.pdf","source":{"type":"base64","media_type":"application/pdf","data":"`+b64(pdfBytes)+`"}},
	  {"type":"text","text":"now in blue?"}]},
	 {"role":"assistant","content":[{"type":"text","text":"[the images and files of this message follow in a user message]"}]},
	 {"role":"user","content":[
	  {"type":"text","text":"[images and files of the assistant's message above]"},
	  {"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+b64(pngBytes)+`"}}]}]`)
	checkField(t, body, "messages", want)
}

// A part the Messages API cannot take is refused with
// unsupported_content, naming the part, before any HTTP request.
func TestUnsupportedContent(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(providertest.MustLoadFixture(t, textFixture)))
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL()})
	for name, part := range map[string]events.Part{
		"audio":            events.FilePart("audio/wav", "a.wav", []byte("RIFF\x00\x00\x00\x00WAVEfmt ")),
		"text file by url": {Type: events.PartFile, MediaType: "text/plain", URL: "https://example.com/a.txt"},
	} {
		t.Run(name, func(t *testing.T) {
			for _, msg := range []events.Message{
				{Role: events.RoleUser, Content: []events.Part{events.TextPart("hear this"), part}},
				{Role: events.RoleTool, Content: []events.Part{events.ToolResultParts("toolu_1", []events.Part{events.TextPart("x"), part}, false)}},
			} {
				req := simpleRequest()
				req.Messages = []events.Message{
					events.UserText("go"),
					{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("toolu_1", "f", nil)}},
					msg,
				}
				_, err := p.Stream(context.Background(), req)
				if kind, _ := llm.KindOf(err); kind != llm.KindUnsupportedContent {
					t.Fatalf("err = %v (kind %q), want unsupported_content", err, kind)
				}
				field := "messages[2].content[1]"
				if msg.Role == events.RoleTool {
					field = "messages[2].content[0].content[1]"
				}
				if !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "anthropic") {
					t.Errorf("error %q does not name %s and the provider", err, field)
				}
			}
		})
	}
	if n := srv.RequestCount(); n != 0 {
		t.Errorf("%d HTTP requests, want none", n)
	}
}

// A part with only a media ref (ingest resolves refs) is an invalid
// request naming the field.
func TestUnresolvedRef(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(providertest.MustLoadFixture(t, textFixture)))
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL()})
	req := simpleRequest()
	req.Messages = []events.Message{{Role: events.RoleUser, Content: []events.Part{
		events.TextPart("see"),
		{Type: events.PartImage, MediaType: "image/png", Ref: "sha256:" + strings.Repeat("ab", 32), Size: 10},
	}}}
	_, err := p.Stream(context.Background(), req)
	if !errors.Is(err, anthropic.ErrInvalidRequest) || !strings.Contains(err.Error(), "messages[0].content[1].ref") {
		t.Fatalf("err = %v, want ErrInvalidRequest naming messages[0].content[1].ref", err)
	}
	if kind, _ := llm.KindOf(err); kind != llm.KindInvalidRequest {
		t.Errorf("kind %q, want invalid_request", kind)
	}
	if n := srv.RequestCount(); n != 0 {
		t.Errorf("%d HTTP requests, want none", n)
	}
}

func weatherTool() events.ToolDefinition {
	return events.ToolDefinition{Name: "get_weather", Description: "weather",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}
}

// tool_choice and parallel_tool_calls map to tool_choice
// ({"type":"auto"|"any"|"tool"|"none"}, disable_parallel_tool_use).
func TestToolChoice(t *testing.T) {
	f, tr := false, true
	cases := []struct {
		name     string
		choice   *events.ToolChoice
		parallel *bool
		want     string // "" = no tool_choice
	}{
		{"unset", nil, nil, ""},
		{"parallel true is the default", nil, &tr, ""},
		{"auto", &events.ToolChoice{Mode: events.ToolAuto}, nil, `{"type":"auto"}`},
		{"none", &events.ToolChoice{Mode: events.ToolNone}, nil, `{"type":"none"}`},
		{"required", &events.ToolChoice{Mode: events.ToolRequired}, nil, `{"type":"any"}`},
		{"named", events.ForceTool("get_weather"), nil, `{"type":"tool","name":"get_weather"}`},
		{"serial", nil, &f, `{"type":"auto","disable_parallel_tool_use":true}`},
		{"required serial", &events.ToolChoice{Mode: events.ToolRequired}, &f, `{"type":"any","disable_parallel_tool_use":true}`},
		{"named serial", events.ForceTool("get_weather"), &f, `{"type":"tool","name":"get_weather","disable_parallel_tool_use":true}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := simpleRequest()
			req.Tools = []events.ToolDefinition{weatherTool()}
			req.ToolChoice, req.ParallelToolCalls = c.choice, c.parallel
			body, _ := sent(t, req)
			var want any
			if c.want != "" {
				want = jsonOf(t, c.want)
			}
			checkField(t, body, "tool_choice", want)
		})
	}
}

// Without tools the API takes no tool_choice: auto, none and
// parallel_tool_calls false send none.
func TestToolChoiceWithoutTools(t *testing.T) {
	f := false
	for _, c := range []*events.ToolChoice{nil, {Mode: events.ToolAuto}, {Mode: events.ToolNone}} {
		req := simpleRequest()
		req.ToolChoice, req.ParallelToolCalls = c, &f
		body, _ := sent(t, req)
		checkField(t, body, "tool_choice", nil)
	}
}

// stop, top_p and top_k are stop_sequences, top_p and top_k; seed and the
// penalties do not exist in the Messages API: not sent, and warned about.
func TestSamplingAndWarnings(t *testing.T) {
	topP, topK, seed, pp, fp := 0.9, 40, int64(7), 0.5, -0.5
	req := simpleRequest()
	req.ModelOptions = events.ModelOptions{Stop: []string{"END", "\n\n"}, TopP: &topP, TopK: &topK,
		Seed: &seed, PresencePenalty: &pp, FrequencyPenalty: &fp}
	body, s := sent(t, req)
	checkField(t, body, "stop_sequences", []any{"END", "\n\n"})
	checkField(t, body, "top_p", 0.9)
	checkField(t, body, "top_k", 40.0)
	for _, k := range []string{"seed", "presence_penalty", "frequency_penalty"} {
		if _, ok := body[k]; ok {
			t.Errorf("%s sent", k)
		}
	}
	w, ok := s.(llm.Warner)
	if !ok {
		t.Fatalf("stream %T does not implement llm.Warner", s)
	}
	var got []string
	for _, x := range w.Warnings() {
		got = append(got, x.Setting)
		if !strings.Contains(x.Message, "anthropic") {
			t.Errorf("warning %q does not name the provider", x.Message)
		}
	}
	if want := []string{"seed", "presence_penalty", "frequency_penalty"}; !reflect.DeepEqual(got, want) {
		t.Errorf("warnings for %q, want %q", got, want)
	}
	// Without such settings, no warnings.
	_, s = sent(t, simpleRequest())
	if w, ok := s.(llm.Warner); ok && len(w.Warnings()) != 0 {
		t.Errorf("warnings %v for a request without unsupported settings", w.Warnings())
	}
}

// While thinking is on the Messages API refuses a temperature other than 1,
// any top_k and a top_p below 0.95 (its extended-thinking documentation):
// those are not sent and are warned about; accepted values are sent.
func TestSamplingWhileThinking(t *testing.T) {
	warned := func(s llm.Stream) []string {
		var got []string
		if w, ok := s.(llm.Warner); ok {
			for _, x := range w.Warnings() {
				got = append(got, x.Setting)
			}
		}
		return got
	}
	temp, topP, topK := 0.3, 0.9, 40
	for _, req := range []*llm.Request{
		{Model: "anthropic:claude-sonnet-4-5", Thinking: &events.ThinkingConfig{BudgetTokens: 2048}},
		{Model: "anthropic:claude-opus-4-6", ModelOptions: events.ModelOptions{ReasoningEffort: events.EffortLow}},
		{Model: "anthropic:claude-sonnet-4-5", ModelOptions: events.ModelOptions{ReasoningEffort: events.EffortLow}},
	} {
		req.Messages = []events.Message{events.UserText("think")}
		req.Temperature = &temp
		req.ModelOptions.TopP, req.ModelOptions.TopK = &topP, &topK
		body, s := sent(t, req)
		for _, k := range []string{"temperature", "top_k", "top_p"} {
			if v, ok := body[k]; ok {
				t.Errorf("%s: %s = %v sent while thinking", req.Model, k, v)
			}
		}
		if got, want := warned(s), []string{"temperature", "top_k", "top_p"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: warnings for %q, want %q", req.Model, got, want)
		}
	}
	one, high := 1.0, 0.97
	req := &llm.Request{Model: "anthropic:claude-sonnet-4-5", Thinking: &events.ThinkingConfig{BudgetTokens: 2048},
		Messages: []events.Message{events.UserText("think")}, Temperature: &one,
		ModelOptions: events.ModelOptions{TopP: &high}}
	body, s := sent(t, req)
	checkField(t, body, "temperature", 1.0)
	checkField(t, body, "top_p", 0.97)
	if got := warned(s); len(got) != 0 {
		t.Errorf("warnings %q for settings the API accepts while thinking", got)
	}
}

// reasoning_effort is a thinking budget on models that think with one
// (low 1024, medium 4096, high 16384 tokens) and adaptive thinking with
// output_config.effort on the models that have it (Claude 4.6 and later).
func TestReasoningEffort(t *testing.T) {
	cases := []struct {
		model     string
		effort    events.ReasoningEffort
		maxTokens int
		thinking  string
		output    string
		maxSent   float64
		warn      bool
	}{
		{"claude-sonnet-4-5", events.EffortLow, 0, `{"type":"enabled","budget_tokens":1024}`, "", 4096, false},
		{"claude-sonnet-4-5", events.EffortHigh, 0, `{"type":"enabled","budget_tokens":16384}`, "", 16384 + 4096, false},
		{"claude-sonnet-4-5", events.EffortMedium, 0, `{"type":"enabled","budget_tokens":4096}`, "", 8192, false},
		{"claude-3-7-sonnet-latest", events.EffortHigh, 32000, `{"type":"enabled","budget_tokens":16384}`, "", 32000, false},
		{"claude-haiku-4-5", events.EffortHigh, 8000, `{"type":"enabled","budget_tokens":7999}`, "", 8000, false},
		{"claude-haiku-4-5", events.EffortLow, 1000, "", "", 1000, true},
		{"claude-opus-4-6", events.EffortHigh, 0, `{"type":"adaptive"}`, `{"effort":"high"}`, 16384 + 4096, false},
		{"claude-sonnet-5", events.EffortLow, 0, `{"type":"adaptive"}`, `{"effort":"low"}`, 4096, false},
		{"claude-fable-5-1", events.EffortMedium, 2000, `{"type":"adaptive"}`, `{"effort":"medium"}`, 2000, false},
	}
	for _, c := range cases {
		t.Run(c.model+"/"+string(c.effort), func(t *testing.T) {
			req := &llm.Request{Model: "anthropic:" + c.model, MaxTokens: c.maxTokens,
				Messages: []events.Message{events.UserText("think")}, ModelOptions: events.ModelOptions{ReasoningEffort: c.effort}}
			body, s := sent(t, req)
			var thinking, output any
			if c.thinking != "" {
				thinking = jsonOf(t, c.thinking)
			}
			if c.output != "" {
				output = jsonOf(t, c.output)
			}
			checkField(t, body, "thinking", thinking)
			checkField(t, body, "output_config", output)
			checkField(t, body, "max_tokens", c.maxSent)
			w, _ := s.(llm.Warner)
			if got := w != nil && len(w.Warnings()) == 1 && w.Warnings()[0].Setting == "reasoning_effort"; got != c.warn {
				t.Errorf("reasoning_effort warned %v, want %v", got, c.warn)
			}
		})
	}
	// An explicit thinking budget wins; the effort is warned about.
	req := &llm.Request{Model: "anthropic:claude-sonnet-4-5", Messages: []events.Message{events.UserText("think")},
		Thinking: &events.ThinkingConfig{BudgetTokens: 2000}, ModelOptions: events.ModelOptions{ReasoningEffort: events.EffortHigh}}
	body, s := sent(t, req)
	checkField(t, body, "thinking", jsonOf(t, `{"type":"enabled","budget_tokens":2000}`))
	if w := s.(llm.Warner).Warnings(); len(w) != 1 || w[0].Setting != "reasoning_effort" {
		t.Errorf("warnings %v, want one for reasoning_effort", w)
	}
}

// provider_options["anthropic"] is applied to the body as a JSON Merge
// Patch: objects merge key by key, null removes a field, anything else
// replaces it.
func TestProviderOptions(t *testing.T) {
	temp := 1.0
	req := simpleRequest()
	req.Temperature = &temp
	req.Thinking = &events.ThinkingConfig{BudgetTokens: 2048}
	req.ProviderOptions = map[string]json.RawMessage{
		"anthropic": json.RawMessage(`{"metadata":{"user_id":"u-1"},"service_tier":"standard_only","max_tokens":7777,
			"thinking":{"display":"omitted"},"temperature":null,"weird.key":[1,2]}`),
		"gemini": json.RawMessage(`{"generationConfig":{"candidateCount":2}}`),
	}
	body, _ := sent(t, req)
	checkField(t, body, "metadata", map[string]any{"user_id": "u-1"})
	checkField(t, body, "service_tier", "standard_only")
	checkField(t, body, "max_tokens", 7777.0)
	checkField(t, body, "thinking", jsonOf(t, `{"type":"enabled","budget_tokens":2048,"display":"omitted"}`))
	checkField(t, body, "weird.key", []any{1.0, 2.0})
	if _, ok := body["temperature"]; ok {
		t.Error("temperature not removed by null")
	}
	if _, ok := body["generationConfig"]; ok {
		t.Error("another provider's options were sent")
	}
	// An empty key names no field.
	req.ProviderOptions = map[string]json.RawMessage{"anthropic": json.RawMessage(`{"metadata":{"":1}}`)}
	p := newProvider(t, anthropic.Config{BaseURL: "http://127.0.0.1:1"})
	if _, err := p.Stream(context.Background(), req); !errors.Is(err, anthropic.ErrInvalidRequest) ||
		!strings.Contains(err.Error(), "provider_options.anthropic.metadata") {
		t.Errorf("err = %v, want ErrInvalidRequest naming provider_options.anthropic.metadata", err)
	}
}

// Structured output on a model with structured outputs is
// output_config.format {"type":"json_schema","schema":…}.
func TestStructuredOutputNative(t *testing.T) {
	req := &llm.Request{Model: "anthropic:claude-sonnet-4-5", Messages: []events.Message{events.UserText("a city")},
		ModelOptions: events.ModelOptions{ResponseFormat: &events.ResponseFormat{Type: events.FormatJSONSchema, Name: "city",
			Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`)}}}
	body, _ := sent(t, req)
	checkField(t, body, "output_config", jsonOf(t, `{"format":{"type":"json_schema","schema":
		{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}}}`))
	checkField(t, body, "tools", nil)
	checkField(t, body, "tool_choice", nil)

	// A root $ref into the schema's definitions (invopop/jsonschema's
	// form for a Go type) is spelled out at the root, definitions kept.
	req.ResponseFormat.Schema = json.RawMessage(`{"$ref":"#/$defs/City","$defs":{"City":{"type":"object",
		"properties":{"name":{"type":"string"},"near":{"$ref":"#/$defs/City"}},"required":["name"],"additionalProperties":false}}}`)
	body, _ = sent(t, req)
	checkField(t, body, "output_config", jsonOf(t, `{"format":{"type":"json_schema","schema":
		{"type":"object","properties":{"name":{"type":"string"},"near":{"$ref":"#/$defs/City"}},"required":["name"],"additionalProperties":false,
		 "$defs":{"City":{"type":"object","properties":{"name":{"type":"string"},"near":{"$ref":"#/$defs/City"}},"required":["name"],"additionalProperties":false}}}}}`))

	// Structured outputs take closed objects only: an open one is closed.
	req.ResponseFormat.Schema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	body, _ = sent(t, req)
	checkField(t, body, "output_config", jsonOf(t, `{"format":{"type":"json_schema","schema":
		{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}}}`))
}

// forcedToolSSE is a Messages API stream in which the model calls tool
// name with input, streamed in two input_json_delta pieces, and stops with
// stop_reason tool_use, as the API streams a forced tool call.
func forcedToolSSE(name, input string) []byte {
	half := len(input) / 2
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-3-5-haiku-20241022\",\"stop_reason\":null,\"usage\":{\"input_tokens\":50,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_out\",\"name\":\"" + name + "\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":" + q(input[:half]) + "}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":" + q(input[half:]) + "}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":20}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
}

// On a model without structured outputs the schema is a tool the model is
// made to call, and the adapter turns that call back into the answer: the
// caller sees JSON text and end_turn, not a tool call.
func TestStructuredOutputForcedTool(t *testing.T) {
	schema := `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`
	cases := []struct {
		name       string
		format     events.ResponseFormat
		tools      []events.ToolDefinition
		toolSchema string // the output tool's input_schema
		choice     string
		input      string // the call's input as streamed
		answer     string // the text the caller sees
	}{
		{name: "object schema, no other tools",
			format:     events.ResponseFormat{Type: events.FormatJSONSchema, Name: "city", Schema: json.RawMessage(schema)},
			toolSchema: schema, choice: `{"type":"tool","name":"city"}`,
			input: `{"name":"Paris"}`, answer: `{"name":"Paris"}`},
		{name: "array schema is wrapped",
			format:     events.ResponseFormat{Type: events.FormatJSONSchema, Schema: json.RawMessage(`{"type":"array","items":{"type":"string"}}`)},
			toolSchema: `{"type":"object","properties":{"value":{"type":"array","items":{"type":"string"}}},"required":["value"]}`,
			choice:     `{"type":"tool","name":"output"}`,
			input:      `{"value":["a","b"]}`, answer: `["a","b"]`},
		{name: "root $ref is spelled out at the root",
			format: events.ResponseFormat{Type: events.FormatJSONSchema, Name: "city",
				Schema: json.RawMessage(`{"$ref":"#/$defs/City","$defs":{"City":{"type":"object","properties":{"name":{"type":"string"}}}}}`)},
			toolSchema: `{"type":"object","properties":{"name":{"type":"string"}},
				"$defs":{"City":{"type":"object","properties":{"name":{"type":"string"}}}}}`,
			choice: `{"type":"tool","name":"city"}`,
			input:  `{"name":"Nice"}`, answer: `{"name":"Nice"}`},
		{name: "array schema with definitions: they stay at the root",
			format: events.ResponseFormat{Type: events.FormatJSONSchema, Name: "cities",
				Schema: json.RawMessage(`{"type":"array","items":{"$ref":"#/$defs/City"},"$defs":{"City":{"type":"string"}}}`)},
			toolSchema: `{"type":"object","properties":{"value":{"type":"array","items":{"$ref":"#/$defs/City"}}},"required":["value"],
				"$defs":{"City":{"type":"string"}}}`,
			choice: `{"type":"tool","name":"cities"}`,
			input:  `{"value":["Nice"]}`, answer: `["Nice"]`},
		{name: "json without schema",
			format:     events.ResponseFormat{Type: events.FormatJSON},
			toolSchema: `{"type":"object","properties":{}}`, choice: `{"type":"tool","name":"output"}`,
			input: `{"ok":true}`, answer: `{"ok":true}`},
		{name: "other tools: any tool",
			format: events.ResponseFormat{Type: events.FormatJSONSchema, Name: "city", Schema: json.RawMessage(schema)},
			tools:  []events.ToolDefinition{weatherTool()}, toolSchema: schema, choice: `{"type":"any"}`,
			input: `{"name":"Lyon"}`, answer: `{"name":"Lyon"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := c.format.SchemaName()
			srv := providertest.NewServer(t, providertest.SSE(forcedToolSSE(name, c.input)))
			p := newProvider(t, anthropic.Config{BaseURL: srv.URL()})
			req := &llm.Request{Model: "anthropic:claude-3-5-haiku-latest", Tools: c.tools,
				Messages:     []events.Message{events.UserText("a city")},
				ModelOptions: events.ModelOptions{ResponseFormat: &c.format, Cache: noCache()}}
			evs := providertest.MustRun(t, p, req)
			var body map[string]any
			if err := json.Unmarshal(srv.LastRequest().Body, &body); err != nil {
				t.Fatal(err)
			}
			tools, _ := body["tools"].([]any)
			if len(tools) != len(c.tools)+1 {
				t.Fatalf("tools %v, want the request's and the output tool", body["tools"])
			}
			want := jsonOf(t, `{"name":"`+name+`","description":"`+anthropic.DefaultOutputDescription+`","input_schema":`+c.toolSchema+`}`)
			if !reflect.DeepEqual(tools[len(tools)-1], want) {
				gb, _ := json.Marshal(tools[len(tools)-1])
				t.Errorf("output tool %s", gb)
			}
			checkField(t, body, "tool_choice", jsonOf(t, c.choice))
			checkField(t, body, "output_config", nil)
			if err := providertest.StrictWellFormed(evs); err != nil {
				t.Fatal(err)
			}
			got := providertest.Summarize(t, evs)
			if got.Text != c.answer || len(got.Calls) != 0 || got.StopReason != events.StopEndTurn || got.Status != events.StatusCompleted {
				t.Errorf("caller saw text %q, %d calls, stop %q, status %s; want text %q, no call, end_turn",
					got.Text, len(got.Calls), got.StopReason, got.Status, c.answer)
			}
		})
	}
}

// A real tool call next to the output tool stays a tool call, and the
// step still stops for tool use.
func TestStructuredOutputWithToolCall(t *testing.T) {
	body := string(forcedToolSSE("get_weather", `{"city":"Paris"}`))
	srv := providertest.NewServer(t, providertest.SSE([]byte(body)))
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL()})
	req := &llm.Request{Model: "anthropic:claude-3-5-haiku-latest", Tools: []events.ToolDefinition{weatherTool()},
		Messages: []events.Message{events.UserText("a city")},
		ModelOptions: events.ModelOptions{ResponseFormat: &events.ResponseFormat{Type: events.FormatJSONSchema, Name: "city",
			Schema: json.RawMessage(`{"type":"object"}`)}}}
	got := providertest.Summarize(t, providertest.MustRun(t, p, req))
	if len(got.Calls) != 1 || got.Calls[0].Name != "get_weather" || got.StopReason != events.StopToolUse || got.Text != "" {
		t.Errorf("calls %+v, stop %q, text %q; want the get_weather call and tool_use", got.Calls, got.StopReason, got.Text)
	}
}

// A format named like one of the request's tools is refused.
func TestStructuredOutputNameClash(t *testing.T) {
	p := newProvider(t, anthropic.Config{BaseURL: "http://127.0.0.1:1"})
	req := &llm.Request{Model: "anthropic:claude-3-5-haiku-latest", Tools: []events.ToolDefinition{weatherTool()},
		Messages:     []events.Message{events.UserText("x")},
		ModelOptions: events.ModelOptions{ResponseFormat: &events.ResponseFormat{Type: events.FormatJSON, Name: "get_weather"}}}
	if _, err := p.Stream(context.Background(), req); !errors.Is(err, anthropic.ErrInvalidRequest) || !strings.Contains(err.Error(), "response_format.name") {
		t.Fatalf("err = %v, want ErrInvalidRequest naming response_format.name", err)
	}
}

// The API refuses a forced tool with thinking on: the output tool is then
// offered with tool_choice auto.
func TestStructuredOutputForcedToolWithThinking(t *testing.T) {
	req := &llm.Request{Model: "anthropic:claude-3-7-sonnet-latest", Messages: []events.Message{events.UserText("a city")},
		Thinking: &events.ThinkingConfig{BudgetTokens: 1024},
		ModelOptions: events.ModelOptions{ResponseFormat: &events.ResponseFormat{Type: events.FormatJSONSchema, Name: "city",
			Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)}}}
	body, _ := sent(t, req)
	checkField(t, body, "tool_choice", jsonOf(t, `{"type":"auto"}`))
	if tools, _ := body["tools"].([]any); len(tools) != 1 || tools[0].(map[string]any)["name"] != "city" {
		t.Errorf("tools %v, want the output tool", body["tools"])
	}
}
