package protocol_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// pausingStack runs a turn service whose before_tool_call hook pauses
// every call, echo hosted, and a model that calls echo as call_1 and then
// answers, turns times over.
func pausingStack(t *testing.T, turns int) *stack {
	t.Helper()
	var steps []llmtest.Script
	for range turns {
		steps = append(steps, llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "echo", Input: `{"text":"hi"}`}),
			llmtest.TextStep("done"))
	}
	s := newStack(t)
	s.startIngestAs("openai", llmtest.NewScripted(steps...))
	s.startToolexec(echo())
	chain := &hook.Chain{}
	if err := chain.BeforeToolCall(hook.Func[hook.ToolCallInput, hook.BeforeToolCallResult](
		func(context.Context, *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
			return hook.BeforeToolCallResult{Action: hook.ToolPause, Reason: "needs approval"}, nil
		}), hook.Options{Name: "approve"}); err != nil {
		t.Fatal(err)
	}
	s.startTurn(turn.Config{Hooks: chain})
	return s
}

// submitPaused submits turn id, which pauses at its call_1, and returns
// its events.
func (s *stack) submitPaused(id string) *inbox {
	s.t.Helper()
	evs := s.subscribe("llmw.events.*." + id + ".>")
	s.request("llmw.turn.submit", ceHeaders("llmw.turn.submit", id),
		`{"turn_id":"`+id+`","model":"openai:gpt-4.1-mini","messages":[{"role":"user","content":"Echo hi"}],"tools":["echo"]}`)
	evs.until("llmw.turn.paused")
	return evs
}

// rejection reads the next llmw.turn.rejected of in.
func rejection(t *testing.T, in *inbox) map[string]string {
	t.Helper()
	m := in.next()
	var rj map[string]string
	if err := json.Unmarshal(m.Data, &rj); err != nil || m.Header.Get("ce-type") != "llmw.turn.rejected" {
		t.Fatalf("on %s: %s %s", m.Subject, m.Header.Get("ce-type"), m.Data)
	}
	return rj
}

// §5 "Answers", §9.1: of two resumes of a paused turn sent at once, one
// continues it and the other is answered not_paused with the status the
// first gave the turn (running, or ended by then), never paused.
func TestWalkResumeTwiceAtOnce(t *testing.T) {
	const turns = 5
	s := pausingStack(t, turns)
	for i := range turns {
		id := "t-rr-" + itoa(i)
		evs := s.submitPaused(id)
		rejected := s.subscribe("llmw.turn.rejected." + id)
		// Both published before either is acknowledged.
		acks := make(chan *nats.Msg, 2)
		sub, err := s.nc.ChanSubscribe(nats.NewInbox(), acks)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 2 {
			m := &nats.Msg{Subject: "llmw.turn.resume", Reply: sub.Subject, Header: nats.Header{},
				Data: []byte(`{"turn_id":"` + id + `","decisions":{"call_1":"approve"}}`)}
			for k, v := range ceHeaders("llmw.turn.resume", id+"-r"+itoa(j)) {
				m.Header.Set(k, v)
			}
			if err := s.nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			select {
			case a := <-acks:
				if !strings.Contains(string(a.Data), `"stream":"LLMW_TURNS"`) {
					t.Fatalf("resume acknowledged %s", a.Data)
				}
			case <-t.Context().Done():
				t.Fatal(t.Context().Err())
			}
		}
		_ = sub.Unsubscribe()

		rj := rejection(t, rejected)
		if rj["code"] != "not_paused" || rj["request"] != "llmw.turn.resume" || rj["turn_id"] != id {
			t.Fatalf("the second resume of %s was answered %v, want not_paused", id, rj)
		}
		if st := rj["status"]; st != "running" && st != "completed" {
			t.Fatalf("not_paused with status %q (%s), want the status the first resume gave the turn", st, rj["reason"])
		}
		if strings.Contains(rj["reason"], "is paused") {
			t.Fatalf("not_paused reason %q", rj["reason"])
		}
		rest := evs.until("llmw.turn.completed", "llmw.turn.failed", "llmw.turn.aborted")
		if got := typesOf(rest); got[0] != "llmw.turn.resumed" || got[len(got)-1] != "llmw.turn.completed" {
			t.Fatalf("%s after the resumes: %v", id, got)
		}
		for _, m := range rest[1:] {
			if m.Header.Get("ce-type") == "llmw.turn.resumed" {
				t.Fatalf("%s resumed twice", id)
			}
		}
	}
}

// §5 "Answers", §9.1: a resume whose decision is of no known kind is
// answered invalid_request with status paused, naming the decision, and
// the turn stays paused: a corrected resume continues it.
func TestWalkResumeUnknownDecision(t *testing.T) {
	s := pausingStack(t, 1)
	evs := s.submitPaused("t-rd")
	rejected := s.subscribe("llmw.turn.rejected.t-rd")
	for i, d := range []string{`{"foo":1}`, `"maybe"`, `{"deny":5}`, `null`} {
		s.request("llmw.turn.resume", ceHeaders("llmw.turn.resume", "bad-"+itoa(i)),
			`{"turn_id":"t-rd","decisions":{"call_1":`+d+`}}`)
		rj := rejection(t, rejected)
		if rj["code"] != "invalid_request" || rj["status"] != "paused" || rj["request"] != "llmw.turn.resume" ||
			!strings.Contains(rj["reason"], `"decisions.call_1"`) {
			t.Fatalf("decision %s answered %v, want invalid_request, status paused, naming decisions.call_1", d, rj)
		}
	}
	s.request("llmw.turn.resume", ceHeaders("llmw.turn.resume", "good"), `{"turn_id":"t-rd","decisions":{"call_1":"approve"}}`)
	rest := evs.until("llmw.turn.completed", "llmw.turn.failed", "llmw.turn.aborted")
	if got := typesOf(rest); got[0] != "llmw.turn.resumed" || got[len(got)-1] != "llmw.turn.completed" {
		t.Fatalf("after the corrected resume: %v", got)
	}
}
