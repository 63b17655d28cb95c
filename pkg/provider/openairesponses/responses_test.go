package openairesponses_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openairesponses"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newProvider(t testing.TB, srv *providertest.Server, mod ...func(*openairesponses.Config)) *openairesponses.Provider {
	t.Helper()
	cfg := openairesponses.Config{APIKey: "test-key", BaseURL: srv.URL(), MaxRetries: -1, IdleTimeout: 5 * time.Second}
	return providertest.MustNew(t, openairesponses.New, cfg, mod...)
}

func simpleRequest() *llm.Request {
	req := providertest.SimpleRequest("openai-responses:gpt-5")
	req.RequestID = "r1"
	return req
}

type tool struct{ ID, Name, Args string }

type reasoning struct {
	ID               string   `json:"id"`
	EncryptedContent string   `json:"encrypted_content"`
	Summary          []string `json:"summary"`
}

type summary struct {
	Text, Thinking string
	Tools          []tool
	Reasoning      []reasoning // from thinking block stop signatures / output items
	Usage          *events.UsageEvent
	Stop           events.StopReason
	Status         events.StreamStatus
	ErrCode        string
	ErrMsg         string
	// Model and ResponseID of the completed status.
	Model, ResponseID string
}

func summarize(t *testing.T, evs []events.Event) summary {
	t.Helper()
	var s summary
	toolAt := map[int]int{}
	for _, ev := range evs {
		switch e := ev.(type) {
		case events.BlockStart:
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
			if e.BlockType == events.BlockThinking {
				var r reasoning
				if err := json.Unmarshal([]byte(e.Signature), &r); err != nil {
					t.Errorf("thinking signature %q: %v", e.Signature, err)
				}
				s.Reasoning = append(s.Reasoning, r)
			}
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

// expect derives the expected summary from a Responses fixture with plain
// encoding/json: text and summary deltas, function calls named by their
// output items, reasoning items, usage, and the terminal event.
func expect(t *testing.T, body []byte) summary {
	t.Helper()
	var s summary
	calls := map[int]int{} // output_index → s.Tools
	parts := map[int][]string{}
	var order []int
	for _, line := range providertest.ChunkLines(body) {
		var e struct {
			Type         string `json:"type"`
			OutputIndex  int    `json:"output_index"`
			SummaryIndex int    `json:"summary_index"`
			Delta        string `json:"delta"`
			Arguments    string `json:"arguments"`
			Item         struct {
				Type             string `json:"type"`
				ID               string `json:"id"`
				CallID           string `json:"call_id"`
				Name             string `json:"name"`
				EncryptedContent string `json:"encrypted_content"`
				Summary          []struct {
					Text string `json:"text"`
				} `json:"summary"`
			} `json:"item"`
			Response struct {
				ID                string `json:"id"`
				Model             string `json:"model"`
				Status            string `json:"status"`
				IncompleteDetails *struct {
					Reason string `json:"reason"`
				} `json:"incomplete_details"`
				Usage *struct {
					InputTokens        int64 `json:"input_tokens"`
					OutputTokens       int64 `json:"output_tokens"`
					TotalTokens        int64 `json:"total_tokens"`
					InputTokensDetails *struct {
						CachedTokens *int64 `json:"cached_tokens"`
					} `json:"input_tokens_details"`
					OutputTokensDetails *struct {
						ReasoningTokens *int64 `json:"reasoning_tokens"`
					} `json:"output_tokens_details"`
				} `json:"usage"`
				Error *struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			} `json:"response"`
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("fixture line: %v", err)
		}
		switch e.Type {
		case "error":
			if e.Error != nil {
				s.ErrCode, s.ErrMsg = e.Error.Code, e.Error.Message
			} else {
				s.ErrCode, s.ErrMsg = e.Code, e.Message
			}
			s.Status = events.StatusFailed
			return s
		case "response.failed":
			s.ErrCode, s.ErrMsg = e.Response.Error.Code, e.Response.Error.Message
			s.Status = events.StatusFailed
			return s
		case "response.output_item.added":
			if e.Item.Type == "function_call" {
				calls[e.OutputIndex] = len(s.Tools)
				s.Tools = append(s.Tools, tool{ID: e.Item.CallID, Name: e.Item.Name})
			}
		case "response.function_call_arguments.delta":
			s.Tools[calls[e.OutputIndex]].Args += e.Delta
		case "response.output_text.delta":
			s.Text += e.Delta
		case "response.reasoning_summary_text.delta":
			if _, ok := parts[e.OutputIndex]; !ok {
				order = append(order, e.OutputIndex)
			}
			p := parts[e.OutputIndex]
			for len(p) <= e.SummaryIndex {
				p = append(p, "")
			}
			p[e.SummaryIndex] += e.Delta
			parts[e.OutputIndex] = p
		case "response.output_item.done":
			if e.Item.Type == "reasoning" {
				r := reasoning{ID: e.Item.ID, EncryptedContent: e.Item.EncryptedContent}
				for _, p := range e.Item.Summary {
					r.Summary = append(r.Summary, p.Text)
				}
				s.Reasoning = append(s.Reasoning, r)
			}
		case "response.completed", "response.incomplete":
			s.Status = events.StatusCompleted
			s.Model, s.ResponseID = e.Response.Model, e.Response.ID
			s.Stop = "end_turn"
			if len(s.Tools) > 0 {
				s.Stop = "tool_use"
			}
			if d := e.Response.IncompleteDetails; d != nil && d.Reason == "max_output_tokens" {
				s.Stop = "max_tokens"
			}
			if u := e.Response.Usage; u != nil {
				s.Usage = &events.UsageEvent{InputTokens: &u.InputTokens, OutputTokens: &u.OutputTokens, TotalTokens: &u.TotalTokens}
				if u.InputTokensDetails != nil {
					s.Usage.CacheReadInputTokens = u.InputTokensDetails.CachedTokens
				}
				if u.OutputTokensDetails != nil {
					s.Usage.ReasoningTokens = u.OutputTokensDetails.ReasoningTokens
				}
			}
		}
	}
	for _, i := range order {
		s.Thinking += strings.Join(parts[i], "\n\n") // parts of one item are separated by a blank line
	}
	return s
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }

func compare(t *testing.T, got, want summary) {
	t.Helper()
	if got.Text != want.Text {
		t.Errorf("text:\n got %q\nwant %q", got.Text, want.Text)
	}
	if got.Thinking != want.Thinking {
		t.Errorf("thinking:\n got %q\nwant %q", got.Thinking, want.Thinking)
	}
	if js(got.Tools) != js(want.Tools) {
		t.Errorf("tools: got %s, want %s", js(got.Tools), js(want.Tools))
	}
	if js(got.Reasoning) != js(want.Reasoning) {
		t.Errorf("reasoning:\n got %.300s\nwant %.300s", js(got.Reasoning), js(want.Reasoning))
	}
	if js(got.Usage) != js(want.Usage) {
		t.Errorf("usage: got %s, want %s", js(got.Usage), js(want.Usage))
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
	for _, path := range providertest.Fixtures(t, "openai-responses") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			body := providertest.MustLoadFixture(t, path)
			want := expect(t, body)
			if want.Text == "" && want.Thinking == "" && len(want.Tools) == 0 && want.ErrMsg == "" {
				t.Fatal("derived no expectation from the fixture")
			}
			if want.Status == "" {
				t.Fatal("fixture has no terminal event")
			}
			srv := providertest.NewServer(t, providertest.SSE(body))
			compare(t, summarize(t, providertest.MustRun(t, newProvider(t, srv), simpleRequest())), want)
			if r := srv.LastRequest(); r.Path != "/responses" {
				t.Errorf("path %q", r.Path)
			}
		})
	}
}

func sse(t *testing.T, lines ...string) []byte {
	t.Helper()
	b, err := providertest.ChunksToSSE(providertest.FormatOpenAIResponses, []byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRefusal(t *testing.T) {
	body := sse(t,
		`{"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}`,
		`{"type":"response.content_part.added","output_index":0,"content_index":0,"item_id":"msg_1","part":{"type":"refusal","refusal":""}}`,
		`{"type":"response.refusal.delta","output_index":0,"content_index":0,"item_id":"msg_1","delta":"I can't "}`,
		`{"type":"response.refusal.delta","output_index":0,"content_index":0,"item_id":"msg_1","delta":"do that."}`,
		`{"type":"response.refusal.done","output_index":0,"content_index":0,"item_id":"msg_1","refusal":"I can't do that."}`,
		`{"type":"response.completed","response":{"id":"r","status":"completed","output":[]}}`,
	)
	srv := providertest.NewServer(t, providertest.SSE(body))
	got := summarize(t, providertest.MustRun(t, newProvider(t, srv), simpleRequest()))
	if got.ErrCode != "refusal" || got.ErrMsg != "I can't do that." || got.Stop != events.StopRefusal || got.Text != "" {
		t.Fatalf("got %+v", got)
	}
}

func TestIncompleteMaxTokens(t *testing.T) {
	body := sse(t,
		`{"type":"response.output_text.delta","output_index":0,"content_index":0,"item_id":"m","delta":"abc"}`,
		`{"type":"response.incomplete","response":{"id":"r","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}}`,
	)
	srv := providertest.NewServer(t, providertest.SSE(body))
	got := summarize(t, providertest.MustRun(t, newProvider(t, srv), simpleRequest()))
	if got.Stop != events.StopMaxTokens || got.Status != events.StatusCompleted || got.Text != "abc" {
		t.Fatalf("got %+v", got)
	}
}

// A documented-shape error event (code and message at the top level) and a
// response.failed each end the stream as failed with the provider's code.
func TestErrorShapes(t *testing.T) {
	for name, body := range map[string][]byte{
		"error": sse(t, `{"type":"response.output_text.delta","output_index":0,"content_index":0,"item_id":"m","delta":"a"}`,
			`{"type":"error","code":"server_error","message":"boom","param":null,"sequence_number":3}`),
		"failed": sse(t, `{"type":"response.output_text.delta","output_index":0,"content_index":0,"item_id":"m","delta":"a"}`,
			`{"type":"response.failed","response":{"id":"r","status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}}`),
	} {
		srv := providertest.NewServer(t, providertest.SSE(body))
		evs := providertest.MustRun(t, newProvider(t, srv), simpleRequest())
		got := summarize(t, evs)
		if got.ErrCode != "server_error" || got.ErrMsg != "boom" || got.Status != events.StatusFailed {
			t.Errorf("%s: got %+v", name, got)
		}
		var aborted bool
		for _, ev := range evs {
			_, ok := ev.(events.BlockAbort)
			aborted = aborted || ok
		}
		if !aborted {
			t.Errorf("%s: open text block not aborted", name)
		}
	}
}

func TestMissingAPIKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	if _, err := openairesponses.New(openairesponses.Config{}); !errors.Is(err, openairesponses.ErrMissingAPIKey) {
		t.Fatalf("err = %v", err)
	}
}

// An output_item.done without its summary (as some compatible servers send
// it): the signature carries the summary parts as streamed, each the
// concatenation of its deltas.
func TestReasoningSummaryFromDeltas(t *testing.T) {
	body := sse(t,
		`{"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]}}`,
		`{"type":"response.reasoning_summary_part.added","output_index":0,"item_id":"rs_1","summary_index":0,"part":{"type":"summary_text","text":""}}`,
		`{"type":"response.reasoning_summary_text.delta","output_index":0,"item_id":"rs_1","summary_index":0,"delta":"Sim"}`,
		`{"type":"response.reasoning_summary_text.delta","output_index":0,"item_id":"rs_1","summary_index":0,"delta":"ple."}`,
		`{"type":"response.reasoning_summary_part.added","output_index":0,"item_id":"rs_1","summary_index":1,"part":{"type":"summary_text","text":""}}`,
		`{"type":"response.reasoning_summary_text.delta","output_index":0,"item_id":"rs_1","summary_index":1,"delta":"Then "}`,
		`{"type":"response.reasoning_summary_text.delta","output_index":0,"item_id":"rs_1","summary_index":1,"delta":"more."}`,
		`{"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning","id":"rs_1","encrypted_content":"gAAA","summary":[]}}`,
		`{"type":"response.completed","response":{"id":"r","status":"completed","output":[]}}`,
	)
	srv := providertest.NewServer(t, providertest.SSE(body))
	got := summarize(t, providertest.MustRun(t, newProvider(t, srv), simpleRequest()))
	want := []reasoning{{ID: "rs_1", EncryptedContent: "gAAA", Summary: []string{"Simple.", "Then more."}}}
	if js(got.Reasoning) != js(want) || got.Thinking != "Simple.\n\nThen more." {
		t.Fatalf("reasoning %s, thinking %q", js(got.Reasoning), got.Thinking)
	}
}
