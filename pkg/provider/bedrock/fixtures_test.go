package bedrock_test

import (
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/bedrock"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// wireEvent is one decoded ConverseStream chunk as the AWS API reference
// shapes it, read with plain encoding/json, independently of the SDK.
type wireEvent struct {
	ContentBlockStart *struct {
		ContentBlockIndex int `json:"contentBlockIndex"`
		Start             struct {
			ToolUse *struct {
				ToolUseID string `json:"toolUseId"`
				Name      string `json:"name"`
			} `json:"toolUse"`
		} `json:"start"`
	} `json:"contentBlockStart"`
	ContentBlockDelta *struct {
		ContentBlockIndex int `json:"contentBlockIndex"`
		Delta             struct {
			Text    *string `json:"text"`
			ToolUse *struct {
				Input string `json:"input"`
			} `json:"toolUse"`
			ReasoningContent *struct {
				Text            *string `json:"text"`
				Signature       *string `json:"signature"`
				RedactedContent *string `json:"redactedContent"`
			} `json:"reasoningContent"`
		} `json:"delta"`
	} `json:"contentBlockDelta"`
	MessageStop *struct {
		StopReason string `json:"stopReason"`
	} `json:"messageStop"`
	Metadata *struct {
		Usage map[string]int64 `json:"usage"`
	} `json:"metadata"`
	ThrottlingException       *struct{ Message string } `json:"throttlingException"`
	ModelStreamErrorException *struct{ Message string } `json:"modelStreamErrorException"`
}

// stopReasons is docs/protocol.md's reading of Bedrock's stop reasons.
var stopReasons = map[string]events.StopReason{
	"end_turn":             events.StopEndTurn,
	"tool_use":             events.StopToolUse,
	"max_tokens":           events.StopMaxTokens,
	"stop_sequence":        events.StopSequence,
	"guardrail_intervened": events.StopContentFilter,
	"content_filtered":     events.StopContentFilter,
}

// expectation is what a recording says the stream must contain.
type expectation struct {
	providertest.Summary
	errCode string
}

func expect(t *testing.T, path string) expectation {
	t.Helper()
	raw, err := readFixture(path)
	if err != nil {
		t.Fatal(err)
	}
	var e expectation
	e.Status = events.StatusCompleted
	sigs := map[int]string{}
	thinking := map[int]bool{}
	var order []int
	inputs := map[int]*strings.Builder{}
	var calls []providertest.Call
	for _, line := range providertest.ChunkLines(raw) {
		var w wireEvent
		if err := json.Unmarshal(line, &w); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch {
		case w.ContentBlockStart != nil && w.ContentBlockStart.Start.ToolUse != nil:
			tu := w.ContentBlockStart.Start.ToolUse
			calls = append(calls, providertest.Call{ID: tu.ToolUseID, Name: tu.Name})
			inputs[len(calls)-1] = &strings.Builder{}
		case w.ContentBlockDelta != nil:
			d := w.ContentBlockDelta.Delta
			i := w.ContentBlockDelta.ContentBlockIndex
			switch {
			case d.Text != nil:
				e.Text += *d.Text
			case d.ToolUse != nil:
				inputs[len(calls)-1].WriteString(d.ToolUse.Input)
			case d.ReasoningContent != nil:
				if !thinking[i] {
					thinking[i] = true
					order = append(order, i)
				}
				r := d.ReasoningContent
				if r.Text != nil {
					e.Thinking += *r.Text
				}
				if r.Signature != nil {
					sigs[i] += *r.Signature
				}
				if r.RedactedContent != nil {
					sigs[i] = bedrock.RedactedSignaturePrefix + *r.RedactedContent
				}
			}
		case w.MessageStop != nil:
			e.StopReason = stopReasons[w.MessageStop.StopReason]
			if e.StopReason == events.StopContentFilter {
				e.errCode = "content_filter"
			}
		case w.Metadata != nil:
			u := w.Metadata.Usage
			e.Usage = &events.UsageEvent{}
			for k, dst := range map[string]**int64{
				"inputTokens": &e.Usage.InputTokens, "outputTokens": &e.Usage.OutputTokens, "totalTokens": &e.Usage.TotalTokens,
				"cacheReadInputTokens": &e.Usage.CacheReadInputTokens, "cacheWriteInputTokens": &e.Usage.CacheCreationInputTokens,
			} {
				if v, ok := u[k]; ok {
					*dst = providertest.Int64(v)
				}
			}
		case w.ThrottlingException != nil:
			e.Status, e.errCode = events.StatusFailed, "rate_limited"
		case w.ModelStreamErrorException != nil:
			e.Status, e.errCode = events.StatusFailed, "stream_error"
		}
	}
	for _, i := range order {
		e.Signatures = append(e.Signatures, sigs[i])
	}
	for i, c := range calls {
		if e.Status == events.StatusFailed {
			c.Aborted = true
		} else if err := json.Unmarshal([]byte(inputs[i].String()), &c.Input); err != nil {
			t.Fatalf("%s: tool input: %v", path, err)
		}
		e.Calls = append(e.Calls, c)
	}
	return e
}

func TestFixtures(t *testing.T) {
	files := providertest.Fixtures(t, "bedrock")
	if len(files) < 9 {
		t.Fatalf("%d bedrock recordings, want at least 9", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want := expect(t, f)
			srv := providertest.NewServer(t, providertest.EventStreamResponse(providertest.MustLoadFixture(t, f)))
			p := newProvider(t, srv)
			s, err := p.Stream(t.Context(), providertest.SimpleRequest("bedrock:"+testModel))
			if err != nil {
				t.Fatal(err)
			}
			evs := providertest.MustCollect(t, s)
			if err := llm.CheckWellFormed(evs); err != nil {
				t.Fatalf("not well-formed: %v\n%v", err, evs)
			}
			if err := providertest.StrictWellFormed(evs); err != nil {
				t.Fatalf("not well-formed: %v\n%v", err, evs)
			}
			got := providertest.Summarize(t, evs)
			if got.Status != want.Status {
				t.Fatalf("status %s, want %s; events %v", got.Status, want.Status, evs)
			}
			if got.Text != want.Text || got.Thinking != want.Thinking {
				t.Errorf("text %q thinking %q, want %q %q", got.Text, got.Thinking, want.Text, want.Thinking)
			}
			if !reflect.DeepEqual(got.Signatures, want.Signatures) {
				t.Errorf("signatures %q, want %q", got.Signatures, want.Signatures)
			}
			if !reflect.DeepEqual(got.Calls, want.Calls) {
				t.Errorf("calls %+v, want %+v", got.Calls, want.Calls)
			}
			if want.Status == events.StatusCompleted {
				if got.StopReason != want.StopReason {
					t.Errorf("stop reason %q, want %q", got.StopReason, want.StopReason)
				}
				if providertest.UsageJSON(got.Usage) != providertest.UsageJSON(want.Usage) {
					t.Errorf("usage %s, want %s", providertest.UsageJSON(got.Usage), providertest.UsageJSON(want.Usage))
				}
			}
			var codes []string
			for _, e := range got.Errors {
				codes = append(codes, e.Code)
			}
			if want.errCode == "" && len(codes) > 0 || want.errCode != "" && (len(codes) != 1 || codes[0] != want.errCode) {
				t.Errorf("error codes %v, want %q", codes, want.errCode)
			}

			// The request was signed with the static keys for Bedrock
			// in the configured region, and went to the model's path.
			r := srv.LastRequest()
			if auth := r.Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+testKeyID+"/") ||
				!strings.Contains(auth, "/"+testRegion+"/bedrock/aws4_request") || !strings.Contains(auth, "Signature=") {
				t.Errorf("Authorization %q is not a SigV4 signature for bedrock in %s", auth, testRegion)
			}
			if want := "/model/" + testModel + "/converse-stream"; r.Path != want {
				t.Errorf("path %q, want %q", r.Path, want)
			}
		})
	}
}

