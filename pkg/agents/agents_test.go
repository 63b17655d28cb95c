package agents_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// The registry's List watch and every connection end with the test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, natstest.NotOurGoroutines()...) }

func registry(t *testing.T) *agents.Registry {
	t.Helper()
	e := natstest.Start(t, natstest.Options{Provision: true})
	return agents.New(e.JS)
}

func put(t *testing.T, r *agents.Registry, def events.AgentDefinition) uint64 {
	t.Helper()
	rev, warns, err := r.Put(natstest.Context(t), def, agents.PutOptions{})
	if err != nil || len(warns) > 0 {
		t.Fatalf("put %s: %v (warnings %v)", def.Name, err, warns)
	}
	return rev
}

// A definition is stored under its name; NAME resolves to the latest
// revision, NAME@REV to the one put then, also after a change and after
// the agent was deleted (the history keeps it).
func TestPutResolveListDeleteHistory(t *testing.T) {
	r := registry(t)
	ctx := natstest.Context(t)
	rev1 := put(t, r, events.AgentDefinition{Name: "support", Model: "openai:gpt-4.1-mini", System: "v1", Description: "answers"})
	put(t, r, events.AgentDefinition{Name: "billing", Model: "anthropic:claude-sonnet-4-5"})
	rev2 := put(t, r, events.AgentDefinition{Name: "support", Model: "openai:gpt-4.1-mini", System: "v2"})
	if rev2 <= rev1 {
		t.Fatalf("revision after a change %d, first %d: want a larger one", rev2, rev1)
	}

	a, err := r.Resolve(ctx, "support")
	if err != nil || a.System != "v2" || a.Revision != rev2 {
		t.Fatalf("support = %q rev %d, %v; want v2 rev %d", a.System, a.Revision, err, rev2)
	}
	a, err = r.Resolve(ctx, events.AgentRef("support", rev1))
	if err != nil || a.System != "v1" || a.Revision != rev1 || a.Description != "answers" {
		t.Fatalf("support@%d = %+v, %v; want the first definition", rev1, a, err)
	}

	list, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "billing" || list[1].Name != "support" || list[1].Revision != rev2 {
		t.Fatalf("list = %+v; want billing, support@%d", list, rev2)
	}

	if err := r.Delete(ctx, "support"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve(ctx, "support"); !errors.Is(err, agents.ErrUnknownAgent) {
		t.Fatalf("resolve of a deleted agent: %v, want ErrUnknownAgent", err)
	}
	if a, err := r.Resolve(ctx, events.AgentRef("support", rev2)); err != nil || a.System != "v2" {
		t.Fatalf("support@%d after delete = %+v, %v; want v2", rev2, a, err)
	}
	if err := r.Delete(ctx, "support"); !errors.Is(err, agents.ErrUnknownAgent) {
		t.Fatalf("second delete: %v, want ErrUnknownAgent", err)
	}
	if list, _ := r.List(ctx); len(list) != 1 || list[0].Name != "billing" {
		t.Fatalf("list after delete = %+v; want billing only", list)
	}

	h, err := r.History(ctx, "support")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 || h[0].System != "v1" || h[1].System != "v2" || !h[2].Deleted {
		t.Fatalf("history = %+v; want v1, v2, deleted", h)
	}
}

// A revision that is not one of the agent's (another agent's, or none) is
// unknown; so is a name never put.
func TestResolveUnknown(t *testing.T) {
	r := registry(t)
	ctx := natstest.Context(t)
	other := put(t, r, events.AgentDefinition{Name: "billing", Model: "openai:gpt-4.1-mini"})
	put(t, r, events.AgentDefinition{Name: "support", Model: "openai:gpt-4.1-mini"})
	for _, ref := range []string{"nobody", events.AgentRef("support", other), "support@999"} {
		if _, err := r.Resolve(ctx, ref); !errors.Is(err, agents.ErrUnknownAgent) {
			t.Errorf("resolve %s: %v, want ErrUnknownAgent", ref, err)
		}
	}
	if _, err := r.Resolve(ctx, "support@x"); !errors.Is(err, events.ErrInvalid) {
		t.Errorf("resolve support@x: %v, want events.ErrInvalid", err)
	}
}

// Sub-agents must exist and must not lead back to the agent (a call of
// itself is allowed); Force stores them anyway and returns the problems.
func TestPutChecksSubAgents(t *testing.T) {
	r := registry(t)
	ctx := natstest.Context(t)
	put(t, r, events.AgentDefinition{Name: "a", Model: "openai:gpt-4.1-mini"})
	put(t, r, events.AgentDefinition{Name: "b", Model: "openai:gpt-4.1-mini", Agents: []string{"a"}})
	// self-reference is allowed
	put(t, r, events.AgentDefinition{Name: "self", Model: "openai:gpt-4.1-mini", Agents: []string{"self", "b"}})

	_, _, err := r.Put(ctx, events.AgentDefinition{Name: "c", Model: "openai:gpt-4.1-mini", Agents: []string{"ghost"}}, agents.PutOptions{})
	if !errors.Is(err, agents.ErrUnknownSubAgent) || !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("unknown sub-agent: %v, want ErrUnknownSubAgent naming ghost", err)
	}
	if _, err := r.Resolve(ctx, "c"); !errors.Is(err, agents.ErrUnknownAgent) {
		t.Fatalf("a refused put was stored: %v", err)
	}

	cyc := events.AgentDefinition{Name: "a", Model: "openai:gpt-4.1-mini", Agents: []string{"b"}}
	_, _, err = r.Put(ctx, cyc, agents.PutOptions{})
	if !errors.Is(err, agents.ErrCycle) || !strings.Contains(err.Error(), "a → b → a") {
		t.Fatalf("cycle a → b → a: %v, want ErrCycle naming the path", err)
	}
	rev, warns, err := r.Put(ctx, cyc, agents.PutOptions{Force: true})
	if err != nil || rev == 0 || len(warns) != 1 || !errors.Is(warns[0], agents.ErrCycle) {
		t.Fatalf("forced put: rev %d, warnings %v, %v; want stored with the cycle as a warning", rev, warns, err)
	}
	if a, err := r.Resolve(ctx, "a"); err != nil || len(a.Agents) != 1 {
		t.Fatalf("forced definition not stored: %+v, %v", a, err)
	}
}

