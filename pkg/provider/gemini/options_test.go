package gemini_test

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
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// Media bytes with the signatures events' validation sniffs.
var (
	pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR-test-image")
	pdfBytes = []byte("%PDF-1.4\n% test document\n")
	wavBytes = []byte("RIFF\x24\x00\x00\x00WAVEfmt ")
	b64      = base64.StdEncoding.EncodeToString
)

// sent runs req through the adapter and genai to a local server and
// returns the JSON body the server received, decoded, and the stream.
func sent(t *testing.T, req *llm.Request) (map[string]any, llm.Stream) {
	t.Helper()
	srv := providertest.NewServer(t, providertest.SSE(providertest.MustLoadFixture(t, textFixture)))
	p := newProvider(t, gemini.Config{BaseURL: srv.URL()})
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

func warnings(t *testing.T, s llm.Stream) []string {
	t.Helper()
	w, ok := s.(llm.Warner)
	if !ok {
		return nil // a stream with no warnings need not say so
	}
	var out []string
	for _, x := range w.Warnings() {
		if !strings.Contains(x.Message, "gemini") {
			t.Errorf("warning %q does not name the provider", x.Message)
		}
		out = append(out, x.Setting)
	}
	return out
}

// Images and files in a user message are inlineData {mimeType, data} and,
// by URL, fileData {mimeType, fileUri} parts
// (https://ai.google.dev/api/caching#Part).
func TestMediaParts(t *testing.T) {
	req := &llm.Request{Model: "gemini:gemini-2.5-flash", Messages: []events.Message{{Role: events.RoleUser, Content: []events.Part{
		events.TextPart("what is in these?"),
		events.ImagePart("image/png", pngBytes),
		events.ImageURLPart("image/jpeg", "https://example.com/cat.jpg"),
		events.FilePart("application/pdf", "report.pdf", pdfBytes),
		{Type: events.PartFile, MediaType: "application/pdf", URL: "https://example.com/paper.pdf"},
		events.FilePart("text/plain", "notes.txt", []byte("plain notes")),
		events.FilePart("audio/wav", "a.wav", wavBytes),
	}}}}
	body, _ := sent(t, req)
	checkField(t, body, "contents", jsonOf(t, `[{"role":"user","parts":[
	 {"text":"what is in these?"},
	 {"inlineData":{"mimeType":"image/png","data":"`+b64(pngBytes)+`"}},
	 {"fileData":{"mimeType":"image/jpeg","fileUri":"https://example.com/cat.jpg"}},
	 {"inlineData":{"mimeType":"application/pdf","data":"`+b64(pdfBytes)+`"}},
	 {"fileData":{"mimeType":"application/pdf","fileUri":"https://example.com/paper.pdf"}},
	 {"inlineData":{"mimeType":"text/plain","data":"`+b64([]byte("plain notes"))+`"}},
	 {"inlineData":{"mimeType":"audio/wav","data":"`+b64(wavBytes)+`"}}]}]`))
}

// A model turn takes inlineData and fileData parts as a user turn does
// (image-generating models answer with them): an assistant message's
// images and files stay in its model turn, in order.
func TestAssistantMedia(t *testing.T) {
	req := &llm.Request{Model: "gemini:gemini-2.5-flash", Messages: []events.Message{
		events.UserText("chart the sales"),
		{Role: events.RoleAssistant, Content: []events.Part{
			events.TextPart("Here is the chart."),
			events.ImagePart("image/png", pngBytes),
			events.FilePart("application/pdf", "sales.pdf", pdfBytes),
		}},
		events.UserText("now in blue?"),
	}}
	body, _ := sent(t, req)
	checkField(t, body, "contents", jsonOf(t, `[
	 {"role":"user","parts":[{"text":"chart the sales"}]},
	 {"role":"model","parts":[
	  {"text":"Here is the chart."},
	  {"inlineData":{"mimeType":"image/png","data":"`+b64(pngBytes)+`"}},
	  {"inlineData":{"mimeType":"application/pdf","data":"`+b64(pdfBytes)+`"}}]},
	 {"role":"user","parts":[{"text":"now in blue?"}]}]`))
}

func toolResultTranscript() []events.Message {
	return []events.Message{
		events.UserText("take a screenshot"),
		{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("call-1", "screenshot", json.RawMessage(`{}`))}},
		{Role: events.RoleTool, Content: []events.Part{events.ToolResultParts("call-1", []events.Part{
			events.TextPart("the screen"),
			events.ImagePart("image/png", pngBytes),
			events.FilePart("audio/wav", "", wavBytes),
		}, false)}},
	}
}

