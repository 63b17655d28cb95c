package bedrock_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/bedrock"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

var (
	// A 1×1 PNG and a minimal PDF, as the media validation sniffs them.
	pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	pdfBytes = []byte("%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n")
)

func textFixture(t *testing.T) []byte {
	return providertest.MustLoadFixture(t, filepath.Join("bedrock", "text-cache-usage.chunks.jsonl"))
}

func TestRequestMapping(t *testing.T) {
	srv := providertest.NewServer(t, providertest.EventStreamResponse(textFixture(t)))
	p := newProvider(t, srv)
	temp, topP, topK := 0.5, 0.9, 40
	req := &llm.Request{
		Model:       "bedrock:" + testModel,
		System:      "be brief",
		MaxTokens:   1000,
		Temperature: &temp,
		Thinking:    &events.ThinkingConfig{BudgetTokens: 512},
		Tools: []events.ToolDefinition{{
			Name: "get_weather", Description: "weather of a city",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		}},
		Messages: []events.Message{
			{Role: events.RoleUser, Content: []events.Part{
				events.TextPart("what is in these?"),
				events.ImagePart("image/png", pngBytes),
				events.FilePart("application/pdf", "Q3 report (final).pdf", pdfBytes),
			}},
			{Role: events.RoleAssistant, Content: []events.Part{
				events.ToolUsePart("tooluse_1", "get_weather", json.RawMessage(`{"city":"Paris"}`)),
			}},
			{Role: events.RoleTool, Content: []events.Part{
				events.ToolResultParts("tooluse_1", []events.Part{events.TextPart("sunny"), events.ImagePart("image/png", pngBytes)}, false),
			}},
		},
	}
	req.TopP, req.TopK = &topP, &topK
	req.Stop = []string{"END"}
	req.ToolChoice = events.ForceTool("get_weather")
	seed := int64(7)
	req.Seed = &seed
	req.ProviderOptions = map[string]json.RawMessage{"bedrock": json.RawMessage(`{"anthropic_beta":["context-1m-2025-08-07"]}`)}

	s, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	w, ok := s.(llm.Warner)
	if !ok || len(w.Warnings()) != 1 || w.Warnings()[0].Setting != "seed" {
		t.Errorf("warnings: %v %v, want one for seed", ok, w)
	}
	providertest.MustCollect(t, s)

	b64 := base64.StdEncoding.EncodeToString
	providertest.AssertJSON(t, srv.LastRequest().Body, `{
		"system": [{"text": "be brief"}, {"cachePoint": {"type": "default"}}],
		"inferenceConfig": {"maxTokens": 1000, "temperature": 0.5, "topP": 0.9, "stopSequences": ["END"]},
		"additionalModelRequestFields": {
			"thinking": {"type": "enabled", "budget_tokens": 512},
			"top_k": 40,
			"anthropic_beta": ["context-1m-2025-08-07"]
		},
		"toolConfig": {
			"tools": [
				{"toolSpec": {"name": "get_weather", "description": "weather of a city",
					"inputSchema": {"json": {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}},
				{"cachePoint": {"type": "default"}}
			],
			"toolChoice": {"tool": {"name": "get_weather"}}
		},
		"messages": [
			{"role": "user", "content": [
				{"text": "what is in these?"},
				{"image": {"format": "png", "source": {"bytes": "`+b64(pngBytes)+`"}}},
				{"document": {"format": "pdf", "name": "Q3 report (final)", "source": {"bytes": "`+b64(pdfBytes)+`"}}}
			]},
			{"role": "assistant", "content": [
				{"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {"city": "Paris"}}}
			]},
			{"role": "user", "content": [
				{"toolResult": {"toolUseId": "tooluse_1", "content": [
					{"text": "sunny"},
					{"image": {"format": "png", "source": {"bytes": "`+b64(pngBytes)+`"}}}
				]}},
				{"cachePoint": {"type": "default"}}
			]}
		]
	}`)
}

