package turn_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

func putAgent(t *testing.T, e *env, def events.AgentDefinition) uint64 {
	t.Helper()
	rev, _, err := agents.New(e.js).Put(natstest.Context(t), def, agents.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

func toolNames(defs []events.ToolDefinition) string {
	var n []string
	for _, d := range defs {
		n = append(n, d.Name)
	}
	return strings.Join(n, ",")
}

// A turn that names an agent runs with the definition's model, system
// prompt, tools and options; a field the request sets wins; the state
// pins the revision (docs/protocol.md §5, "Agents").
func TestTurnOfAnAgent(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(llmtest.TextStep("from the agent"), llmtest.TextStep("overridden"))
	e.scripted(p)
	var runs atomic.Int64
	e.startToolexec(toolexec.Config{}, capitalTool(&runs))
	e.startTurn(turn.Config{})
	temp := 0.25
	rev := putAgent(t, e, events.AgentDefinition{
		Name: "geo", Model: "test:agent-model", System: "You know capitals.", Tools: []string{"get_capital"},
		Temperature: &temp, MaxTokens: 321,
	})

	id := newID("agent")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Agent: "geo", Messages: []events.Message{events.UserText("capital of France?")}})
	if end := w.waitEnd(); end.Type != events.TypeTurnCompleted {
		t.Fatalf("ended with %s: %s", end.Type, end.Data)
	}
	req := p.Requests()[0]
	if !strings.HasSuffix(req.Model, "agent-model") || req.System != "You know capitals." || toolNames(req.Tools) != "get_capital" ||
		req.Temperature == nil || *req.Temperature != 0.25 || req.MaxTokens != 321 {
		t.Fatalf("model request %s system %q tools %s temperature %v max tokens %d; want the definition's", req.Model, req.System, toolNames(req.Tools), req.Temperature, req.MaxTokens)
	}
	st, ok, err := turn.LoadState(context.Background(), e.js, id)
	if err != nil || !ok || st.Request == nil || st.Request.Agent != events.AgentRef("geo", rev) {
		t.Fatalf("state request %+v, %v %v; want agent pinned to geo@%d", st.Request, ok, err, rev)
	}

	// The request's own fields override the definition's.
	id2 := newID("agent-over")
	w2 := e.watch(id2)
	hot := 0.9
	e.submit(events.TurnRequest{TurnID: id2, Agent: "geo", Model: "test:request-model", System: "Be terse.", Tools: []string{},
		Temperature: &hot, Messages: []events.Message{events.UserText("hi")}})
	if end := w2.waitEnd(); end.Type != events.TypeTurnCompleted {
		t.Fatalf("ended with %s: %s", end.Type, end.Data)
	}
	req = p.Requests()[1]
	if !strings.HasSuffix(req.Model, "request-model") || req.System != "Be terse." || len(req.Tools) != 0 ||
		*req.Temperature != 0.9 || req.MaxTokens != 321 {
		t.Fatalf("model request %s system %q tools %s temperature %v max tokens %d; want the request's fields over the definition's",
			req.Model, req.System, toolNames(req.Tools), *req.Temperature, req.MaxTokens)
	}
}

// A turn paused for approval resumes with the revision it started with,
// after the definition changed and after it was deleted.
func TestAgentRevisionPinnedAcrossResume(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "get_capital", Input: `{"country":"France"}`}),
		llmtest.TextStep("Paris"),
	)
	e.scripted(p)
	var runs atomic.Int64
	e.startToolexec(toolexec.Config{}, capitalTool(&runs))
	e.startTurn(turn.Config{Hooks: pauseChain(t)})
	putAgent(t, e, events.AgentDefinition{Name: "geo", Model: "test:m", System: "first system", Tools: []string{"get_capital"}})

	id := newID("agent-pin")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Agent: "geo", Messages: []events.Message{events.UserText("capital?")}})
	if end := w.waitEnd(); end.Type != events.TypeTurnPaused {
		t.Fatalf("ended with %s: %s", end.Type, end.Data)
	}
	putAgent(t, e, events.AgentDefinition{Name: "geo", Model: "test:m", System: "second system", Tools: []string{}})
	if err := agents.New(e.js).Delete(natstest.Context(t), "geo"); err != nil {
		t.Fatal(err)
	}

	e.resume(events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{"call_1": {Kind: events.DecisionApprove}}})
	evs := w.waitFor("the end after the resume", func(evs []ev) bool {
		return find(evs, events.TypeTurnCompleted) >= 0 || find(evs, events.TypeTurnFailed) >= 0
	})
	if find(evs, events.TypeTurnCompleted) < 0 {
		t.Fatalf("resumed turn did not complete: %s", describe(evs))
	}
	reqs := p.Requests()
	if len(reqs) != 2 || reqs[1].System != "first system" || toolNames(reqs[1].Tools) != "get_capital" {
		t.Fatalf("model calls %d, the resumed call's system %q tools %s; want the pinned revision's", len(reqs), reqs[len(reqs)-1].System, toolNames(reqs[len(reqs)-1].Tools))
	}
}

// A request naming an agent the registry does not hold (or a revision
// that is not the agent's) is rejected and fails with unknown_agent.
func TestUnknownAgentIsRejectedAndFails(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted()
	e.scripted(p)
	e.startTurn(turn.Config{})
	other := putAgent(t, e, events.AgentDefinition{Name: "other", Model: "test:m"})
	putAgent(t, e, events.AgentDefinition{Name: "geo", Model: "test:m"})
	for _, ref := range []string{"nobody", events.AgentRef("geo", other)} {
		id := newID("agent-unknown")
		next := e.rejections(id)
		w := e.watch(id)
		e.submit(events.TurnRequest{TurnID: id, Agent: ref, Messages: []events.Message{events.UserText("hi")}})
		rj := next()
		if rj.Code != events.RejectUnknownAgent || rj.TurnID != id || !strings.Contains(rj.Reason, strings.Split(ref, "@")[0]) {
			t.Errorf("%s: rejected %+v; want unknown_agent naming the agent", ref, rj)
		}
		end := w.waitEnd()
		if end.Type != events.TypeTurnFailed || decode[events.TurnEnded](t, end).Code != turn.CodeUnknownAgent {
			t.Errorf("%s: ended with %s %s; want llmw.turn.failed unknown_agent", ref, end.Type, end.Data)
		}
	}
	if p.Calls() != 0 {
		t.Fatalf("%d model calls for unknown agents", p.Calls())
	}
}

func agentsRegistry(e *env) *agents.Registry { return agents.New(e.js) }

func agentsPutOptions() agents.PutOptions { return agents.PutOptions{Force: true} }