// A tool result with media: on Gemini 3 the image goes in the
// functionResponse's parts (multimodal function responses); media a
// function response does not take (audio), and every media part on
// earlier models, follow the functionResponse in the same user turn.
func TestToolResultMedia(t *testing.T) {
	body, _ := sent(t, &llm.Request{Model: "gemini:gemini-3-pro-preview", Messages: toolResultTranscript()})
	contents := body["contents"].([]any)
	checkField(t, map[string]any{"c": contents[2]}, "c", jsonOf(t, `{"role":"user","parts":[
	 {"functionResponse":{"id":"call-1","name":"screenshot","response":{"output":"the screen"},
	   "parts":[{"inlineData":{"mimeType":"image/png","data":"`+b64(pngBytes)+`"}}]}},
	 {"text":"Media returned by the screenshot call call-1:"},
	 {"inlineData":{"mimeType":"audio/wav","data":"`+b64(wavBytes)+`"}}]}`))

	body, _ = sent(t, &llm.Request{Model: "gemini:gemini-2.5-flash", Messages: toolResultTranscript()})
	contents = body["contents"].([]any)
	checkField(t, map[string]any{"c": contents[2]}, "c", jsonOf(t, `{"role":"user","parts":[
	 {"functionResponse":{"id":"call-1","name":"screenshot","response":{"output":"the screen"}}},
	 {"text":"Media returned by the screenshot call call-1:"},
	 {"inlineData":{"mimeType":"image/png","data":"`+b64(pngBytes)+`"}},
	 {"inlineData":{"mimeType":"audio/wav","data":"`+b64(wavBytes)+`"}}]}`))
}

// A part with only a media ref (ingest resolves refs) is an invalid
// request naming the field, refused before any HTTP request.
func TestUnresolvedRef(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(providertest.MustLoadFixture(t, textFixture)))
	p := newProvider(t, gemini.Config{BaseURL: srv.URL()})
	req := simpleRequest()
	msgs := toolResultTranscript()
	msgs[2].Content[0].Parts[1] = events.Part{Type: events.PartImage, MediaType: "image/png", Ref: "sha256:" + strings.Repeat("cd", 32)}
	req.Messages = msgs
	_, err := p.Stream(context.Background(), req)
	if !errors.Is(err, gemini.ErrInvalidRequest) || !strings.Contains(err.Error(), "messages[2].content[0].content[1].ref") {
		t.Fatalf("err = %v, want ErrInvalidRequest naming messages[2].content[0].content[1].ref", err)
	}
	if kind, _ := llm.KindOf(err); kind != llm.KindInvalidRequest {
		t.Errorf("kind %q, want invalid_request", kind)
	}
	if n := srv.RequestCount(); n != 0 {
		t.Errorf("%d HTTP requests, want none", n)
	}
}

// response_format is responseMimeType application/json, with
// responseJsonSchema for a schema (generationConfig).
func TestResponseFormat(t *testing.T) {
	req := simpleRequest()
	req.ResponseFormat = &events.ResponseFormat{Type: events.FormatJSONSchema, Name: "city",
		Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)}
	body, _ := sent(t, req)
	checkField(t, body, "generationConfig", jsonOf(t, `{"responseMimeType":"application/json",
	 "responseJsonSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}`))

	req = simpleRequest()
	req.ResponseFormat = &events.ResponseFormat{Type: events.FormatJSON}
	body, _ = sent(t, req)
	checkField(t, body, "generationConfig", jsonOf(t, `{"responseMimeType":"application/json"}`))
}