// TestReasoningRoundTrip sends a streamed thinking block back on the next
// request: the signature (and redacted reasoning's bytes) must reach
// Bedrock unchanged.
func TestReasoningRoundTrip(t *testing.T) {
	for _, tc := range []struct{ file, jsonPath string }{
		{"reasoning-signature-then-text.chunks.jsonl", "signature"},
		{"redacted-reasoning-then-text.chunks.jsonl", "redactedContent"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			body := providertest.MustLoadFixture(t, filepath.Join("bedrock", tc.file))
			srv := providertest.NewServer(t, providertest.EventStreamResponse(body))
			p := newProvider(t, srv)
			req := providertest.SimpleRequest("bedrock:" + testModel)
			got := providertest.Summarize(t, providertest.MustRun(t, p, req))
			// The assistant message as the worker stores it.
			asst := events.Message{Role: events.RoleAssistant, Content: []events.Part{
				{Type: events.PartThinking, Thinking: got.Thinking, Signature: got.Signatures[0], Redacted: got.Thinking == ""},
				events.TextPart(got.Text),
			}}
			next := *req
			next.Messages = append(append([]events.Message{}, req.Messages...), asst, events.UserText("thanks"))
			providertest.MustRun(t, p, &next)

			var sent struct {
				Messages []struct {
					Role    string `json:"role"`
					Content []struct {
						ReasoningContent *struct {
							ReasoningText *struct {
								Text      string `json:"text"`
								Signature string `json:"signature"`
							} `json:"reasoningText"`
							RedactedContent string `json:"redactedContent"`
						} `json:"reasoningContent"`
						Text string `json:"text"`
					} `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(srv.LastRequest().Body, &sent); err != nil {
				t.Fatal(err)
			}
			if len(sent.Messages) != 3 || sent.Messages[1].Role != "assistant" {
				t.Fatalf("messages %+v", sent.Messages)
			}
			rc := sent.Messages[1].Content[0].ReasoningContent
			if rc == nil {
				t.Fatalf("assistant content %+v has no reasoningContent first", sent.Messages[1].Content)
			}
			// The recording's own value, read independently.
			var wantValue string
			for _, line := range providertest.ChunkLines(mustRead(t, tc.file)) {
				var w wireEvent
				_ = json.Unmarshal(line, &w)
				if d := w.ContentBlockDelta; d != nil && d.Delta.ReasoningContent != nil {
					if v := d.Delta.ReasoningContent.Signature; v != nil && tc.jsonPath == "signature" {
						wantValue = *v
					}
					if v := d.Delta.ReasoningContent.RedactedContent; v != nil && tc.jsonPath == "redactedContent" {
						wantValue = *v
					}
				}
			}
			switch tc.jsonPath {
			case "signature":
				if rc.ReasoningText == nil || rc.ReasoningText.Signature != wantValue || rc.ReasoningText.Text != got.Thinking {
					t.Errorf("reasoningText %+v, want signature %q and the streamed text", rc.ReasoningText, wantValue)
				}
			case "redactedContent":
				if rc.RedactedContent != wantValue {
					t.Errorf("redactedContent %q, want %q", rc.RedactedContent, wantValue)
				}
				if _, err := base64.StdEncoding.DecodeString(rc.RedactedContent); err != nil {
					t.Error(err)
				}
			}
			if sent.Messages[1].Content[1].Text != got.Text {
				t.Errorf("assistant text %q, want %q", sent.Messages[1].Content[1].Text, got.Text)
			}
		})
	}
}
