package anthropic_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// wireEvent is the part of a Messages API stream event the tests read,
// decoded with plain encoding/json, independently of the SDK.
type wireEvent struct {
	Type         string          `json:"type"`
	Index        int             `json:"index"`
	ContentBlock json.RawMessage `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
		StopDetails *struct {
			Explanation string `json:"explanation"`
		} `json:"stop_details"`
	} `json:"delta"`
	Usage   map[string]json.RawMessage `json:"usage"`
	Message struct {
		ID    string                     `json:"id"`
		Model string                     `json:"model"`
		Usage map[string]json.RawMessage `json:"usage"`
	} `json:"message"`
}

type wireBlock struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	Text      string `json:"text"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
	Data      string `json:"data"`
	ToolUseID string `json:"tool_use_id"`
}

// expectation is what a fixture file says the stream must contain.
type expectation struct {
	providertest.Summary
	RefusalExplanation string
	ResultRaw          []json.RawMessage
}

func expect(t *testing.T, body []byte) expectation {
	t.Helper()
	var x expectation
	type blk struct {
		wb    wireBlock
		input strings.Builder
		sig   string
	}
	blocks := map[int]*blk{}
	order := []int{}
	usage := map[string]int64{}
	readUsage := func(m map[string]json.RawMessage) {
		for _, k := range []string{"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"} {
			if raw, ok := m[k]; ok && string(raw) != "null" {
				var v int64
				if err := json.Unmarshal(raw, &v); err != nil {
					t.Fatal(err)
				}
				usage[k] = v
			}
		}
		if raw, ok := m["output_tokens_details"]; ok {
			var d struct {
				Thinking *int64 `json:"thinking_tokens"`
			}
			if json.Unmarshal(raw, &d) == nil && d.Thinking != nil {
				usage["thinking"] = *d.Thinking
			}
		}
	}
	stop := ""
	for _, line := range providertest.ChunkLines(body) {
		var ev wireEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("fixture line %q: %v", line, err)
		}
		switch ev.Type {
		case "message_start":
			readUsage(ev.Message.Usage)
			x.Model, x.ResponseID = ev.Message.Model, ev.Message.ID
		case "content_block_start":
			b := &blk{}
			if err := json.Unmarshal(ev.ContentBlock, &b.wb); err != nil {
				t.Fatal(err)
			}
			blocks[ev.Index] = b
			order = append(order, ev.Index)
			switch b.wb.Type {
			case "text":
				x.Text += b.wb.Text
			case "thinking":
				x.Thinking += b.wb.Thinking
				b.sig = b.wb.Signature
			case "redacted_thinking":
				b.sig = anthropic.RedactedSignaturePrefix + b.wb.Data
			}
			if strings.HasSuffix(b.wb.Type, "_tool_result") {
				x.Results = append(x.Results, events.BlockStart{BlockType: events.BlockToolResult, ToolUseID: b.wb.ToolUseID})
				x.ResultRaw = append(x.ResultRaw, ev.ContentBlock)
			}
		case "content_block_delta":
			b := blocks[ev.Index]
			switch ev.Delta.Type {
			case "text_delta":
				x.Text += ev.Delta.Text
			case "thinking_delta":
				x.Thinking += ev.Delta.Thinking
			case "signature_delta":
				b.sig += ev.Delta.Signature
			case "input_json_delta":
				b.input.WriteString(ev.Delta.PartialJSON)
			}
		case "message_delta":
			stop = ev.Delta.StopReason
			if ev.Delta.StopDetails != nil {
				x.RefusalExplanation = ev.Delta.StopDetails.Explanation
			}
			readUsage(ev.Usage)
		}
	}
	for _, i := range order {
		b := blocks[i]
		switch b.wb.Type {
		case "thinking", "redacted_thinking":
			x.Signatures = append(x.Signatures, b.sig)
		case "tool_use", "server_tool_use":
			c := providertest.Call{ID: b.wb.ID, Name: b.wb.Name, Server: b.wb.Type == "server_tool_use"}
			in := b.input.String()
			if in == "" {
				in = "{}"
			}
			if err := json.Unmarshal([]byte(in), &c.Input); err != nil {
				t.Fatal(err)
			}
			x.Calls = append(x.Calls, c)
		}
	}
	x.StopReason = map[string]events.StopReason{"end_turn": events.StopEndTurn, "tool_use": events.StopToolUse,
		"max_tokens": events.StopMaxTokens, "stop_sequence": events.StopSequence, "pause_turn": events.StopPauseTurn,
		"refusal": events.StopRefusal}[stop]
	u := &events.UsageEvent{}
	set := func(dst **int64, k string) {
		if v, ok := usage[k]; ok {
			*dst = providertest.Int64(v)
		}
	}
	set(&u.InputTokens, "input_tokens")
	set(&u.OutputTokens, "output_tokens")
	set(&u.CacheReadInputTokens, "cache_read_input_tokens")
	set(&u.CacheCreationInputTokens, "cache_creation_input_tokens")
	set(&u.ReasoningTokens, "thinking")
	x.Usage = u
	x.Status = events.StatusCompleted
	if stop == "refusal" {
		x.Errors = []events.ErrorEvent{{Code: "refusal", Message: x.RefusalExplanation}}
	}
	return x
}

