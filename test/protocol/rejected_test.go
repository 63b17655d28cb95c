package protocol_test

import (
	"encoding/json"
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
