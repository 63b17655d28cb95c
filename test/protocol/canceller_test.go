package protocol_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// §9.1, approving a paused call: the resume carries Nats-Msg-Id = the turn
// id, like its submit, and reaches the turn.
func TestWalkResume(t *testing.T) {
	s := newStack(t)
	s.startIngestAs("openai", llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "echo", Input: `{"text":"hi"}`}).WithDelay(50*time.Millisecond),
		llmtest.TextStep("done"),
	))
	s.startToolexec(echo())
	chain := &hook.Chain{}
	if err := chain.BeforeToolCall(hook.Func[hook.ToolCallInput, hook.BeforeToolCallResult](
		func(context.Context, *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
			return hook.BeforeToolCallResult{Action: hook.ToolPause, Reason: "needs approval"}, nil
		}), hook.Options{Name: "approve"}); err != nil {
		t.Fatal(err)
	}
	s.startTurn(turn.Config{Hooks: chain})

	evs := s.subscribe("llmw.events.*.t-02.>")
	s.request("llmw.turn.submit", ceHeaders("llmw.turn.submit", "1", "Nats-Msg-Id", "t-02"),
		`{"turn_id":"t-02","model":"openai:gpt-4.1-mini","messages":[{"role":"user","content":"Echo hi"}],"tools":["echo"]}`)
	paused := evs.until("llmw.turn.paused")
	var p struct {
		Pending []struct {
			ID string `json:"id"`
		} `json:"pending"`
	}
	if err := json.Unmarshal(paused[len(paused)-1].Data, &p); err != nil || len(p.Pending) != 1 || p.Pending[0].ID != "call_1" {
		t.Fatalf("paused %s", paused[len(paused)-1].Data)
	}
	s.request("llmw.turn.resume", ceHeaders("llmw.turn.resume", "2", "Nats-Msg-Id", "t-02"),
		`{"turn_id":"t-02","decisions":{"call_1":"approve"}}`)
	rest := evs.until("llmw.turn.completed", "llmw.turn.failed", "llmw.turn.aborted")
	if last := rest[len(rest)-1]; last.Header.Get("ce-type") != "llmw.turn.completed" || rest[0].Header.Get("ce-type") != "llmw.turn.resumed" {
		t.Fatalf("after the resume %v", typesOf(rest))
	}
	if string(rest[0].Data) != `{"decisions":{"call_1":"approve"}}` {
		t.Fatalf("turn.resumed %s", rest[0].Data)
	}
}

// §9.4: a canceller cancels a running turn, and a cancel of an id that has
// no turn is answered.
func TestWalkCanceller(t *testing.T) {
	s := newStack(t)
	s.startIngestAs("openai", llmtest.NewScripted(llmtest.BlockingStep("Once upon a time")))
	s.startTurn(turn.Config{})

	evs := s.subscribe("llmw.events.*.t-03.>")
	s.request("llmw.turn.submit", ceHeaders("llmw.turn.submit", "1"),
		`{"turn_id":"t-03","model":"openai:gpt-4.1-mini","messages":[{"role":"user","content":"Tell a long story"}]}`)
	evs.until("llmw.block.delta")
	if err := s.nc.Publish("llmw.turn.cancel.t-03", nil); err != nil {
		t.Fatal(err)
	}
	got := evs.until("llmw.turn.completed", "llmw.turn.failed", "llmw.turn.aborted")
	last := got[len(got)-1]
	var end map[string]string
	if err := json.Unmarshal(last.Data, &end); err != nil || last.Header.Get("ce-type") != "llmw.turn.aborted" || end["code"] != "cancelled" {
		t.Fatalf("end %s %s", last.Header.Get("ce-type"), last.Data)
	}

	rejected := s.subscribe("llmw.turn.rejected.t-nope")
	if err := s.nc.Publish("llmw.turn.cancel.t-nope", nil); err != nil {
		t.Fatal(err)
	}
	rj := rejected.next()
	var answer map[string]string
	if err := json.Unmarshal(rj.Data, &answer); err != nil || answer["code"] != "unknown_turn" || answer["request"] != "llmw.turn.cancel" {
		t.Fatalf("answer %s", rj.Data)
	}
}
