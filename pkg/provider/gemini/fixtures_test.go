package gemini_test

import (
	"cmp"
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// wireChunk is the part of a generateContent chunk the tests read, decoded
// with plain encoding/json, independently of the SDK.
type wireChunk struct {
	ModelVersion string `json:"modelVersion"`
	ResponseID   string `json:"responseId"`
	Candidates   []struct {
		Content *struct {
			Parts []struct {
				Text             *string `json:"text"`
				Thought          bool    `json:"thought"`
				ThoughtSignature string  `json:"thoughtSignature"`
				FunctionCall     *struct {
					ID           string         `json:"id"`
					Name         string         `json:"name"`
					Args         map[string]any `json:"args"`
					WillContinue bool           `json:"willContinue"`
					PartialArgs  []struct {
						JSONPath    string `json:"jsonPath"`
						StringValue string `json:"stringValue"`
					} `json:"partialArgs"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason  string `json:"finishReason"`
		FinishMessage string `json:"finishMessage"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		Prompt     int64 `json:"promptTokenCount"`
		Candidates int64 `json:"candidatesTokenCount"`
		Total      int64 `json:"totalTokenCount"`
		Thoughts   int64 `json:"thoughtsTokenCount"`
		Cached     int64 `json:"cachedContentTokenCount"`
	} `json:"usageMetadata"`
}

type expectation struct {
	providertest.Summary
	ErrorContains string
}

func expect(t *testing.T, body []byte) expectation {
	t.Helper()
	var x expectation
	var streaming *providertest.Call // a call whose arguments are streamed
	var streamArgs map[string]string
	endStreaming := func() {
		if streaming == nil {
			return
		}
		args := map[string]any{}
		for k, v := range streamArgs {
			args[k] = v
		}
		streaming.Input = args
		x.Calls = append(x.Calls, *streaming)
		streaming = nil
	}
	finish, finishMsg := "", ""
	for _, line := range providertest.ChunkLines(body) {
		var c wireChunk
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("fixture chunk %q: %v", line, err)
		}
		if finish == "" { // chunks after the finish reason do not count
			x.Model, x.ResponseID = cmp.Or(c.ModelVersion, x.Model), cmp.Or(c.ResponseID, x.ResponseID)
		}
		if u := c.UsageMetadata; u != nil && (u.Prompt != 0 || u.Total != 0) {
			x.Usage = &events.UsageEvent{InputTokens: providertest.Int64(u.Prompt), OutputTokens: providertest.Int64(u.Candidates + u.Thoughts), TotalTokens: providertest.Int64(u.Total)}
			if u.Thoughts != 0 {
				x.Usage.ReasoningTokens = providertest.Int64(u.Thoughts)
			}
			if u.Cached != 0 {
				x.Usage.CacheReadInputTokens = providertest.Int64(u.Cached)
			}
		}
		if c.PromptFeedback != nil && c.PromptFeedback.BlockReason != "" {
			x.Errors = []events.ErrorEvent{{Code: "prompt_blocked"}}
			x.ErrorContains = c.PromptFeedback.BlockReason
			x.Status = events.StatusFailed
			return x
		}
		if len(c.Candidates) == 0 {
			continue
		}
		cand := c.Candidates[0]
		if cand.Content != nil {
			for _, p := range cand.Content.Parts {
				if p.ThoughtSignature != "" {
					x.AllSignatures = append(x.AllSignatures, p.ThoughtSignature)
				}
				switch fc := p.FunctionCall; {
				case fc != nil && fc.Name != "":
					endStreaming()
					cl := providertest.Call{ID: fc.ID, Name: fc.Name}
					if fc.WillContinue {
						streaming, streamArgs = &cl, map[string]string{}
						continue
					}
					cl.Input = map[string]any{}
					for k, v := range fc.Args {
						cl.Input.(map[string]any)[k] = v
					}
					x.Calls = append(x.Calls, cl)
				case fc != nil:
					for _, pa := range fc.PartialArgs {
						streamArgs[strings.TrimPrefix(pa.JSONPath, "$.")] += pa.StringValue
					}
					if !fc.WillContinue {
						endStreaming()
					}
				case p.Text != nil && p.Thought:
					x.Thinking += *p.Text
				case p.Text != nil:
					x.Text += *p.Text
				}
			}
		}
		if cand.FinishReason != "" {
			finish, finishMsg = cand.FinishReason, cand.FinishMessage
		}
	}
	endStreaming()
	x.Status = events.StatusCompleted
	switch finish {
	case "STOP":
		x.StopReason = events.StopEndTurn
		if len(x.Calls) > 0 {
			x.StopReason = events.StopToolUse
		}
	case "MAX_TOKENS":
		x.StopReason = events.StopMaxTokens
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII":
		x.StopReason = events.StopContentFilter
		x.Errors = []events.ErrorEvent{{Code: "content_filter"}}
		x.ErrorContains = finish
	default:
		x.Errors = []events.ErrorEvent{{Code: strings.ToLower(finish)}}
		x.ErrorContains = finishMsg
		x.Status = events.StatusFailed
	}
	if x.Status != events.StatusCompleted {
		x.Model, x.ResponseID = "", ""
	}
	return x
}

func TestFixtures(t *testing.T) {
	for _, path := range providertest.Fixtures(t, "gemini") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			body := providertest.MustLoadFixture(t, path)
			want := expect(t, body)
			srv := providertest.NewServer(t, providertest.Response{Body: body, ChunkSize: 211})
			p, err := gemini.New(gemini.Config{APIKey: "test-key", BaseURL: srv.URL()})
			if err != nil {
				t.Fatal(err)
			}
			s, err := p.Stream(context.Background(), &llm.Request{Model: "gemini:gemini-test", Messages: []events.Message{events.UserText("hi")}})
			if err != nil {
				t.Fatal(err)
			}
			evs := providertest.MustCollect(t, s)
			if err := providertest.StrictWellFormed(evs); err != nil {
				t.Fatalf("not well-formed: %v", err)
			}
			if r := srv.LastRequest(); !strings.HasSuffix(r.Path, "models/gemini-test:streamGenerateContent") || r.Query != "alt=sse" {
				t.Errorf("request went to %s?%s", r.Path, r.Query)
			}
			got := providertest.Summarize(t, evs)
			if got.Text != want.Text {
				t.Errorf("text = %q, want %q", got.Text, want.Text)
			}
			if got.Thinking != want.Thinking {
				t.Errorf("thinking = %q, want %q", got.Thinking, want.Thinking)
			}
			if !reflect.DeepEqual(got.AllSignatures, want.AllSignatures) {
				t.Errorf("signatures = %q, want %q", got.AllSignatures, want.AllSignatures)
			}
			if len(got.Calls) != len(want.Calls) {
				t.Fatalf("calls = %+v, want %+v", got.Calls, want.Calls)
			}
			ids := map[string]bool{}
			for i, c := range got.Calls {
				w := want.Calls[i]
				if c.ID == "" || ids[c.ID] {
					t.Errorf("call %d id %q empty or not unique", i, c.ID)
				}
				ids[c.ID] = true
				if w.ID == "" {
					// The API sent no id: one is synthesized.
					if !strings.HasPrefix(c.ID, gemini.SynthesizedIDPrefix) {
						t.Errorf("call %d id %q, want a synthesized id", i, c.ID)
					}
					c.ID = ""
				}
				if !reflect.DeepEqual(c, w) {
					t.Errorf("call %d = %+v, want %+v", i, c, w)
				}
			}
			if got.StopReason != want.StopReason {
				t.Errorf("stop reason = %q, want %q", got.StopReason, want.StopReason)
			}
			if got.Model != want.Model || got.ResponseID != want.ResponseID {
				t.Errorf("model and response id = %q %q, want %q %q", got.Model, got.ResponseID, want.Model, want.ResponseID)
			}
			if want.Usage == nil {
				if got.Usage != nil {
					t.Errorf("usage %+v, want none", got.Usage)
				}
			} else if got.Usage == nil {
				t.Error("no usage event")
			} else {
				for _, f := range []struct {
					name      string
					got, want *int64
				}{
					{"input", got.Usage.InputTokens, want.Usage.InputTokens},
					{"output", got.Usage.OutputTokens, want.Usage.OutputTokens},
					{"total", got.Usage.TotalTokens, want.Usage.TotalTokens},
					{"cache_read", got.Usage.CacheReadInputTokens, want.Usage.CacheReadInputTokens},
					{"reasoning", got.Usage.ReasoningTokens, want.Usage.ReasoningTokens},
				} {
					if !providertest.EqualInt64(f.got, f.want) {
						t.Errorf("usage %s = %s, want %s", f.name, providertest.FormatInt64(f.got), providertest.FormatInt64(f.want))
					}
				}
			}
			if len(got.Errors) != len(want.Errors) {
				t.Fatalf("errors = %+v, want codes %+v", got.Errors, want.Errors)
			}
			for i := range want.Errors {
				if got.Errors[i].Code != want.Errors[i].Code || !strings.Contains(got.Errors[i].Message, want.ErrorContains) {
					t.Errorf("error %+v, want code %q with %q in the message", got.Errors[i], want.Errors[i].Code, want.ErrorContains)
				}
			}
			if got.Status != want.Status {
				t.Errorf("status = %q, want %q", got.Status, want.Status)
			}
			if got.Text == "" && len(got.Calls) == 0 && got.Thinking == "" && len(got.Errors) == 0 {
				t.Error("empty answer without an error event")
			}
		})
	}
}
