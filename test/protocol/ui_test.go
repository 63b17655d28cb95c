package protocol_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// request publishes a request the way docs/protocol.md §9.1 shows: binary
// CloudEvent headers, the data as the body, a reply subject for the
// stream's acknowledgement. It returns the acknowledgement.
func (s *stack) request(subject string, header map[string]string, body string) map[string]any {
	s.t.Helper()
	m := &nats.Msg{Subject: subject, Header: nats.Header{}, Data: []byte(body)}
	for k, v := range header {
		m.Header.Set(k, v)
	}
	reply, err := s.nc.RequestMsg(m, waitFor)
	if err != nil {
		s.t.Fatalf("publish %s: %v", subject, err)
	}
	var ack map[string]any
	if err := json.Unmarshal(reply.Data, &ack); err != nil || ack["error"] != nil {
		s.t.Fatalf("acknowledgement of %s: %s", subject, reply.Data)
	}
	return ack
}

// ceHeaders are the binary-mode headers of §1 for a request of type typ.
func ceHeaders(typ, id string, extra ...string) map[string]string {
	h := map[string]string{"ce-specversion": "1.0", "ce-id": id, "ce-source": "/my-ui", "ce-type": typ, "content-type": "application/json"}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

// typesOf lists the ce-type headers of msgs.
func typesOf(msgs []*nats.Msg) []string {
	var ts []string
	for _, m := range msgs {
		ts = append(ts, m.Header.Get("ce-type"))
	}
	return ts
}

// §9.1: a UI submits a turn and follows it to its end; the same id with
// other data is answered on P.turn.rejected.<turn_id>.
func TestWalkUI(t *testing.T) {
	s := newStack(t)
	s.startIngestAs("openai", llmtest.NewScripted(llmtest.TextStep("2 + 2 = ", "4").WithUsage(12, 7)))
	s.startTurn(turn.Config{})

	evs := s.subscribe("llmw.events.*.t-01.>")
	rejected := s.subscribe("llmw.turn.rejected.t-01")
	ack := s.request("llmw.turn.submit", ceHeaders("llmw.turn.submit", "1", "Nats-Msg-Id", "t-01"),
		`{"turn_id":"t-01","model":"openai:gpt-4.1-mini","messages":[{"role":"user","content":"What is 2+2?"}],"tools":[]}`)
	if ack["stream"] != "LLMW_TURNS" {
		t.Fatalf("acknowledgement %v", ack)
	}
	got := evs.until("llmw.turn.completed", "llmw.turn.failed", "llmw.turn.aborted")
	// The model streams "2 + 2 = " and "4": two deltas, or one when the
	// second joined the first while it waited to be stored (§5).
	var types []string
	var text strings.Builder
	for _, m := range got {
		typ := m.Header.Get("ce-type")
		if typ == "llmw.block.delta" {
			var d struct {
				Index *int   `json:"index"`
				Text  string `json:"text"`
				Step  int    `json:"step"`
			}
			if err := json.Unmarshal(m.Data, &d); err != nil || d.Index == nil || *d.Index != 0 || d.Step != 1 || m.Subject != "llmw.events._.t-01.text" {
				t.Fatalf("delta on %s: %s (%v)", m.Subject, m.Data, err)
			}
			text.WriteString(d.Text)
			if len(types) > 0 && types[len(types)-1] == typ {
				continue
			}
		}
		types = append(types, typ)
	}
	want := []string{"llmw.turn.started", "llmw.turn.step", "llmw.block.start", "llmw.block.delta",
		"llmw.block.stop", "llmw.text.complete", "llmw.usage", "llmw.turn.completed"}
	if !slices.Equal(types, want) {
		t.Fatalf("events %v (runs of deltas as one), want %v", typesOf(got), want)
	}
	if text.String() != "2 + 2 = 4" {
		t.Fatalf("the deltas carry %q", text.String())
	}
	for i, m := range got {
		if seq := m.Header.Get("ce-seq"); seq != itoa(i+1) {
			t.Fatalf("event %d (%s) has ce-seq %q", i+1, m.Header.Get("ce-type"), seq)
		}
		if i == 0 && m.Subject != "llmw.events._.t-01.turn" {
			t.Fatalf("turn.started on %s", m.Subject)
		}
	}
	if first := string(got[3].Data); !strings.HasPrefix(first, `{"index":0,"text":"2 + 2 = `) {
		t.Fatalf("first delta %s", first)
	}
	var done struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
		StopReason string `json:"stop_reason"`
	}
	if err := json.Unmarshal(got[len(got)-1].Data, &done); err != nil {
		t.Fatal(err)
	}
	if len(done.Messages) != 2 || done.Messages[1].Role != "assistant" || done.Messages[1].Content[0].Text != "2 + 2 = 4" || done.StopReason != "end_turn" {
		t.Fatalf("turn.completed %s", got[len(got)-1].Data)
	}

	// The same id again, with another question.
	s.request("llmw.turn.submit", ceHeaders("llmw.turn.submit", "2"),
		`{"turn_id":"t-01","model":"openai:gpt-4.1-mini","messages":[{"role":"user","content":"And 3+3?"}]}`)
	rj := rejected.next()
	var answer map[string]string
	if err := json.Unmarshal(rj.Data, &answer); err != nil {
		t.Fatal(err)
	}
	if rj.Header.Get("ce-type") != "llmw.turn.rejected" || answer["code"] != "turn_exists" || answer["status"] != "completed" ||
		answer["request"] != "llmw.turn.submit" || !strings.Contains(answer["reason"], "choose a new id") {
		t.Fatalf("answer %s %s", rj.Header.Get("ce-type"), rj.Data)
	}
}
