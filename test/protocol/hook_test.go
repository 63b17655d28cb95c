package protocol_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/turn"
)

// §9.3: a hook written from the document registers with a KV put, answers
// a before_tool_call request with skip (echoing the request's headers, as
// nats-py's Msg.respond does), and the model reads the skip as the call's
// error result.
func TestWalkHook(t *testing.T) {
	s := newStack(t)
	s.startIngestAs("openai", llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "echo", Input: `{"text":"rm -rf /"}`}),
		llmtest.TextStep("I was not allowed to."),
	))
	s.startToolexec(echo())
	// The turn service's side, as cmd/turn wires it: a chain kept in sync
	// with LLMW_HOOKS.
	chain := &hook.Chain{}
	svc := s.startTurn(turn.Config{Hooks: chain})
	js, err := jetstream.New(s.srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	w, err := hooknats.Watch(context.Background(), js, chain, hooknats.WatchOptions{Config: hooknats.Config{Source: svc.Source()}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })

	// The hook: answer first, then register.
	requests := make(chan *nats.Msg, 4)
	sub, err := s.nc.Subscribe("my.hooks.guard", func(m *nats.Msg) {
		requests <- m
		_ = m.RespondMsg(&nats.Msg{Header: m.Header, Data: []byte(`{"result":"skip","reason":"not today"}`)})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	s.request("$KV.LLMW_HOOKS.guard", nil,
		`{"name":"guard","event":"before_tool_call","matcher":"^echo$","subject":"my.hooks.guard","timeout_ms":2000,"failure":"fail_closed"}`)
	natstest.Eventually(t, "the turn service sees the hook", func() bool {
		return slices.ContainsFunc(chain.List(), func(i hook.Info) bool { return i.Name == "guard" })
	})

	evs := s.subscribe("llmw.events.*.t-04.>")
	s.request("llmw.turn.submit", ceHeaders("llmw.turn.submit", "1"),
		`{"turn_id":"t-04","model":"openai:gpt-4.1-mini","messages":[{"role":"user","content":"Clean up"}],"tools":["echo"]}`)
	got := evs.until("llmw.turn.completed", "llmw.turn.failed", "llmw.turn.aborted")

	req := <-requests
	var body struct {
		Event    string `json:"event"`
		Hook     string `json:"hook"`
		TurnID   string `json:"turn_id"`
		Step     int    `json:"step"`
		ToolCall struct {
			ID, Name string
			Input    json.RawMessage
		} `json:"tool_call"`
	}
	if err := json.Unmarshal(req.Data, &body); err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("ce-type") != "llmw.hook.request" || req.Header.Get("ce-turnid") != "t-04" || body.Event != "before_tool_call" ||
		body.Hook != "guard" || body.TurnID != "t-04" || body.Step != 1 || body.ToolCall.ID != "call_1" || body.ToolCall.Name != "echo" {
		t.Fatalf("request %v %s", req.Header, req.Data)
	}
	if typesOf(got)[len(got)-1] != "llmw.turn.completed" || !slices.Contains(typesOf(got), "llmw.tool.skipped") {
		t.Fatalf("events %v", typesOf(got))
	}
	var done struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type    string `json:"type"`
				Content string `json:"content"`
				IsError bool   `json:"is_error"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(got[len(got)-1].Data, &done); err != nil {
		t.Fatal(err)
	}
	res := done.Messages[2].Content[0]
	if done.Messages[2].Role != "tool" || res.Type != "tool_result" || !res.IsError ||
		!strings.Contains(res.Content, `skipped by hook "guard": not today`) {
		t.Fatalf("the model read %+v", done.Messages[2])
	}
}

// §9.3, a registration with a typo: a guard put into LLMW_HOOKS by hand
// with a matcher that does not compile is a failing hook, and under
// fail_closed it refuses the calls of its event (it cannot tell which it
// guards): the turn aborts with hook_failed, naming the hook and the
// field, and the tool never runs.
func TestWalkHookWithBrokenMatcher(t *testing.T) {
	s := newStack(t)
	s.startIngestAs("openai", llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "echo", Input: `{"text":"rm -rf /"}`}),
		llmtest.TextStep("Done."),
	))
	var ran atomic.Int32
	s.startToolexec(tool.Must("echo", "Answers its text.", func(_ context.Context, a echoArgs) (string, error) {
		ran.Add(1)
		return a.Text, nil
	}))
	chain := &hook.Chain{}
	svc := s.startTurn(turn.Config{Hooks: chain})
	js, err := jetstream.New(s.srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	w, err := hooknats.Watch(context.Background(), js, chain, hooknats.WatchOptions{Config: hooknats.Config{Source: svc.Source()}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })

	// Nobody serves the subject: were the guard asked, no responder would
	// fail it too; the refusal must come from the registration itself.
	ack := s.request("$KV.LLMW_HOOKS.guard", nil,
		`{"name":"guard","event":"before_tool_call","matcher":"(","subject":"my.hooks.guard","timeout_ms":2000,"failure":"fail_closed"}`)
	seq, _ := ack["seq"].(float64)
	if err := w.WaitRevision(context.Background(), uint64(seq)); err != nil {
		t.Fatal(err)
	}
	asked := s.subscribe("my.hooks.guard")

	evs := s.subscribe("llmw.events.*.t-05.>")
	s.request("llmw.turn.submit", ceHeaders("llmw.turn.submit", "1"),
		`{"turn_id":"t-05","model":"openai:gpt-4.1-mini","messages":[{"role":"user","content":"Clean up"}],"tools":["echo"]}`)
	got := evs.until("llmw.turn.completed", "llmw.turn.failed", "llmw.turn.aborted")
	types := typesOf(got)
	if types[len(types)-1] != "llmw.turn.aborted" || slices.Contains(types, "llmw.tool.started") || ran.Load() != 0 {
		t.Fatalf("events %v, tool ran %d times; want the call refused and the turn aborted", types, ran.Load())
	}
	var end struct {
		Code   string `json:"code"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(got[len(got)-1].Data, &end); err != nil {
		t.Fatal(err)
	}
	if end.Code != "hook_failed" || !strings.Contains(end.Reason, `"guard"`) || !strings.Contains(end.Reason, `"matcher"`) {
		t.Fatalf("aborted %+v, want hook_failed naming the hook and its matcher", end)
	}
	var decided bool
	for _, m := range got {
		if m.Header.Get("ce-type") == "llmw.hook.decision" {
			var d struct {
				Hook, Result string
				Failed       bool
			}
			decided = json.Unmarshal(m.Data, &d) == nil && d.Hook == "guard" && d.Result == "abort" && d.Failed
		}
	}
	if !decided {
		t.Errorf("no llmw.hook.decision of guard with result abort, failed: %v", types)
	}
	if n := len(asked.ch); n != 0 {
		t.Errorf("the broken guard's subject got %d requests", n)
	}
}