// Only a user turn may hold images and documents (the Converse API's
// Message.Content): an assistant message's images and files go in the
// user turn after it, led by a text block saying whose they are, after
// that turn's toolResult blocks and before its text. An assistant message
// of media only says where they went.
func TestAssistantMedia(t *testing.T) {
	srv := providertest.NewServer(t, providertest.EventStreamResponse(textFixture(t)))
	off := false
	req := &llm.Request{Model: "bedrock:" + testModel, ModelOptions: events.ModelOptions{Cache: &off},
		Messages: []events.Message{
			events.UserText("chart the sales"),
			{Role: events.RoleAssistant, Content: []events.Part{
				events.TextPart("Here is the chart."),
				events.ToolUsePart("tooluse_1", "render", json.RawMessage(`{}`)),
				events.ImagePart("image/png", pngBytes),
				events.FilePart("application/pdf", "sales.pdf", pdfBytes),
			}},
			{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("tooluse_1", "rendered", false)}},
			events.UserText("now in blue?"),
			{Role: events.RoleAssistant, Content: []events.Part{events.ImagePart("image/png", pngBytes)}},
		}}
	providertest.MustRun(t, newProvider(t, srv), req)
	b64 := base64.StdEncoding.EncodeToString
	providertest.AssertJSON(t, srv.LastRequest().Body, `{
		"messages": [
			{"role": "user", "content": [{"text": "chart the sales"}]},
			{"role": "assistant", "content": [
				{"text": "Here is the chart."},
				{"toolUse": {"toolUseId": "tooluse_1", "name": "render", "input": {}}}
			]},
			{"role": "user", "content": [
				{"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "rendered"}]}},
				{"text": "[images and files of the assistant's message above]"},
				{"image": {"format": "png", "source": {"bytes": "`+b64(pngBytes)+`"}}},
				{"document": {"format": "pdf", "name": "sales", "source": {"bytes": "`+b64(pdfBytes)+`"}}},
				{"text": "now in blue?"}
			]},
			{"role": "assistant", "content": [{"text": "[the images and files of this message follow in a user message]"}]},
			{"role": "user", "content": [
				{"text": "[images and files of the assistant's message above]"},
				{"image": {"format": "png", "source": {"bytes": "`+b64(pngBytes)+`"}}}
			]}
		]
	}`)
}

func TestNoCacheAndOtherModels(t *testing.T) {
	srv := providertest.NewServer(t, providertest.EventStreamResponse(textFixture(t)))
	p := newProvider(t, srv)

	// Cache off: no cache points anywhere.
	off := false
	req := providertest.SimpleRequest("bedrock:" + testModel)
	req.System = "sys"
	req.Cache = &off
	providertest.MustRun(t, p, req)
	if strings.Contains(string(srv.LastRequest().Body), "cachePoint") {
		t.Errorf("cache off, body %s", srv.LastRequest().Body)
	}

	// A model without prompt caching or thinking: neither is sent, and
	// the thinking budget and penalty are warned about.
	pen := 0.5
	req = providertest.SimpleRequest("bedrock:meta.llama3-70b-instruct-v1:0")
	req.System = "sys"
	req.Thinking = &events.ThinkingConfig{BudgetTokens: 1024}
	req.FrequencyPenalty = &pen
	s, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var settings []string
	if w, ok := s.(llm.Warner); ok {
		for _, x := range w.Warnings() {
			settings = append(settings, x.Setting)
		}
	}
	providertest.MustCollect(t, s)
	if strings.Join(settings, ",") != "thinking,frequency_penalty" {
		t.Errorf("warnings %v, want thinking and frequency_penalty", settings)
	}
	body := string(srv.LastRequest().Body)
	if strings.Contains(body, "cachePoint") || strings.Contains(body, "thinking") {
		t.Errorf("body %s", body)
	}
}

func TestRefusedContent(t *testing.T) {
	srv := providertest.NewServer(t, providertest.EventStreamResponse(textFixture(t)))
	p := newProvider(t, srv)
	req := providertest.SimpleRequest("bedrock:" + testModel)
	req.Messages[0].Content = append(req.Messages[0].Content, events.ImageURLPart("image/png", "https://example.com/a.png"))
	_, err := p.Stream(context.Background(), req)
	if k, _ := llm.KindOf(err); k != llm.KindUnsupportedContent || !strings.Contains(err.Error(), "messages[0].content[1]") {
		t.Errorf("image URL: %v (kind %s)", err, k)
	}
	req = providertest.SimpleRequest("bedrock:" + testModel)
	req.Tools = []events.ToolDefinition{{Name: "x", InputSchema: json.RawMessage(`[1]`)}}
	if _, err := p.Stream(context.Background(), req); !errors.Is(err, bedrock.ErrInvalidRequest) || !strings.Contains(err.Error(), "tools[0].input_schema") {
		t.Errorf("bad schema: %v", err)
	}
	if srv.RequestCount() != 0 {
		t.Errorf("%d requests sent for refused content", srv.RequestCount())
	}
}

// TestErrorsBeforeStream: Bedrock's error answers (the exception's name in
// X-Amzn-ErrorType, its message in the JSON body) become error kinds.
func TestErrorsBeforeStream(t *testing.T) {
	for _, tc := range []struct {
		status int
		typ    string
		kind   llm.ErrorKind
	}{
		{429, "ThrottlingException", llm.KindRateLimited},
		{400, "ValidationException", llm.KindInvalidRequest},
		{403, "AccessDeniedException", llm.KindAuth},
		{404, "ResourceNotFoundException", llm.KindUnknownModel},
		{503, "ServiceUnavailableException", llm.KindUnavailable},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			resp := providertest.Status(tc.status, "", `{"message":"no"}`)
			resp.Header.Set("X-Amzn-ErrorType", tc.typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
			srv := providertest.NewServer(t, resp)
			p := newProvider(t, srv)
			_, err := p.Stream(context.Background(), providertest.SimpleRequest("bedrock:"+testModel))
			kind, status, _, _ := llm.ClassifyError(err)
			if kind != tc.kind || status != tc.status || !errors.Is(err, bedrock.ErrRequestFailed) {
				t.Errorf("%v: kind %s status %d, want %s %d", err, kind, status, tc.kind, tc.status)
			}
		})
	}
}

