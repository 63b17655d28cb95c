package gateway_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/gateway"
)

// anthropicFinish is how the AI SDK's Anthropic provider maps a stop
// reason to a finish reason (vercel/ai packages/anthropic, map-anthropic-
// stop-reason.ts), the reference for what a client expects.
var anthropicFinish = map[string]string{"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool-calls", "max_tokens": "length"}

// expectedParts derives the protocol's parts of a recorded multi-step
// turn from the recordings: per step its blocks in order, a tool call's
// input, then the tool outputs, and the finish. Runs of deltas are one
// entry (the runtime may merge deltas); data-* parts are checked apart.
func expectedParts(t *testing.T, steps []recorded) []string {
	out := []string{"start"}
	for _, st := range steps {
		out = append(out, "start-step")
		var calls int
		for _, b := range st.blocks {
			switch b.typ {
			case "thinking":
				out = append(out, "reasoning-start")
				if b.text != "" {
					out = append(out, "reasoning-delta")
				}
				out = append(out, "reasoning-end")
			case "text":
				out = append(out, "text-start")
				if b.text != "" {
					out = append(out, "text-delta")
				}
				out = append(out, "text-end")
			case "tool_use":
				out = append(out, "tool-input-start")
				if b.text != "" {
					out = append(out, "tool-input-delta")
				}
				out = append(out, "tool-input-available")
				calls++
			default:
				t.Fatalf("recorded block type %q: extend the test", b.typ)
			}
		}
		for range calls {
			out = append(out, "tool-output-available")
		}
		out = append(out, "finish-step")
	}
	return append(out, "finish")
}

// collapse drops data-* parts and merges runs of one delta type.
func collapse(ps []part) []string {
	var out []string
	for _, p := range ps {
		if strings.HasPrefix(p.Type, "data-") {
			continue
		}
		if strings.HasSuffix(p.Type, "-delta") && len(out) > 0 && out[len(out)-1] == p.Type {
			continue
		}
		out = append(out, p.Type)
	}
	return out
}

// A recorded multi-step turn — thinking, a tool call, its result, the
// answer — comes out as the protocol's parts, part by part, each valid
// under the protocol's schema, with the recorded content.
func TestRecordedTurnStream(t *testing.T) {
	st := startStack(t, stackOpts{})
	_, srv := startGateway(t, st, gateway.Config{})
	sc, err := replay.Lookup("anthropic")
	if err != nil {
		t.Fatal(err)
	}
	var steps []recorded
	for _, s := range sc.Steps {
		steps = append(steps, readRecorded(t, s))
	}

	// The protocol's header and content type.
	resp := postRaw(t, srv.URL+"/api/chat", `{"id":"rec-1","trigger":"submit-message","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"`+sc.Prompt+`"}]}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("x-vercel-ai-ui-message-stream") != "v1" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	parts, done := readAll(t, gateway.NewStreamReader(resp.Body), nil)
	resp.Body.Close()
	if !done {
		t.Fatal("no [DONE]")
	}
	want := expectedParts(t, steps)
	if got := collapse(parts); !slices.Equal(got, want) {
		t.Fatalf("parts\n got %v\nwant %v", got, want)
	}
	if parts[0].field("messageId") == "" {
		t.Errorf("start has no messageId: %s", parts[0].Raw)
	}
	if got, want := parts[len(parts)-1].field("finishReason"), anthropicFinish[steps[len(steps)-1].stopReason]; got != want {
		t.Errorf("finishReason %q, want %q (recorded stop_reason %q)", got, want, steps[len(steps)-1].stopReason)
	}

	// Content: the recorded thinking, tool call and answer, each delta
	// under the id its start part announced.
	var thinking, answer string
	var tool recBlock
	for _, s := range steps {
		for _, b := range s.blocks {
			switch b.typ {
			case "thinking":
				thinking += b.text
			case "tool_use":
				tool = b
			case "text":
				answer += b.text
			}
		}
	}
	if got := text(parts, "reasoning-delta"); got != thinking {
		t.Errorf("reasoning %q, recorded %q", got, thinking)
	}
	if got := text(parts, "text-delta"); got != answer {
		t.Errorf("text %q, recorded %q", got, answer)
	}
	open := map[string]string{}
	callID := ""
	for _, p := range parts {
		switch p.Type {
		case "text-start", "reasoning-start":
			open[p.field("id")] = p.Type
		case "text-delta", "reasoning-delta":
			if open[p.field("id")] != strings.Replace(p.Type, "-delta", "-start", 1) {
				t.Errorf("%s under id %q, which no start opened", p.Type, p.field("id"))
			}
		case "text-end", "reasoning-end":
			delete(open, p.field("id"))
		case "tool-input-start", "tool-input-available", "tool-output-available":
			// The replay makes each replay's call ids unique with a
			// suffix: the recorded id begins them.
			if callID == "" {
				callID = p.field("toolCallId")
			}
			if id := p.field("toolCallId"); id != callID || !strings.HasPrefix(id, tool.id) {
				t.Errorf("%s of call %q, recorded %q (and %q before)", p.Type, id, tool.id, callID)
			}
			if p.Type != "tool-output-available" && p.field("toolName") != tool.name {
				t.Errorf("%s of tool %q, recorded %q", p.Type, p.field("toolName"), tool.name)
			}
			if p.Type == "tool-input-available" {
				wantIn := tool.startInput
				if tool.text != "" {
					wantIn = json.RawMessage(tool.text)
				}
				if !jsonEq(p.field("input"), string(wantIn)) {
					t.Errorf("input %s, recorded %s", p.field("input"), wantIn)
				}
			}
			if p.Type == "tool-output-available" && p.field("output") == "" {
				t.Errorf("empty output: %s", p.Raw)
			}
		}
	}
	if len(open) > 0 {
		t.Errorf("parts never ended: %v", open)
	}
	// The custom parts: the turn, usage (the last one has the total).
	var usage int
	for _, p := range parts {
		if p.Type == gateway.DataUsage {
			usage++
		}
	}
	if usage != len(steps) || collapseData(parts)[0] != gateway.DataTurn {
		t.Errorf("data parts %v: want %s first and one %s per step", collapseData(parts), gateway.DataTurn, gateway.DataUsage)
	}

	// The finished turn is no active stream: resume answers 204.
	c := &gateway.Client{URL: srv.URL}
	if _, err := c.Resume(ctxT(t), "rec-1"); !errors.Is(err, gateway.ErrNoActiveStream) {
		t.Fatalf("resume of a finished turn: %v, want 204", err)
	}
	// But the history replays it, part for part the same.
	r2, err := http.Get(srv.URL + "/api/chat/rec-1/stream?turn=" + parts[0].field("messageId"))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := readAll(t, gateway.NewStreamReader(r2.Body), nil)
	r2.Body.Close()
	if !slices.EqualFunc(again, parts, func(a, b part) bool { return string(a.Raw) == string(b.Raw) }) {
		t.Errorf("the replay differs from the live stream:\n%v\n%v", types(again), types(parts))
	}
}

func collapseData(ps []part) []string {
	var out []string
	for _, p := range ps {
		if strings.HasPrefix(p.Type, "data-") {
			out = append(out, p.Type)
		}
	}
	return out
}

func jsonEq(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func postRaw(t *testing.T, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func readBody(t *testing.T, r *http.Response) string {
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	return string(b)
}
