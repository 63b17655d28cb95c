package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// §5, "Answers": a request that cannot be read is rejected under the first
// turn id that is not empty of the body's turn_id, ce-turnid, ce-subject
// and Nats-Msg-Id, on P.turn.rejected._ when that id is no subject token.
func TestMalformedRequestTurnID(t *testing.T) {
	s := newStack(t)
	s.startIngestAs("openai", llmtest.NewScripted())
	s.startTurn(turn.Config{})

	cases := []struct {
		name    string
		header  map[string]string
		body    string
		subject string // where the rejection goes
		turnID  string // its turn_id
	}{
		{"the body's turn_id", ceHeaders("llmw.turn.submit", "m1", "ce-turnid", "t-m1-ce", "ce-subject", "t-m1-subject", "Nats-Msg-Id", "t-m1-msgid"),
			`{"turn_id":"t-m1-body","model":5}`, "llmw.turn.rejected.t-m1-body", "t-m1-body"},
		{"ce-turnid", ceHeaders("llmw.turn.submit", "m2", "ce-turnid", "t-m2-ce", "ce-subject", "t-m2-subject", "Nats-Msg-Id", "t-m2-msgid"),
			`not json`, "llmw.turn.rejected.t-m2-ce", "t-m2-ce"},
		{"ce-subject", ceHeaders("llmw.turn.submit", "m3", "ce-subject", "t-m3-subject", "Nats-Msg-Id", "t-m3-msgid"),
			`{"model":"openai:x"}`, "llmw.turn.rejected.t-m3-subject", "t-m3-subject"},
		{"Nats-Msg-Id", ceHeaders("llmw.turn.submit", "m4", "Nats-Msg-Id", "t-m4-msgid"),
			`[1,2]`, "llmw.turn.rejected.t-m4-msgid", "t-m4-msgid"},
		{"not a token", ceHeaders("llmw.turn.submit", "m5", "ce-turnid", "t-m5-ce"),
			`{"turn_id":"t.m5","messages":[]}`, "llmw.turn.rejected._", "t.m5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rejected := s.subscribe(tc.subject)
			s.request("llmw.turn.submit", tc.header, tc.body)
			m := rejected.next()
			var rj map[string]string
			if err := json.Unmarshal(m.Data, &rj); err != nil || rj["code"] != "invalid_request" || rj["turn_id"] != tc.turnID {
				t.Fatalf("on %s: %s, want invalid_request for turn %q", tc.subject, m.Data, tc.turnID)
			}
		})
	}
}

// §5 "Answers" and "The turn request": a submit that cannot be read gets
// llmw.turn.rejected and, its id having no turn, llmw.turn.failed as its
// only event; `messages: []` without a session_id is such a submit. A
// request that can be read but that the turn cannot run with (a
// tool_choice naming a tool the turn does not offer) gets
// llmw.turn.failed only.
func TestWalkInvalidSubmitAnswers(t *testing.T) {
	s := newStack(t)
	s.startIngestAs("openai", llmtest.NewScripted(llmtest.TextStep("never")))
	s.startTurn(turn.Config{})

	t.Run("rejected and failed", func(t *testing.T) {
		evs := s.subscribe("llmw.events.*.t-empty.>")
		rejected := s.subscribe("llmw.turn.rejected.t-empty")
		s.request("llmw.turn.submit", ceHeaders("llmw.turn.submit", "e1"),
			`{"turn_id":"t-empty","model":"openai:gpt-4.1-mini","messages":[]}`)
		rj := rejection(t, rejected)
		if rj["code"] != "invalid_request" || rj["turn_id"] != "t-empty" || !strings.Contains(rj["reason"], `field "messages"`) {
			t.Fatalf("rejection %v, want invalid_request naming messages", rj)
		}
		m := evs.next()
		var end map[string]string
		if m.Header.Get("ce-type") != "llmw.turn.failed" || m.Header.Get("ce-seq") != "1" || json.Unmarshal(m.Data, &end) != nil ||
			end["code"] != "invalid_request" || end["reason"] != rj["reason"] {
			t.Fatalf("event %s seq %s %s, want llmw.turn.failed invalid_request as the only event", m.Header.Get("ce-type"), m.Header.Get("ce-seq"), m.Data)
		}
		// No turn was stored: the corrected submit of the id runs.
		s.request("llmw.turn.submit", ceHeaders("llmw.turn.submit", "e2"),
			`{"turn_id":"t-empty","model":"openai:gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`)
		got := evs.until("llmw.turn.completed", "llmw.turn.failed", "llmw.turn.aborted")
		if last := got[len(got)-1]; last.Header.Get("ce-type") != "llmw.turn.completed" {
			t.Fatalf("corrected submit ended %s %s", last.Header.Get("ce-type"), last.Data)
		}
	})
	t.Run("failed only", func(t *testing.T) {
		evs := s.subscribe("llmw.events.*.t-choice.>")
		rejected := s.subscribe("llmw.turn.rejected.t-choice")
		s.request("llmw.turn.submit", ceHeaders("llmw.turn.submit", "c1"),
			`{"turn_id":"t-choice","model":"openai:gpt-4.1-mini","messages":[{"role":"user","content":"hi"}],"tools":[],`+
				`"tool_choice":{"type":"tool","name":"echo"}}`)
		got := evs.until("llmw.turn.completed", "llmw.turn.failed", "llmw.turn.aborted")
		var end map[string]string
		last := got[len(got)-1]
		if last.Header.Get("ce-type") != "llmw.turn.failed" || json.Unmarshal(last.Data, &end) != nil || end["code"] != "invalid_request" ||
			!strings.Contains(end["reason"], "tool_choice.name") {
			t.Fatalf("turn ended %s %s, want llmw.turn.failed invalid_request naming tool_choice.name", last.Header.Get("ce-type"), last.Data)
		}
		// The turn exists (failed): a submit of its id again is turn_exists,
		// the first answer on the rejected subject.
		s.request("llmw.turn.submit", ceHeaders("llmw.turn.submit", "c2"),
			`{"turn_id":"t-choice","model":"openai:gpt-4.1-mini","messages":[{"role":"user","content":"hi again"}]}`)
		if rj := rejection(t, rejected); rj["code"] != "turn_exists" || rj["status"] != "failed" {
			t.Fatalf("answer %v, want turn_exists (failed): no rejection of the first submit", rj)
		}
	})
}