func TestMissingCredentialsAndRegion(t *testing.T) {
	srv := providertest.NewServer(t, providertest.EventStreamResponse(textFixture(t)))
	awsEnv(t, srv.URL())
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	p, err := bedrock.New(bedrock.Config{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Stream(context.Background(), providertest.SimpleRequest("bedrock:"+testModel))
	if k, _ := llm.KindOf(err); k != llm.KindMissingAPIKey || !errors.Is(err, bedrock.ErrMissingCredentials) {
		t.Errorf("no credentials: %v (kind %s)", err, k)
	}
	if srv.RequestCount() != 0 {
		t.Error("an unsigned request was sent")
	}
	t.Setenv("AWS_REGION", "")
	if _, err := bedrock.New(bedrock.Config{}); !errors.Is(err, bedrock.ErrMissingRegion) {
		t.Errorf("no region: %v", err)
	}
}

func TestCancelAndIdle(t *testing.T) {
	// The stream's first messages, then silence.
	lines := providertest.ChunkLines(mustRead(t, "text-cache-usage.chunks.jsonl"))
	head, err := providertest.EventStream([]byte(string(lines[0]) + "\n" + string(lines[1]) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	stall := providertest.EventStreamResponse(head)
	stall.Stall = true
	srv := providertest.NewServer(t, stall)

	p := newProvider(t, srv, func(c *bedrock.Config) { c.IdleTimeout = 200 * time.Millisecond })
	evs := providertest.MustRun(t, p, providertest.SimpleRequest("bedrock:"+testModel))
	sum := providertest.Summarize(t, evs)
	if sum.Status != events.StatusFailed || len(sum.Errors) != 1 || sum.Errors[0].Code != "idle_timeout" {
		t.Errorf("idle: %+v", sum)
	}

	p = newProvider(t, srv)
	providertest.CollectCancelled(t, p, providertest.SimpleRequest("bedrock:"+testModel), func(e events.Event) bool {
		_, ok := e.(events.BlockDelta)
		return ok
	})
	providertest.CheckCloseUnblocks(t, p, providertest.SimpleRequest("bedrock:"+testModel))
}

// TestChunkedDelivery: the framing split across many small writes reads
// the same as one write.
func TestChunkedDelivery(t *testing.T) {
	resp := providertest.EventStreamResponse(providertest.MustLoadFixture(t, filepath.Join("bedrock", "text-then-tool-use-streamed-input.chunks.jsonl")))
	resp.ChunkSize = 7
	srv := providertest.NewServer(t, resp)
	p := newProvider(t, srv)
	sum := providertest.Summarize(t, providertest.MustRun(t, p, providertest.SimpleRequest("bedrock:"+testModel)))
	if len(sum.Calls) != 1 || sum.Calls[0].Input.(map[string]any)["city"] != "Paris" || sum.StopReason != events.StopToolUse {
		t.Errorf("%+v", sum)
	}
	if got := srv.LastRequest().Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("request content type %q", got)
	}
}

// TestConcurrentStreams: streams of one Provider run side by side, each
// decoding its own messages (the SDK client's protocol is shared).
func TestConcurrentStreams(t *testing.T) {
	files := []string{"text-cache-usage.chunks.jsonl", "reasoning-signature-then-text.chunks.jsonl", "text-then-tool-use-streamed-input.chunks.jsonl"}
	srvs := make([]*providertest.Server, len(files))
	wants := make([]expectation, len(files))
	for i, f := range files {
		resp := providertest.EventStreamResponse(providertest.MustLoadFixture(t, filepath.Join("bedrock", f)))
		resp.ChunkSize = 5
		srvs[i] = providertest.NewServer(t, resp)
		wants[i] = expect(t, filepath.Join("bedrock", f))
	}
	awsEnv(t, "")
	var wg sync.WaitGroup
	for i := range files {
		p := providertest.MustNew(t, bedrock.New, bedrock.Config{MaxRetries: -1, BaseURL: srvs[i].URL()})
		for range 4 {
			wg.Go(func() {
				s, err := p.Stream(context.Background(), providertest.SimpleRequest("bedrock:"+testModel))
				if err != nil {
					t.Error(err)
					return
				}
				evs, err := providertest.Collect(s)
				if err != nil {
					t.Error(err)
					return
				}
				var text strings.Builder
				for _, e := range evs {
					if d, ok := e.(events.BlockDelta); ok && d.Kind == events.DeltaText {
						text.WriteString(d.Content)
					}
				}
				if text.String() != wants[i].Text {
					t.Errorf("%s: text %q, want %q", files[i], text.String(), wants[i].Text)
				}
			})
		}
	}
	wg.Wait()
}
