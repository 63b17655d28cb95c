package protocol_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
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