// tool_choice is toolConfig.functionCallingConfig {mode AUTO|ANY|NONE,
// allowedFunctionNames}; parallel_tool_calls false has no Gemini setting
// and is warned about.
func TestToolChoice(t *testing.T) {
	f := false
	cases := []struct {
		name     string
		choice   *events.ToolChoice
		parallel *bool
		want     string
		warn     []string
	}{
		{"unset", nil, nil, "", nil},
		{"auto", &events.ToolChoice{Mode: events.ToolAuto}, nil, `{"functionCallingConfig":{"mode":"AUTO"}}`, nil},
		{"none", &events.ToolChoice{Mode: events.ToolNone}, nil, `{"functionCallingConfig":{"mode":"NONE"}}`, nil},
		{"required", &events.ToolChoice{Mode: events.ToolRequired}, nil, `{"functionCallingConfig":{"mode":"ANY"}}`, nil},
		{"named", events.ForceTool("get_weather"), nil, `{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["get_weather"]}}`, nil},
		{"serial", nil, &f, "", []string{"parallel_tool_calls"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := simpleRequest()
			req.Tools = []events.ToolDefinition{{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object"}`)}}
			req.ToolChoice, req.ParallelToolCalls = c.choice, c.parallel
			body, s := sent(t, req)
			var want any
			if c.want != "" {
				want = jsonOf(t, c.want)
			}
			checkField(t, body, "toolConfig", want)
			if got := warnings(t, s); !reflect.DeepEqual(got, c.warn) {
				t.Errorf("warnings %q, want %q", got, c.warn)
			}
		})
	}
}

// stop and sampling are generationConfig's stopSequences, topP, topK,
// seed, presencePenalty and frequencyPenalty.
func TestSampling(t *testing.T) {
	topP, topK, seed, pp, fp := 0.5, 40, int64(7), 0.25, -0.5
	req := simpleRequest()
	req.ModelOptions = events.ModelOptions{Stop: []string{"END"}, TopP: &topP, TopK: &topK, Seed: &seed,
		PresencePenalty: &pp, FrequencyPenalty: &fp}
	body, s := sent(t, req)
	checkField(t, body, "generationConfig", jsonOf(t, `{"stopSequences":["END"],"topP":0.5,"topK":40,"seed":7,
	 "presencePenalty":0.25,"frequencyPenalty":-0.5}`))
	if w := warnings(t, s); len(w) != 0 {
		t.Errorf("warnings %q", w)
	}
	// A seed the API's int32 cannot hold is not sent.
	big := int64(1) << 40
	req = simpleRequest()
	req.Seed = &big
	body, s = sent(t, req)
	if gc, _ := body["generationConfig"].(map[string]any); gc["seed"] != nil {
		t.Errorf("seed %v sent", gc["seed"])
	}
	if w := warnings(t, s); !reflect.DeepEqual(w, []string{"seed"}) {
		t.Errorf("warnings %q, want seed", w)
	}
}

// reasoning_effort is thinkingConfig.thinkingLevel on Gemini 3 and
// thinkingConfig.thinkingBudget (1024, 4096, 16384) on earlier models; an explicit
// thinking budget wins, with a warning.
func TestReasoningEffort(t *testing.T) {
	cases := []struct {
		model  string
		effort events.ReasoningEffort
		want   string
	}{
		{"gemini-2.5-flash", events.EffortLow, `{"thinkingBudget":1024,"includeThoughts":true}`},
		{"gemini-2.5-pro", events.EffortMedium, `{"thinkingBudget":4096,"includeThoughts":true}`},
		{"gemini-2.5-pro", events.EffortHigh, `{"thinkingBudget":16384,"includeThoughts":true}`},
		{"gemini-3-pro-preview", events.EffortLow, `{"thinkingLevel":"LOW","includeThoughts":true}`},
		{"gemini-3.1-flash", events.EffortMedium, `{"thinkingLevel":"MEDIUM","includeThoughts":true}`},
		{"gemini-3-pro-preview", events.EffortHigh, `{"thinkingLevel":"HIGH","includeThoughts":true}`},
	}
	for _, c := range cases {
		t.Run(c.model+"/"+string(c.effort), func(t *testing.T) {
			req := &llm.Request{Model: "gemini:" + c.model, Messages: []events.Message{events.UserText("think")},
				ModelOptions: events.ModelOptions{ReasoningEffort: c.effort}}
			body, _ := sent(t, req)
			checkField(t, body, "generationConfig", map[string]any{"thinkingConfig": jsonOf(t, c.want)})
		})
	}
	req := &llm.Request{Model: "gemini:gemini-2.5-pro", Messages: []events.Message{events.UserText("think")},
		Thinking: &events.ThinkingConfig{BudgetTokens: 300}, ModelOptions: events.ModelOptions{ReasoningEffort: events.EffortHigh}}
	body, s := sent(t, req)
	checkField(t, body, "generationConfig", jsonOf(t, `{"thinkingConfig":{"thinkingBudget":300,"includeThoughts":true}}`))
	if w := warnings(t, s); !reflect.DeepEqual(w, []string{"reasoning_effort"}) {
		t.Errorf("warnings %q, want reasoning_effort", w)
	}
}

// provider_options["gemini"] is applied to the request body as a JSON
// Merge Patch: objects merge key by key, null removes a field, anything
// else replaces it.
func TestProviderOptions(t *testing.T) {
	temp := 0.5
	req := simpleRequest()
	req.MaxTokens = 100
	req.Temperature = &temp
	req.ProviderOptions = map[string]json.RawMessage{
		"gemini": json.RawMessage(`{"generationConfig":{"candidateCount":1,"responseLogprobs":true,"temperature":null},
			"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}]}`),
		"anthropic": json.RawMessage(`{"metadata":{"user_id":"x"}}`),
	}
	body, _ := sent(t, req)
	checkField(t, body, "generationConfig", jsonOf(t, `{"maxOutputTokens":100,"candidateCount":1,"responseLogprobs":true}`))
	checkField(t, body, "safetySettings", jsonOf(t, `[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}]`))
	if _, ok := body["metadata"]; ok {
		t.Error("another provider's options were sent")
	}
	req.ProviderOptions = map[string]json.RawMessage{"gemini": json.RawMessage(`{"generationConfig":{"":1}}`)}
	p := newProvider(t, gemini.Config{BaseURL: "http://127.0.0.1:1"})
	if _, err := p.Stream(context.Background(), req); !errors.Is(err, gemini.ErrInvalidRequest) ||
		!strings.Contains(err.Error(), "provider_options.gemini.generationConfig") {
		t.Errorf("err = %v, want ErrInvalidRequest naming provider_options.gemini.generationConfig", err)
	}
}

// cachedContentTokenCount is the usage's cache_read_input_tokens.
func TestCachedTokens(t *testing.T) {
	chunk := `data: {"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"finishReason":"STOP"}],` +
		`"usageMetadata":{"promptTokenCount":2000,"cachedContentTokenCount":1536,"candidatesTokenCount":1,"totalTokenCount":2001},"modelVersion":"gemini-2.5-flash"}` + "\r\n\r\n"
	srv := providertest.NewServer(t, providertest.SSE([]byte(chunk)))
	p := newProvider(t, gemini.Config{BaseURL: srv.URL()})
	got := providertest.Summarize(t, providertest.MustRun(t, p, simpleRequest()))
	if got.Usage == nil || !providertest.EqualInt64(got.Usage.CacheReadInputTokens, providertest.Int64(1536)) ||
		!providertest.EqualInt64(got.Usage.InputTokens, providertest.Int64(2000)) {
		t.Errorf("usage %s, want input 2000 with 1536 read from the cache", providertest.UsageJSON(got.Usage))
	}
}
