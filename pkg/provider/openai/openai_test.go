package openai_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newProvider(t testing.TB, srv *providertest.Server, mod ...func(*openai.Config)) *openai.Provider {
	t.Helper()
	cfg := openai.Config{APIKey: "test-key", BaseURL: srv.URL(), MaxRetries: -1, IdleTimeout: 5 * time.Second}
	return providertest.MustNew(t, openai.New, cfg, mod...)
}

func simpleRequest() *llm.Request {
	req := providertest.SimpleRequest("openai:gpt-4o")
	req.RequestID = "r1"
	return req
}

// summary is what a test compares: derived once from the fixture bytes and
// once from the adapter's events.
type summary struct {
	Text, Thinking string
	Tools          []tool
	Usage          *events.UsageEvent
	Stop           events.StopReason // stop reason of the last block stop
	Status         events.StreamStatus
	ErrCode        string
	ErrMsg         string
	// Model and ResponseID of the completed status.
	Model, ResponseID string
}

type tool struct{ ID, Name, Args string }

func summarize(t *testing.T, evs []events.Event) summary {
	t.Helper()
	var s summary
	types := map[int]events.BlockType{}
	toolAt := map[int]int{}
	for _, ev := range evs {
		switch e := ev.(type) {
		case events.BlockStart:
			types[e.Index] = e.BlockType
			if e.BlockType == events.BlockToolUse {
				toolAt[e.Index] = len(s.Tools)
				s.Tools = append(s.Tools, tool{ID: e.ID, Name: e.Name})
			}
		case events.BlockDelta:
			switch e.Kind {
			case events.DeltaText:
				s.Text += e.Content
			case events.DeltaThinking:
				s.Thinking += e.Content
			case events.DeltaInputJSON:
				s.Tools[toolAt[e.Index]].Args += e.Content
			}
		case events.BlockStop:
			s.Stop = e.StopReason
		case events.UsageEvent:
			if s.Usage != nil {
				t.Errorf("more than one usage event")
			}
			u := e
			s.Usage = &u
		case events.ErrorEvent:
			s.ErrCode, s.ErrMsg = e.Code, e.Message
		case events.StatusEvent:
			s.Status = e.Status
			if e.Status == events.StatusCompleted {
				s.Model, s.ResponseID = e.Model, e.ResponseID
			}
		}
	}
	return s
}