// Validation names the field that is wrong; unknown fields are refused.
func TestParseDefinitionErrorsNameTheField(t *testing.T) {
	cases := []struct{ doc, field string }{
		{`{"model":"openai:gpt-4.1-mini"}`, "name"},
		{`{"name":"a.b","model":"openai:gpt-4.1-mini"}`, "name"},
		{`{"name":"a"}`, "model"},
		{`{"name":"a","model":"gpt-4"}`, "model"},
		{`{"name":"a","model":"openai:x","sytem":"typo"}`, "sytem"},
		{`{"name":"a","model":"openai:x","tools":["bad name"]}`, "tools[0]"},
		{`{"name":"a","model":"openai:x","agents":["b","b"]}`, "agents[1]"},
		{`{"name":"a","model":"openai:x","max_steps":-1}`, "max_steps"},
		{`{"name":"a","model":"openai:x","max_cost":-1}`, "max_cost"},
		{`{"name":"a","model":"openai:x","on_parent_cancel":"ignore"}`, "on_parent_cancel"},
		{`{"name":"a","model":"openai:x","input_schema":[1]}`, "input_schema"},
		{`{"name":"a","a2a_url":"ftp://x"}`, "a2a_url"},
		{`{"name":"a","model":"openai:x","response_format":{"type":"xml"}}`, "response_format.type"},
		{`{"name":"a","model":"openai:x","compaction":{"threshold":7}}`, "compaction.threshold"},
		{"name: a\nmodel: openai:x\nfallback_models: [openai:x]\n", "fallback_models[0]"},
		{"name: a\nmodel: openai:x\nextra: 1\n", "extra"},
	}
	for _, c := range cases {
		_, err := agents.ParseDefinition([]byte(c.doc))
		var fe *events.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v, want an error naming %q", c.doc, err, c.field)
		}
	}
	// A remote agent needs no model.
	if _, err := agents.ParseDefinition([]byte(`{"name":"remote","a2a_url":"https://agents.example.com/a2a"}`)); err != nil {
		t.Errorf("remote agent: %v", err)
	}
}

// The example definition shipped in deploy/ is valid, and YAML and JSON
// read the same.
func TestDeployExampleValidates(t *testing.T) {
	b, err := os.ReadFile("../../deploy/agents.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	def, err := agents.ParseDefinition(b)
	if err != nil {
		t.Fatalf("deploy/agents.example.yaml: %v", err)
	}
	if def.Name == "" || def.Model == "" || def.System == "" || len(def.Tools) == 0 {
		t.Fatalf("the example sets no name, model, system or tools: %+v", def)
	}
	b, err = os.ReadFile("../../deploy/agents.lead.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lead, err := agents.ParseDefinition(b)
	if err != nil {
		t.Fatalf("deploy/agents.lead.example.yaml: %v", err)
	}
	if len(lead.Agents) == 0 || lead.Agents[0] != def.Name {
		t.Fatalf("the lead example calls %v, not the agent of deploy/agents.example.yaml (%s)", lead.Agents, def.Name)
	}
	if problems := agents.Check(lead, []agents.Agent{{AgentDefinition: def}}); len(problems) > 0 {
		t.Fatalf("the lead example's sub-agents: %v", problems)
	}
}

// An empty registry lists nothing; a server without the bucket says to
// provision.
func TestEmptyAndNotProvisioned(t *testing.T) {
	r := registry(t)
	ctx := natstest.Context(t)
	if list, err := r.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("empty registry: %v, %v", list, err)
	}
	bare := agents.New(natstest.Start(t, natstest.Options{}).JS)
	if _, err := bare.Resolve(ctx, "a"); !errors.Is(err, agents.ErrNotProvisioned) {
		t.Fatalf("resolve without LLMW_AGENTS: %v, want ErrNotProvisioned", err)
	}
	if _, _, err := bare.Put(ctx, events.AgentDefinition{Name: "a", Model: "openai:x"}, agents.PutOptions{}); !errors.Is(err, agents.ErrNotProvisioned) {
		t.Fatalf("put without LLMW_AGENTS: %v, want ErrNotProvisioned", err)
	}
}
