package protocol_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// syncBuffer is a bytes.Buffer a logger writes from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// §6 "Results and is_error", §9.2: a host's result that the turn cannot
// read (a field of the wrong type, a media part whose bytes are not its
// media_type, a call_id or turn_id that is not the subject's) is the
// call's stored result all the same. The turn answers the model at once
// with an error result naming what was wrong, logs it, and the host's
// corrected result is refused as a duplicate.
func TestWalkToolHostUnreadableResult(t *testing.T) {
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"))
	cases := []struct {
		name   string
		result string // the data the host publishes, with %T for the turn id
		want   []string
	}{
		{"content a number", `{"call_id":"call_1","turn_id":"%T","name":"echo","content":42,"is_error":false}`,
			[]string{`field "content"`, "string or an array of parts"}},
		{"is_error a string", `{"call_id":"call_1","turn_id":"%T","name":"echo","content":"hi","is_error":"no"}`,
			[]string{`is_error`}},
		{"not JSON", `{"call_id":"call_1",`, []string{"cannot be read"}},
		{"jpeg holding png", `{"call_id":"call_1","turn_id":"%T","name":"echo","content":[{"type":"image","media_type":"image/jpeg","data":"` + png + `"}],"is_error":false}`,
			[]string{`field "content[0].data"`, "image/png", "image/jpeg"}},
		{"another call", `{"call_id":"call_2","turn_id":"%T","name":"echo","content":"hi","is_error":false}`,
			[]string{`field "call_id"`, `"call_2"`, `"call_1"`}},
		{"another turn", `{"call_id":"call_1","turn_id":"t-other","name":"echo","content":"hi","is_error":false}`,
			[]string{`field "turn_id"`, `"t-other"`}},
	}
	var steps []llmtest.Script
	for range cases {
		steps = append(steps, llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "echo", Input: `{"text":"hi"}`}),
			llmtest.TextStep("The tool failed."))
	}
	s := newStack(t)
	s.startIngestAs("openai", llmtest.NewScripted(steps...))
	logs := &syncBuffer{}
	s.startTurn(turn.Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	h := startRawToolHost(s)

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "t-bad-" + itoa(i)
			evs := s.subscribe("llmw.events.*." + id + ".>")
			s.request("llmw.turn.submit", ceHeaders("llmw.turn.submit", id),
				`{"turn_id":"`+id+`","model":"openai:gpt-4.1-mini","messages":[{"role":"user","content":"Echo hi"}],"tools":["echo"]}`)
			call := h.pull()
			h.checkCall(call, id, "call_1")

			published := time.Now()
			ack := s.request("llmw.tool.result."+id+".call_1", hostHeaders("llmw.tool.result", "r-"+id, id+".call_1"),
				strings.ReplaceAll(tc.result, "%T", id))
			if ack["stream"] != "LLMW_TOOLRESULTS" || ack["duplicate"] != nil {
				t.Fatalf("result acknowledged %v", ack)
			}
			if err := s.nc.Publish(call.Reply, []byte("+ACK")); err != nil {
				t.Fatal(err)
			}

			got := evs.until("llmw.turn.completed", "llmw.turn.failed", "llmw.turn.aborted")
			var result struct {
				CallID  string `json:"call_id"`
				Content string `json:"content"`
				IsError bool   `json:"is_error"`
			}
			for _, m := range got {
				if m.Header.Get("ce-type") == "llmw.tool.result" {
					if err := json.Unmarshal(m.Data, &result); err != nil {
						t.Fatal(err)
					}
				}
			}
			// echo's timeout_ms is 10 s: an answer that came from the
			// call's deadline would take that long and say so.
			if took := time.Since(published); took > 5*time.Second {
				t.Fatalf("the turn answered %s after the result", took)
			}
			if result.CallID != "call_1" || !result.IsError || strings.Contains(result.Content, "timed out") {
				t.Fatalf("llmw.tool.result event %+v, want an error result of call_1 naming what was wrong", result)
			}
			t.Logf("error result: %s", result.Content)
			for _, w := range tc.want {
				if !strings.Contains(result.Content, w) {
					t.Fatalf("error result %q does not say %s", result.Content, w)
				}
			}
			last := got[len(got)-1]
			if last.Header.Get("ce-type") != "llmw.turn.completed" {
				t.Fatalf("turn ended %s %s", last.Header.Get("ce-type"), last.Data)
			}
			if p := transcriptResult(t, last, "call_1"); p["is_error"] != true || p["content"] != result.Content {
				t.Fatalf("tool_result in the transcript %v", p)
			}
			logged := false
			for _, l := range strings.Split(logs.String(), "\n") {
				logged = logged || strings.Contains(l, "cannot be read") && strings.Contains(l, "turn_id="+id) && strings.Contains(l, "call_id=call_1")
			}
			if !logged {
				t.Fatalf("no warning with the turn and call ids in the log:\n%s", logs.String())
			}

			// The host's corrected result comes too late: the first stored
			// one is the call's.
			dup := s.request("llmw.tool.result."+id+".call_1", hostHeaders("llmw.tool.result", "r2-"+id, id+".call_1"),
				`{"call_id":"call_1","turn_id":"`+id+`","name":"echo","content":"hi","is_error":false,"duration_ms":1}`)
			if dup["duplicate"] != true {
				t.Fatalf("corrected result acknowledged %v, want a duplicate", dup)
			}
		})
	}
	h.waitAcked()
	// The turn took each stored result as the call's: it cancelled none.
	select {
	case m := <-h.cancels.ch:
		t.Fatalf("a cancel of a call that has its result: %s", m.Subject)
	default:
	}
}