// expectChat derives the expected summary from a Chat Completions fixture
// with plain encoding/json and the finish_reason table of the API docs.
func expectChat(t *testing.T, body []byte) summary {
	t.Helper()
	finishMap := map[string]events.StopReason{"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "content_filter"}
	var s summary
	byIndex := map[int]int{}
	finish := ""
	var model, id string // the last non-empty of the chunks
	for _, line := range providertest.ChunkLines(body) {
		var c struct {
			ID      string `json:"id"`
			Model   string `json:"model"`
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Content          string `json:"content"`
					Reasoning        string `json:"reasoning"`
					ReasoningContent string `json:"reasoning_content"`
					ToolCalls        []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens        int64 `json:"prompt_tokens"`
				CompletionTokens    int64 `json:"completion_tokens"`
				TotalTokens         int64 `json:"total_tokens"`
				PromptTokensDetails *struct {
					CachedTokens *int64 `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
				CompletionTokensDetails *struct {
					ReasoningTokens *int64 `json:"reasoning_tokens"`
				} `json:"completion_tokens_details"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
				Code    string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("fixture line %q: %v", line, err)
		}
		if c.Error != nil {
			s.ErrCode, s.ErrMsg = c.Error.Code, c.Error.Message
			break // the SDK ends the stream at an error
		}
		model, id = cmp.Or(c.Model, model), cmp.Or(c.ID, id)
		for _, ch := range c.Choices {
			s.Text += ch.Delta.Content
			s.Thinking += ch.Delta.Reasoning + ch.Delta.ReasoningContent
			for _, tc := range ch.Delta.ToolCalls {
				i, ok := byIndex[tc.Index]
				if !ok {
					i = len(s.Tools)
					byIndex[tc.Index] = i
					s.Tools = append(s.Tools, tool{})
				}
				if s.Tools[i].ID == "" {
					s.Tools[i].ID = tc.ID
				}
				if s.Tools[i].Name == "" {
					s.Tools[i].Name = tc.Function.Name
				}
				s.Tools[i].Args += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if u := c.Usage; u != nil {
			s.Usage = &events.UsageEvent{InputTokens: &u.PromptTokens, OutputTokens: &u.CompletionTokens, TotalTokens: &u.TotalTokens}
			if u.PromptTokensDetails != nil {
				s.Usage.CacheReadInputTokens = u.PromptTokensDetails.CachedTokens
			}
			if u.CompletionTokensDetails != nil {
				s.Usage.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
			}
		}
	}
	switch {
	case s.ErrMsg != "":
		s.Status = events.StatusFailed
	case finish != "":
		s.Status = events.StatusCompleted
		s.Stop = finishMap[finish]
		s.Model, s.ResponseID = model, id
	}
	return s
}

func compare(t *testing.T, got, want summary) {
	t.Helper()
	if got.Text != want.Text {
		t.Errorf("text:\n got %q\nwant %q", got.Text, want.Text)
	}
	if got.Thinking != want.Thinking {
		t.Errorf("thinking:\n got %q\nwant %q", got.Thinking, want.Thinking)
	}
	if len(got.Tools) != len(want.Tools) {
		t.Errorf("tools: got %+v, want %+v", got.Tools, want.Tools)
	} else {
		for i := range got.Tools {
			if got.Tools[i] != want.Tools[i] {
				t.Errorf("tool %d: got %+v, want %+v", i, got.Tools[i], want.Tools[i])
			}
		}
	}
	if providertest.UsageJSON(got.Usage) != providertest.UsageJSON(want.Usage) {
		t.Errorf("usage: got %s, want %s", providertest.UsageJSON(got.Usage), providertest.UsageJSON(want.Usage))
	}
	if want.Status == events.StatusCompleted && got.Stop != want.Stop {
		t.Errorf("stop reason: got %q, want %q", got.Stop, want.Stop)
	}
	if got.Status != want.Status {
		t.Errorf("status: got %q, want %q", got.Status, want.Status)
	}
	if got.Model != want.Model || got.ResponseID != want.ResponseID {
		t.Errorf("model and response id: got %q %q, want %q %q", got.Model, got.ResponseID, want.Model, want.ResponseID)
	}
	if got.ErrCode != want.ErrCode || got.ErrMsg != want.ErrMsg {
		t.Errorf("error: got %q %q, want %q %q", got.ErrCode, got.ErrMsg, want.ErrCode, want.ErrMsg)
	}
}

func TestFixtures(t *testing.T) {
	for _, path := range providertest.Fixtures(t, "openai-chat") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			body := providertest.MustLoadFixture(t, path)
			want := expectChat(t, body)
			if want.Text == "" && want.Thinking == "" && len(want.Tools) == 0 && want.ErrMsg == "" {
				t.Fatal("derived no expectation from the fixture")
			}
			if want.Status == "" {
				t.Fatal("fixture has no terminal event")
			}
			srv := providertest.NewServer(t, providertest.SSE(body))
			evs := providertest.MustRun(t, newProvider(t, srv), simpleRequest())
			compare(t, summarize(t, evs), want)
			if r := srv.LastRequest(); r.Path != "/chat/completions" {
				t.Errorf("path %q", r.Path)
			}
		})
	}
}

// Parallel tool calls whose argument deltas interleave stay apart.
func TestInterleavedParallelToolCalls(t *testing.T) {
	chunks := []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"g","arguments":"{\"y\":"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"2}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	}
	body, _ := providertest.ChunksToSSE(providertest.FormatOpenAIChat, []byte(strings.Join(chunks, "\n")))
	srv := providertest.NewServer(t, providertest.SSE(body))
	got := summarize(t, providertest.MustRun(t, newProvider(t, srv), simpleRequest()))
	want := []tool{{"call_a", "f", `{"x":1}`}, {"call_b", "g", `{"y":2}`}}
	if len(got.Tools) != 2 || got.Tools[0] != want[0] || got.Tools[1] != want[1] {
		t.Fatalf("tools = %+v, want %+v", got.Tools, want)
	}
	if got.Stop != events.StopToolUse || got.Status != events.StatusCompleted {
		t.Fatalf("stop %q status %q", got.Stop, got.Status)
	}
}

// A refusal is an error event with code refusal and a refusal stop reason,
// never a silent empty answer.
func TestRefusal(t *testing.T) {
	chunks := []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""}}]}`,
		`{"choices":[{"index":0,"delta":{"refusal":"I can't "}}]}`,
		`{"choices":[{"index":0,"delta":{"refusal":"help with that."}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	}
	body, _ := providertest.ChunksToSSE(providertest.FormatOpenAIChat, []byte(strings.Join(chunks, "\n")))
	srv := providertest.NewServer(t, providertest.SSE(body))
	got := summarize(t, providertest.MustRun(t, newProvider(t, srv), simpleRequest()))
	if got.ErrCode != "refusal" || got.ErrMsg != "I can't help with that." || got.Stop != events.StopRefusal {
		t.Fatalf("got %+v", got)
	}
	if got.Text != "" {
		t.Fatalf("refusal leaked into text: %q", got.Text)
	}
}

func TestFinishReasons(t *testing.T) {
	for finish, want := range map[string]events.StopReason{"length": "max_tokens", "content_filter": "content_filter", "stop": "end_turn"} {
		chunks := `{"choices":[{"index":0,"delta":{"content":"x"}}]}` + "\n" +
			`{"choices":[{"index":0,"delta":{},"finish_reason":"` + finish + `"}]}`
		body, _ := providertest.ChunksToSSE(providertest.FormatOpenAIChat, []byte(chunks))
		srv := providertest.NewServer(t, providertest.SSE(body))
		got := summarize(t, providertest.MustRun(t, newProvider(t, srv), simpleRequest()))
		if got.Stop != want || got.Status != events.StatusCompleted {
			t.Errorf("%s: stop %q status %q, want %q", finish, got.Stop, got.Status, want)
		}
		if (finish == "content_filter") != (got.ErrCode == "content_filter") {
			t.Errorf("%s: error code %q", finish, got.ErrCode)
		}
	}
}

// A stream cut before any finish_reason ends as failed, with open blocks
// aborted.
func TestTruncatedStreamFails(t *testing.T) {
	body := []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"partial\"}}]}\n\n")
	srv := providertest.NewServer(t, providertest.SSE(body))
	evs := providertest.MustRun(t, newProvider(t, srv), simpleRequest())
	var aborted bool
	for _, ev := range evs {
		if _, ok := ev.(events.BlockAbort); ok {
			aborted = true
		}
	}
	if s := summarize(t, evs); s.Status != events.StatusFailed || !aborted || s.Text != "partial" {
		t.Fatalf("status %q aborted %v text %q", s.Status, aborted, s.Text)
	}
}

func TestMissingAPIKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	if _, err := openai.New(openai.Config{}); !errors.Is(err, openai.ErrMissingAPIKey) {
		t.Fatalf("err = %v", err)
	}
	t.Setenv("OPENAI_API_KEY", "from-env")
	if _, err := openai.New(openai.Config{}); err != nil {
		t.Fatalf("key from env: %v", err)
	}
}

func TestEnvKeyAndBaseURL(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")))
	t.Setenv("OPENAI_API_KEY", "env-key")
	t.Setenv("OPENAI_BASE_URL", srv.URL())
	p, err := openai.New(openai.Config{})
	if err != nil {
		t.Fatal(err)
	}
	providertest.MustRun(t, p, simpleRequest())
	if h := srv.LastRequest().Header.Get("Authorization"); h != "Bearer env-key" {
		t.Fatalf("Authorization = %q", h)
	}
}

func TestInvalidRequest(t *testing.T) {
	srv := providertest.NewServer(t)
	p := newProvider(t, srv)
	req := simpleRequest()
	req.Tools = []events.ToolDefinition{{Name: "t", InputSchema: json.RawMessage(`[1]`)}}
	if _, err := p.Stream(context.Background(), req); !errors.Is(err, openai.ErrInvalidRequest) {
		t.Fatalf("err = %v", err)
	}
	if srv.RequestCount() != 0 {
		t.Fatalf("invalid request was sent")
	}
}
