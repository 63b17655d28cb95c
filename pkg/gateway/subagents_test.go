package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/cli"
	"github.com/llmworker/llmworker/internal/service/turnsvc"
	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// These tests run real child turns: NATS, ingest with stand-in models,
// toolexec with the demo tools, a hook that pauses get_capital for a
// person, two turn service replicas of their own, and a gateway whose
// chats run the agent lead, whose sub-agent researcher calls
// get_capital.

// agentTree is such a stack.
type agentTree struct {
	st            *cli.Stack
	turns         []*cli.Stack
	js            jetstream.JetStream
	parent, child *llmtest.Scripted
	c             *gateway.Client
}

func startAgentTree(t *testing.T) *agentTree {
	t.Helper()
	a := &agentTree{parent: llmtest.NewScripted(), child: llmtest.NewScripted()}
	a.st = startStack(t, stackOpts{approve: "get_capital", noTurn: true,
		providers: map[string]llm.Provider{"parent": a.parent, "child": a.child}})
	a.turns = startTurns(t, a.st, 2, turnsvc.Options{})
	var err error
	if a.js, err = jetstream.New(a.st.NC); err != nil {
		t.Fatal(err)
	}
	reg := agents.New(a.js)
	for _, def := range []events.AgentDefinition{
		{Name: "researcher", Description: "Looks facts up.", Model: "child:m", Tools: []string{"get_capital"}},
		{Name: "lead", Model: "parent:m", Agents: []string{"researcher"}},
	} {
		if _, _, err := reg.Put(ctxT(t), def, agents.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, srv := startGateway(t, a.st, gateway.Config{Agent: "lead"})
	a.c = &gateway.Client{URL: srv.URL}
	return a
}

// stored returns the envelopes stored on filter so far.
func (a *agentTree) stored(t *testing.T, filter string) []*events.Envelope {
	t.Helper()
	ctx := ctxT(t)
	cons, err := a.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		t.Fatal(err)
	}
	var out []*events.Envelope
	for {
		b, err := cons.Fetch(256, jetstream.FetchMaxWait(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range b.Messages() {
			n++
			env, err := events.DecodeEnvelope(m.Headers(), m.Data())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, env)
		}
		if n == 0 {
			return out
		}
	}
}

// sourcesOf are the replicas (CloudEvents sources) that stored events
// of types typs (any type when none) of turn id.
func (a *agentTree) sourcesOf(t *testing.T, id string, typs ...string) []string {
	var out []string
	for _, e := range a.stored(t, a.subj().EventsOfTurn(id)) {
		if (len(typs) == 0 || slices.Contains(typs, e.Type)) && !slices.Contains(out, e.Source) {
			out = append(out, e.Source)
		}
	}
	slices.Sort(out)
	return out
}

func (a *agentTree) subj() events.Subjects { return events.NewSubjects(a.st.Prefix) }

// replicaOf is the turn replica whose source is src.
func (a *agentTree) replicaOf(t *testing.T, src string) int {
	t.Helper()
	for i := range a.turns {
		if src == events.Source("turn", fmt.Sprintf("r%d", i+1)) {
			return i
		}
	}
	t.Fatalf("no turn replica has the source %s", src)
	return -1
}

// answer is the assistant message that approves (or denies) the call
// toolCallID of the turn messageID.
func answer(messageID, toolCallID, name string, approved bool) []gateway.UIMessage {
	p := gateway.UIPart{Type: "tool-" + name, ToolCallID: toolCallID, State: "approval-responded",
		Approval: &gateway.UIApproval{ID: gateway.ApprovalID(toolCallID), Approved: &approved}}
	return []gateway.UIMessage{userMsg("capital of France?"), {ID: messageID, Role: "assistant", Parts: []gateway.UIPart{p}}}
}

// sessionStatus is the status GET /api/sessions gives session.
func sessionStatus(t *testing.T, c *gateway.Client, session string) string {
	t.Helper()
	body, err := c.HTTPGet(ctxT(t), "/api/sessions")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Sessions []gateway.SessionInfo `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("/api/sessions: %v: %s", err, body)
	}
	for _, s := range list.Sessions {
		if s.ID == session {
			return s.Status
		}
	}
	t.Fatalf("/api/sessions has no %s: %s", session, body)
	return ""
}

// onceEach fails for a part that a replay or a stream holds twice: two
// starts of one text or reasoning id, two inputs, outputs or approval
// requests of one call.
func onceEach(t *testing.T, where string, ps []part) {
	t.Helper()
	seen := map[string]int{}
	for _, p := range ps {
		var k string
		switch p.Type {
		case "text-start", "text-end", "reasoning-start", "reasoning-end":
			k = p.Type + " " + p.field("id")
		case "tool-input-start", "tool-input-available", "tool-output-available", "tool-output-error", "tool-approval-request", "tool-output-denied":
			k = p.Type + " " + p.field("toolCallId")
		case "start", "finish", "start-step", "finish-step":
			continue
		}
		if k == "" {
			continue
		}
		if seen[k]++; seen[k] == 2 {
			t.Errorf("%s: %s twice in %v", where, k, types(ps))
		}
	}
}

// partsOf reads an SSE body's parts.
func partsOf(t *testing.T, body string) []part {
	t.Helper()
	var out []part
	for _, l := range strings.Split(body, "\n") {
		d, ok := strings.CutPrefix(l, "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var h struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(d), &h); err != nil {
			t.Fatalf("%v: %s", err, d)
		}
		out = append(out, part{h.Type, json.RawMessage(d)})
	}
	return out
}

// A chat of an agent with a sub-agent, on two turn replicas: the child
// turn's text and call show nested under the parent's call, live; the
// child's call paused by a hook is an approval request of the chat,
// while which the session and its message are paused; the replica that
// ran the parent stops while the child waits, and the other continues
// it; the approval, through the chat, resumes the child there and the
// parent completes with the child's answer. A replay of the turn and
// the session's messages hold every part once.
func TestSubAgentChatOnTwoReplicas(t *testing.T) {
	a := startAgentTree(t)
	a.parent.Add(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "researcher", Input: `{"prompt":"What is the capital of France?"}`}),
		llmtest.TextStep("Paris, says the researcher."),
	)
	a.child.Add(
		llmtest.TextToolStep("Looking it up.", llmtest.ToolCallSpec{ID: "c1", Name: "get_capital", Input: `{"country":"France"}`}),
		llmtest.TextStep("Paris"),
	)
	s, err := a.c.Chat(ctxT(t), &gateway.ChatRequest{ID: "s1", Messages: []gateway.UIMessage{userMsg("capital of France?")}})
	if err != nil {
		t.Fatal(err)
	}
	live, done := readAll(t, s, nil)
	if !done {
		t.Fatal("the stream did not end while the child waits for a person")
	}
	parentID := live[0].field("messageId")
	childID := turn.ChildTurnID(parentID, "call_1")
	if live[0].Type != "start" || parentID == "" {
		t.Fatalf("the stream starts with %s", live[0].Raw)
	}
	i := find(live, "tool-approval-request", "toolCallId", childID+".c1")
	if i < 0 {
		t.Fatalf("no approval request of the child's call %s.c1 in %v", childID, types(live))
	}
	if got := textOf(live, childID+".text-"); got != "Looking it up." {
		t.Errorf("the child's text = %q, want its model's", got)
	}
	j := find(live, "text-start", "id", childID+".text-1")
	if j < 0 || owner(live[j]) != (gateway.ChildOwner{TurnID: childID, ToolCallID: "call_1", Depth: 1}) {
		t.Errorf("the child's text part is not owned by %s under call_1: %v", childID, types(live))
	}
	if k := find(live, "tool-input-available", "toolCallId", childID+".c1"); k < 0 || live[k].field("toolName") != "get_capital" {
		t.Errorf("the child's call get_capital is not in the stream")
	}
	if last := live[len(live)-1]; last.Type != "finish" || last.field("finishReason") != "" {
		t.Errorf("the stream ends with %s, want a finish without reason (a pause)", last.Raw)
	}
	onceEach(t, "the live stream", live)

	// While only a person is waited for, the session and its message say
	// paused.
	if st := sessionStatus(t, a.c, "s1"); st != "paused" {
		t.Errorf("/api/sessions: s1 is %s while its sub-agent waits for approval, want paused", st)
	}
	msgs, err := a.c.Messages(ctxT(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if m := msgs[len(msgs)-1]; m.Metadata == nil || m.Metadata.Status != "paused" {
		t.Errorf("messages: the turn's status is %+v while its sub-agent waits for approval, want paused", m.Metadata)
	}

	// The replica that ran the parent stops; the other takes it over.
	srcs := a.sourcesOf(t, parentID, events.TypeToolChild)
	if len(srcs) != 1 {
		t.Fatalf("the parent's llmw.tool.child came from %v", srcs)
	}
	first := a.replicaOf(t, srcs[0])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.turns[first].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	other := events.Source("turn", fmt.Sprintf("r%d", 2-first))
	natstest.Eventually(t, "the parent taken over by the other replica", func() bool {
		return slices.Contains(a.sourcesOf(t, parentID, events.TypeTurnStarted), other)
	})

	ans, err := a.c.Chat(ctxT(t), &gateway.ChatRequest{ID: "s1", Messages: answer(parentID, childID+".c1", "get_capital", true)})
	if err != nil {
		t.Fatal(err)
	}
	rest, done := readAll(t, ans, nil)
	if !done {
		t.Fatal("the answer's stream did not end")
	}
	if k := find(rest, "tool-output-available", "toolCallId", childID+".c1"); k < 0 || !strings.Contains(rest[k].field("output"), "Paris") {
		t.Errorf("the child's approved call has no output naming Paris: %v", types(rest))
	}
	if k := find(rest, "tool-output-available", "toolCallId", "call_1"); k < 0 || rest[k].field("output") != "Paris" {
		t.Errorf("the sub-agent call's output is not the child's answer Paris")
	}
	if got := textOf(rest, "text-"); got != "Paris, says the researcher." {
		t.Errorf("the parent's text after the approval = %q", got)
	}
	if last := rest[len(rest)-1]; last.Type != "finish" || last.field("finishReason") != "stop" {
		t.Errorf("the answer's stream ends with %s, want finish stop", last.Raw)
	}
	onceEach(t, "the answer's stream", rest)
	if srcs := a.sourcesOf(t, childID, events.TypeTurnResumed, events.TypeTurnCompleted); !slices.Equal(srcs, []string{other}) {
		t.Errorf("the child resumed and completed on %v, want the remaining replica %s", srcs, other)
	}
	if srcs := a.sourcesOf(t, parentID, events.TypeTurnStarted); len(srcs) != 2 {
		t.Errorf("the parent ran on %v, want both replicas", srcs)
	}

	// After a reload: the replay and the messages hold every part once.
	body, err := a.c.HTTPGet(ctxT(t), "/api/chat/s1/stream?turn="+parentID)
	if err != nil {
		t.Fatal(err)
	}
	replay := partsOf(t, body)
	onceEach(t, "the replay", replay)
	for _, want := range []struct{ typ, key, val string }{
		{"tool-approval-request", "toolCallId", childID + ".c1"},
		{"tool-output-available", "toolCallId", childID + ".c1"},
		{"tool-output-available", "toolCallId", "call_1"},
		{"text-start", "id", childID + ".text-1"},
	} {
		if find(replay, want.typ, want.key, want.val) < 0 {
			t.Errorf("the replay has no %s %s", want.typ, want.val)
		}
	}
	if got := textOf(replay, childID+".text-"); got != "Looking it up.Paris" {
		t.Errorf("the replay's child text = %q", got)
	}
	msgs, err = a.c.Messages(ctxT(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	m := msgs[len(msgs)-1]
	if m.Metadata == nil || m.Metadata.Status != "completed" {
		t.Errorf("messages: status %+v, want completed", m.Metadata)
	}
	calls := map[string]int{}
	var childText []string
	for _, p := range m.Parts {
		if p.ToolCallID != "" {
			calls[p.ToolCallID]++
		}
		if p.Type == "text" && strings.Contains(string(p.ProviderMetadata), childID) {
			childText = append(childText, p.Text)
		}
	}
	if calls["call_1"] != 1 || calls[childID+".c1"] != 1 || len(calls) != 2 {
		t.Errorf("messages: tool parts by call %v, want call_1 and %s.c1 once each", calls, childID)
	}
	if !slices.Equal(childText, []string{"Looking it up.", "Paris"}) {
		t.Errorf("messages: the child's text parts %q", childText)
	}
}

// Stop on a chat whose sub-agent waits for approval cancels the tree:
// the child turn is aborted, its approval request is withdrawn in the
// stream and the messages, and the parent ends aborted.
func TestSubAgentChatStopCancelsTheTree(t *testing.T) {
	a := startAgentTree(t)
	a.parent.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "researcher", Input: `{"prompt":"What is the capital of France?"}`}))
	a.child.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "get_capital", Input: `{"country":"France"}`}))
	s, err := a.c.Chat(ctxT(t), &gateway.ChatRequest{ID: "s2", Messages: []gateway.UIMessage{userMsg("capital of France?")}})
	if err != nil {
		t.Fatal(err)
	}
	live, _ := readAll(t, s, nil)
	parentID := live[0].field("messageId")
	childID := turn.ChildTurnID(parentID, "call_1")
	if find(live, "tool-approval-request", "toolCallId", childID+".c1") < 0 {
		t.Fatalf("no approval request of the child's call in %v", types(live))
	}
	if err := a.c.Stop(ctxT(t), "s2"); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the child and the parent aborted", func() bool {
		c, ok, err := turn.LoadState(ctxT(t), a.js, childID)
		p, pok, perr := turn.LoadState(ctxT(t), a.js, parentID)
		return err == nil && perr == nil && ok && pok && c.Status == turn.StatusAborted && p.Status == turn.StatusAborted
	})
	body, err := a.c.HTTPGet(ctxT(t), "/api/chat/s2/stream?turn="+parentID)
	if err != nil {
		t.Fatal(err)
	}
	replay := partsOf(t, body)
	onceEach(t, "the replay", replay)
	req := find(replay, "tool-approval-request", "toolCallId", childID+".c1")
	wd := find(replay, "tool-output-error", "toolCallId", childID+".c1")
	if req < 0 || wd < req || !strings.Contains(replay[wd].field("errorText"), "not run") {
		t.Errorf("want the child's approval request, then its withdrawal, in %v", types(replay))
	}
	if last := replay[len(replay)-1]; last.Type != "abort" && last.Type != "error" && last.Type != "finish" {
		t.Errorf("the replay ends with %s", last.Raw)
	}
	msgs, err := a.c.Messages(ctxT(t), "s2")
	if err != nil {
		t.Fatal(err)
	}
	m := msgs[len(msgs)-1]
	if m.Metadata == nil || m.Metadata.Status != "aborted" {
		t.Errorf("messages: status %+v, want aborted", m.Metadata)
	}
	for _, p := range m.Parts {
		if p.ToolCallID == childID+".c1" && p.State != "output-error" {
			t.Errorf("messages: the child's withdrawn call is %s", p.State)
		}
	}
	if st := sessionStatus(t, a.c, "s2"); st != "aborted" {
		t.Errorf("/api/sessions: s2 is %s, want aborted", st)
	}
}

// `turn submit --agent lead --follow` prints the child turn's lines
// indented under the call that runs it, from a real child turn.
func TestSubmitFollowIndentsARealChild(t *testing.T) {
	a := startAgentTree(t)
	a.parent.Add(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "researcher", Input: `{"prompt":"What is the capital of Spain?"}`}),
		llmtest.TextStep("Madrid, says the researcher."),
	)
	a.child.Add(llmtest.TextStep("Madrid"))
	out, errOut := &strings.Builder{}, &strings.Builder{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env := func(out, errOut *strings.Builder) cli.Env {
		return cli.Env{Getenv: func(k string) string {
			if k == "NATS_URL" {
				return a.st.URL
			}
			return ""
		}, Stdout: out, Stderr: errOut}
	}
	code := cli.Main(ctx, []string{"turn", "submit", "--agent", "lead", "--session", "sS", "--prompt", "capital of Spain?", "--id", "tS", "--follow"}, env(out, errOut))
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut.String(), out.String())
	}
	got := out.String()
	childID := turn.ChildTurnID("tS", "call_1")
	for _, want := range []string{
		"→ researcher",
		"↳ sub-agent researcher@",
		"(turn " + childID + "): started",
		"  │ Madrid\n",
		"Madrid, says the researcher.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("--follow printed no %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "  │ Madrid") > strings.Index(got, "Madrid, says the researcher.") {
		t.Errorf("the child's answer comes after its parent's:\n%s", got)
	}
	// tail --turn and tail --session, not following on, print the
	// tree's stored events the same way and stop.
	body := strings.TrimPrefix(got, "tS\n")
	for _, args := range [][]string{{"tail", "--turn", "tS", "--follow=false"}, {"tail", "--session", "sS", "--follow=false"}} {
		tout, terr := &strings.Builder{}, &strings.Builder{}
		if code := cli.Main(ctx, args, env(tout, terr)); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, terr.String())
		}
		printed := tout.String()
		if args[1] == "--session" {
			// A session's tail heads each turn with a line of its own.
			_, printed, _ = strings.Cut(printed, "\n")
		}
		if printed != body {
			t.Errorf("%v printed:\n%s\nwant what --follow printed:\n%s", args, tout.String(), body)
		}
	}
}