func TestFixtures(t *testing.T) {
	for _, path := range providertest.Fixtures(t, "anthropic") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			body := providertest.MustLoadFixture(t, path)
			want := expect(t, body)
			srv := providertest.NewServer(t, providertest.Response{Body: body, ChunkSize: 997})
			p, err := anthropic.New(anthropic.Config{APIKey: "test-key", BaseURL: srv.URL()})
			if err != nil {
				t.Fatal(err)
			}
			s, err := p.Stream(context.Background(), &llm.Request{Model: "anthropic:claude-test", Messages: []events.Message{events.UserText("hi")}})
			if err != nil {
				t.Fatal(err)
			}
			evs := providertest.MustCollect(t, s)
			if err := providertest.StrictWellFormed(evs); err != nil {
				t.Fatalf("not well-formed: %v", err)
			}
			got := providertest.Summarize(t, evs)
			if got.Text != want.Text {
				t.Errorf("text = %q, want %q", got.Text, want.Text)
			}
			if got.Thinking != want.Thinking {
				t.Errorf("thinking = %q, want %q", got.Thinking, want.Thinking)
			}
			if !reflect.DeepEqual(got.Signatures, want.Signatures) {
				t.Errorf("signatures = %q, want %q", got.Signatures, want.Signatures)
			}
			if !reflect.DeepEqual(got.Calls, want.Calls) {
				t.Errorf("calls = %+v, want %+v", got.Calls, want.Calls)
			}
			if len(got.Results) != len(want.Results) {
				t.Fatalf("%d tool results, want %d", len(got.Results), len(want.Results))
			}
			for i := range want.Results {
				if got.Results[i].ToolUseID != want.Results[i].ToolUseID {
					t.Errorf("result %d tool_use_id = %q, want %q", i, got.Results[i].ToolUseID, want.Results[i].ToolUseID)
				}
				var a, b any
				if err := json.Unmarshal([]byte(got.ResultTexts[i]), &a); err != nil {
					t.Fatalf("result %d text is not the JSON result block: %v", i, err)
				}
				_ = json.Unmarshal(want.ResultRaw[i], &b)
				if !reflect.DeepEqual(a, b) {
					t.Errorf("result %d content differs from the recorded block", i)
				}
			}
			if got.StopReason != want.StopReason {
				t.Errorf("stop reason = %q, want %q", got.StopReason, want.StopReason)
			}
			if got.Model != want.Model || got.ResponseID != want.ResponseID {
				t.Errorf("model and response id = %q %q, want %q %q", got.Model, got.ResponseID, want.Model, want.ResponseID)
			}
			if got.Usage == nil {
				t.Fatal("no usage event")
			}
			for _, f := range []struct {
				name      string
				got, want *int64
			}{
				{"input", got.Usage.InputTokens, want.Usage.InputTokens},
				{"output", got.Usage.OutputTokens, want.Usage.OutputTokens},
				{"cache_read", got.Usage.CacheReadInputTokens, want.Usage.CacheReadInputTokens},
				{"cache_creation", got.Usage.CacheCreationInputTokens, want.Usage.CacheCreationInputTokens},
				{"reasoning", got.Usage.ReasoningTokens, want.Usage.ReasoningTokens},
			} {
				if !providertest.EqualInt64(f.got, f.want) {
					t.Errorf("usage %s = %s, want %s", f.name, providertest.FormatInt64(f.got), providertest.FormatInt64(f.want))
				}
			}
			if !reflect.DeepEqual(got.Errors, want.Errors) {
				t.Errorf("errors = %+v, want %+v", got.Errors, want.Errors)
			}
			if got.Status != want.Status {
				t.Errorf("status = %q, want %q", got.Status, want.Status)
			}
			// Never a silent empty answer: a stream with no text, thinking
			// or calls must say why.
			if got.Text == "" && len(got.Calls) == 0 && got.Thinking == "" && len(got.Errors) == 0 {
				t.Error("empty answer without an error event")
			}
		})
	}
}
