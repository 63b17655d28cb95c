package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

// family is an env whose ingest serves "parent:" models with one
// stand-in provider and "child:" models with another, so that the
// scripts of a parent and of its children do not interleave.
type family struct {
	*env
	parent, child, leaf *llmtest.Scripted
}

func newFamily(t *testing.T) *family {
	e := newEnv(t)
	f := &family{env: e, parent: llmtest.NewScripted(), child: llmtest.NewScripted(), leaf: llmtest.NewScripted()}
	e.startIngest(map[string]ingest.Factory{"parent": ingest.Static(f.parent), "child": ingest.Static(f.child), "leaf": ingest.Static(f.leaf)})
	return f
}

// childEvents returns the llmw.tool.child events of a turn's events.
func childEvents(t *testing.T, evs []ev) []events.ToolChild {
	t.Helper()
	var out []events.ToolChild
	for _, e := range evs {
		if e.Type == events.TypeToolChild {
			out = append(out, decode[events.ToolChild](t, e))
		}
	}
	return out
}

func statuses(cs []events.ToolChild) string {
	var s []string
	for _, c := range cs {
		s = append(s, string(c.Status))
	}
	return strings.Join(s, ",")
}

// toolResult is the content of the parent's llmw.tool.result of call id.
func toolResult(t *testing.T, evs []ev, id string) events.ToolCallResult {
	t.Helper()
	for _, e := range evs {
		if e.Type == events.TypeToolResult {
			r := decode[events.ToolCallResult](t, e)
			if r.CallID == id {
				return r
			}
		}
	}
	t.Fatalf("no llmw.tool.result of %s:%s", id, describe(evs))
	return events.ToolCallResult{}
}

// A sub-agent of a definition is a tool of its turns' model; a call runs
// a child turn whose id derives from the parent's turn and call ids,
// whose llmw.turn.started names its parent, and whose answer is the
// call's result. The parent's stream names the child (llmw.tool.child
// started, then completed) before the call's result.
func TestSubAgentCallRunsAChildTurn(t *testing.T) {
	f := newFamily(t)
	f.parent.Add(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "researcher", Input: `{"prompt":"find the capital of France"}`}).WithUsage(100, 10),
		llmtest.TextStep("The researcher says Paris.").WithUsage(120, 5),
	)
	f.child.Add(llmtest.TextStep("Paris").WithUsage(50, 7))
	f.startTurn(turn.Config{})
	rev := putAgent(t, f.env, events.AgentDefinition{Name: "researcher", Description: "Looks things up.", Model: "child:m", System: "You research."})
	putAgent(t, f.env, events.AgentDefinition{Name: "lead", Model: "parent:m", Agents: []string{"researcher"}})

	id := newID("lead")
	childID := turn.ChildTurnID(id, "call_1")
	w := f.watch(id)
	cw := f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("capital of France?")}})
	c := w.completed()
	if got := c.Messages[len(c.Messages)-1].Text(); got != "The researcher says Paris." {
		t.Fatalf("parent's answer %q", got)
	}
	req := f.parent.Requests()[0]
	if len(req.Tools) != 1 || req.Tools[0].Name != "researcher" || req.Tools[0].Description != "Looks things up." ||
		!strings.Contains(string(req.Tools[0].InputSchema), `"prompt"`) {
		t.Fatalf("parent's model was offered %+v; want the sub-agent researcher with its description and a prompt input", req.Tools)
	}
	creq := f.child.Requests()
	if len(creq) != 1 || creq[0].System != "You research." || creq[0].Messages[0].Text() != "find the capital of France" {
		t.Fatalf("child's model requests %+v; want one with the sub-agent's system prompt and the call's prompt", creq)
	}
	evs := w.events()
	if r := toolResult(t, evs, "call_1"); r.IsError || r.Content != "Paris" {
		t.Fatalf("call result %+v; want the child's answer", r)
	}
	cs := childEvents(t, evs)
	if statuses(cs) != "started,completed" {
		t.Fatalf("llmw.tool.child statuses %s; want started,completed", statuses(cs))
	}
	want := events.ToolChild{CallID: "call_1", Name: "researcher", ChildTurnID: childID, ChildSessionID: "_", Agent: events.AgentRef("researcher", rev), Depth: 1}
	if got := cs[0]; got.CallID != want.CallID || got.Name != want.Name || got.ChildTurnID != want.ChildTurnID || got.ChildSessionID != want.ChildSessionID ||
		got.Agent != want.Agent || got.Depth != 1 {
		t.Fatalf("llmw.tool.child %+v; want %+v", got, want)
	}
	if find(evs, events.TypeToolChild) > find(evs, events.TypeToolResult) {
		t.Fatalf("llmw.tool.child after the call's result:%s", describe(evs))
	}
	// The parent's usage includes its child's, which the breakdown
	// names.
	if in, out := c.Usage.InputTokens, c.Usage.OutputTokens; in == nil || out == nil || *in != 270 || *out != 22 ||
		len(c.Children) != 1 || c.Children[0].CallID != "call_1" || c.Children[0].ChildTurnID != childID ||
		*c.Children[0].Usage.InputTokens != 50 || *c.Children[0].Usage.OutputTokens != 7 {
		t.Fatalf("parent's completed usage %s children %s; want 270 in, 22 out with call_1's child at 50 in, 7 out", mustJSON(t, c.Usage), mustJSON(t, c.Children))
	}
	var last events.UsageReport
	for _, e := range evs {
		if e.Type == events.TypeUsage {
			last = decode[events.UsageReport](t, e)
		}
	}
	if last.Step != 2 || *last.Total.InputTokens != 270 || len(last.Children) != 1 || *last.Usage.InputTokens != 120 {
		t.Fatalf("parent's last llmw.usage %s; want step 2 with a total of 270 input tokens, the child's included", mustJSON(t, last))
	}
	cevs := cw.waitType(events.TypeTurnCompleted)
	st := decode[events.TurnStarted](t, cevs[find(cevs, events.TypeTurnStarted)])
	if st.ParentTurnID != id || st.ParentCallID != "call_1" || st.RootTurnID != id || st.Depth != 1 {
		t.Fatalf("child's llmw.turn.started %+v; want parent %s call_1 root %s depth 1", st, id, id)
	}
	cst, ok, err := turn.LoadState(natstest.Context(t), f.js, childID)
	if err != nil || !ok || cst.Request.Agent != events.AgentRef("researcher", rev) || cst.Request.Parent == nil || cst.Request.Parent.TurnID != id {
		t.Fatalf("child's state %+v %v %v; want the sub-agent pinned and the parent named", cst, ok, err)
	}
}

// geoFamily is a family with get_capital on toolexec, paused for
// approval by every replica's hooks, and the agents researcher (which
// calls get_capital) and lead (which calls researcher).
func geoFamily(t *testing.T) (*family, uint64) {
	f := newFamily(t)
	var runs atomic.Int64
	f.startToolexec(toolexec.Config{}, capitalTool(&runs))
	rev := putAgent(t, f.env, events.AgentDefinition{Name: "researcher", Model: "child:m", System: "first system", Tools: []string{"get_capital"}})
	putAgent(t, f.env, events.AgentDefinition{Name: "lead", Model: "parent:m", Agents: []string{"researcher"}})
	return f, rev
}

// scriptResearch scripts one delegation of a geoFamily: lead calls
// researcher (call_1), then answers answer; researcher calls get_capital
// (c1) for France, then answers "Paris".
func (f *family) scriptResearch(answer string) {
	f.parent.Add(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "researcher", Input: `{"prompt":"capital of France?"}`}),
		llmtest.TextStep(answer),
	)
	f.child.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "get_capital", Input: `{"country":"France"}`}), llmtest.TextStep("Paris"))
}

// The parent's replica dies while its child waits for approval; the
// child is resumed and finishes before the parent's request comes back
// (AckWait): the replica that continues the parent takes the child's
// answer from its state and events, and starts no second child.
func TestParentReplicaDiesWhileItsChildRuns(t *testing.T) {
	f, _ := geoFamily(t)
	f.scriptResearch("Paris, says the researcher.")
	const ackWait = 5 * time.Second
	ncA := f.connect()
	a := f.startTurnOn(ncA, turn.Config{Instance: "a", AckWait: ackWait, Hooks: pauseChain(t)})
	id := newID("dies-parent")
	childID := turn.ChildTurnID(id, "call_1")
	w, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("capital of France?")}})
	cw.waitType(events.TypeTurnPaused)
	w.waitFor("llmw.tool.child paused", func(evs []ev) bool {
		for _, c := range childEvents(t, evs) {
			if c.Status == events.ChildPaused && len(c.Pending) == 1 && c.Pending[0].ID == "c1" {
				return true
			}
		}
		return false
	})
	ncA.Close() // the parent's replica is gone
	f.startTurn(turn.Config{Instance: "b", AckWait: ackWait, Hooks: pauseChain(t)})
	f.resume(events.ResumeRequest{TurnID: childID, Decisions: map[string]events.Decision{"c1": {Kind: events.DecisionApprove}}})
	cw.waitType(events.TypeTurnCompleted)
	if n := count(w.events(), events.TypeTurnStarted); n != 1 {
		t.Fatalf("the parent was continued (%d llmw.turn.started) before its child finished; the test needs the child to finish in the gap", n)
	}
	c := w.completed()
	if got := c.Messages[len(c.Messages)-1].Text(); got != "Paris, says the researcher." {
		t.Fatalf("parent's answer %q", got)
	}
	stored := f.stored(id)
	results := 0
	for _, e := range stored {
		if e.Type == events.TypeToolResult && decode[events.ToolCallResult](t, e).CallID == "call_1" {
			results++
			if r := decode[events.ToolCallResult](t, e); r.IsError || r.Content != "Paris" {
				t.Fatalf("call result %+v; want the child's answer", r)
			}
		}
	}
	if results != 1 {
		t.Fatalf("%d results of call_1 in the parent's events; want 1", results)
	}
	firstStarts := 0
	for _, e := range f.stored(childID) {
		if e.Type == events.TypeTurnStarted && !decode[events.TurnStarted](t, e).Resumed {
			firstStarts++
		}
	}
	if firstStarts != 1 || f.child.Calls() != 2 {
		t.Fatalf("child started %d times with %d model calls; want once, 2 calls", firstStarts, f.child.Calls())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx)
}

// A child paused for approval when its parent is cancelled is aborted
// with its own llmw.turn.aborted; the parent's stream says so
// (llmw.tool.child aborted) and the parent ends aborted; a resume sent
// to the child afterwards is rejected not_paused, status aborted.
func TestParentCancelAbortsItsPausedChild(t *testing.T) {
	f, _ := geoFamily(t)
	f.parent.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "researcher", Input: `{"prompt":"capital of France?"}`}))
	f.child.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "get_capital", Input: `{"country":"France"}`}))
	f.startTurn(turn.Config{Hooks: pauseChain(t)})
	id := newID("cancel-parent")
	childID := turn.ChildTurnID(id, "call_1")
	w, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("capital of France?")}})
	cw.waitType(events.TypeTurnPaused)
	w.waitFor("llmw.tool.child paused", func(evs []ev) bool { return strings.Contains(statuses(childEvents(t, evs)), "paused") })
	f.cancelTurn(id)
	cend := cw.waitFor("the child's abort", func(evs []ev) bool { return find(evs, events.TypeTurnAborted) >= 0 })
	if c := decode[events.TurnEnded](t, cend[find(cend, events.TypeTurnAborted)]); c.Code != turn.CodeCancelled {
		t.Fatalf("child aborted with %+v; want code cancelled", c)
	}
	end := w.waitEnd()
	if end.Type != events.TypeTurnAborted {
		t.Fatalf("parent ended with %s %s; want aborted", end.Type, end.Data)
	}
	if got := statuses(childEvents(t, w.events())); got != "started,paused,aborted" {
		t.Fatalf("llmw.tool.child statuses %s; want started,paused,aborted", got)
	}
	next := f.rejections(childID)
	f.resume(events.ResumeRequest{TurnID: childID, Decisions: map[string]events.Decision{"c1": {Kind: events.DecisionApprove}}})
	if rj := next(); rj.Code != events.RejectNotPaused || rj.Status != string(turn.StatusAborted) {
		t.Fatalf("late resume answered %+v; want not_paused, status aborted", rj)
	}
}

// A cancel of the root that overtakes its child's submit, and the
// child's cancel that overtakes the grandchild's: every turn of the
// three levels ends aborted and the grandchild's model is never asked.
func TestCancelOvertakesChildSubmitAcrossThreeLevels(t *testing.T) {
	f := newFamily(t)
	f.startTurn(turn.Config{})
	putAgent(t, f.env, events.AgentDefinition{Name: "leaf", Model: "leaf:m"})
	putAgent(t, f.env, events.AgentDefinition{Name: "mid", Model: "child:m", Agents: []string{"leaf"}})
	putAgent(t, f.env, events.AgentDefinition{Name: "top", Model: "parent:m", Agents: []string{"mid"}})
	f.parent.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "mid", Input: `{"prompt":"go deeper"}`}))
	f.child.SetFallback(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_2", Name: "leaf", Input: `{"prompt":"deepest"}`}))
	f.leaf.SetFallback(llmtest.TextStep("leaf answer"))
	id := newID("overtake")
	// The cancel of each parent is sent, and has cancelled its run,
	// before the child's submit goes out.
	turn.SetBeforeChildSubmit(t, func(ctx context.Context, parentID, childID string) {
		if parentID == id {
			f.cancelTurn(id)
		}
		select {
		case <-ctx.Done():
		case <-time.After(waitFor):
			t.Errorf("the cancel of %s did not reach its run", parentID)
		}
	})
	midID := turn.ChildTurnID(id, "call_1")
	leafID := turn.ChildTurnID(midID, "call_2")
	w, mw := f.watch(id), f.watch(midID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "top", Messages: []events.Message{events.UserText("go")}})
	if end := w.waitEnd(); end.Type != events.TypeTurnAborted {
		t.Fatalf("root ended with %s %s; want aborted", end.Type, end.Data)
	}
	if end := mw.waitEnd(); end.Type != events.TypeTurnAborted {
		t.Fatalf("child ended with %s %s; want aborted", end.Type, end.Data)
	}
	// The grandchild, if it was submitted, ends aborted too.
	natstest.Eventually(t, "no turn of the tree left running", func() bool {
		st, ok, err := turn.LoadState(natstest.Context(t), f.js, leafID)
		return err == nil && (!ok || st.Status == turn.StatusAborted || st.Status == turn.StatusCancelled)
	})
	if f.leaf.Calls() != 0 {
		t.Fatalf("the grandchild's model was asked %d times; want never", f.leaf.Calls())
	}
}

// Parallel children of one parent share the root's max_total_tokens:
// the calls that would pass it are not made, so the tree spends no more
// than the budget, and the parent gets error results, not a hang.
func TestParallelChildrenShareTheRootBudget(t *testing.T) {
	f := newFamily(t)
	f.startTurn(turn.Config{})
	putAgent(t, f.env, events.AgentDefinition{Name: "worker", Model: "child:m", MaxTokens: 20})
	putAgent(t, f.env, events.AgentDefinition{Name: "boss", Model: "parent:m", MaxTokens: 20, Agents: []string{"worker"}})
	f.parent.Add(llmtest.ToolStep(
		llmtest.ToolCallSpec{ID: "call_a", Name: "worker", Input: `{"prompt":"a"}`},
		llmtest.ToolCallSpec{ID: "call_b", Name: "worker", Input: `{"prompt":"b"}`},
		llmtest.ToolCallSpec{ID: "call_c", Name: "worker", Input: `{"prompt":"c"}`},
	).WithUsage(10, 10))
	f.parent.SetFallback(llmtest.TextStep("done").WithUsage(10, 10))
	f.child.SetFallback(llmtest.TextStep("work").WithUsage(10, 10))
	id := newID("budget-tree")
	w := f.watch(id)
	// 60 tokens: the parent's first call (20) and two children's (20
	// each, max_tokens 20 their estimate); not a third child, nor the
	// parent's next call.
	f.submit(events.TurnRequest{TurnID: id, Agent: "boss", MaxTotalTokens: 60, Messages: []events.Message{events.UserText("go")}})
	end := w.waitEnd()
	if end.Type != events.TypeTurnFailed || decode[events.TurnEnded](t, end).Code != "budget_exceeded" {
		t.Fatalf("parent ended with %s %s; want failed budget_exceeded (its next call would pass the budget)", end.Type, end.Data)
	}
	evs := w.events()
	failed := 0
	for _, id := range []string{"call_a", "call_b", "call_c"} {
		if r := toolResult(t, evs, id); r.IsError {
			failed++
			if !strings.Contains(r.Content, "budget_exceeded") {
				t.Errorf("error result %q does not name budget_exceeded", r.Content)
			}
		}
	}
	if spent := 20 * (f.parent.Calls() + f.child.Calls()); failed != 1 || spent > 60 {
		t.Fatalf("%d error results, %d tokens spent by %d+%d model calls; want 1 error and at most 60 tokens", failed, spent, f.parent.Calls(), f.child.Calls())
	}
}

// A turn paused for approval resumes with the sub-agents its pinned
// revision offered and their pinned revisions, after both definitions
// changed and the sub-agent was deleted.
func TestSubAgentsPinnedAcrossAParentPause(t *testing.T) {
	f, rev := geoFamily(t)
	putAgent(t, f.env, events.AgentDefinition{Name: "lead", Model: "parent:m", Tools: []string{"get_capital"}, Agents: []string{"researcher"}})
	f.parent.Add(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "get_capital", Input: `{"country":"France"}`}),
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_2", Name: "researcher", Input: `{"prompt":"check it"}`}),
		llmtest.TextStep("checked"),
	)
	f.child.Add(llmtest.TextStep("Paris indeed"))
	f.startTurn(turn.Config{Hooks: pauseChain(t)})
	id := newID("pinned-parent")
	w := f.watch(id)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("capital of France?")}})
	if end := w.waitEnd(); end.Type != events.TypeTurnPaused {
		t.Fatalf("ended with %s %s", end.Type, end.Data)
	}
	putAgent(t, f.env, events.AgentDefinition{Name: "researcher", Model: "child:m", System: "second system"})
	putAgent(t, f.env, events.AgentDefinition{Name: "lead", Model: "parent:m", Tools: []string{"get_capital"}})
	if err := agentsRegistry(f.env).Delete(natstest.Context(t), "researcher"); err != nil {
		t.Fatal(err)
	}
	f.resume(events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{"call_1": {Kind: events.DecisionApprove}}})
	w.waitFor("the end after the resume", func(evs []ev) bool {
		return find(evs, events.TypeTurnCompleted) >= 0 || find(evs, events.TypeTurnFailed) >= 0
	})
	if r := toolResult(t, w.events(), "call_2"); r.IsError || r.Content != "Paris indeed" {
		t.Fatalf("sub-agent call result %+v; want the child's answer", r)
	}
	creq := f.child.Requests()
	if len(creq) != 1 || creq[0].System != "first system" {
		t.Fatalf("child's model requests %+v; want one with the pinned revision's system prompt", creq)
	}
	st, _, _ := turn.LoadState(natstest.Context(t), f.js, turn.ChildTurnID(id, "call_2"))
	if st == nil || st.Request.Agent != events.AgentRef("researcher", rev) {
		t.Fatalf("child's state %+v; want researcher@%d", st, rev)
	}
}

// An agent that calls itself nests until Config.MaxDepth: the call that
// would go deeper gets an error result saying so, and no turn starts for
// it; a turn's sub-agent calls past Config.MaxChildren get one too.
func TestSubAgentLimits(t *testing.T) {
	f := newFamily(t)
	f.startTurn(turn.Config{MaxDepth: 2, MaxChildren: 1})
	putAgent(t, f.env, events.AgentDefinition{Name: "echo", Model: "parent:m"})
	if _, _, err := agentsRegistry(f.env).Put(natstest.Context(t), events.AgentDefinition{Name: "echo", Model: "parent:m", Agents: []string{"echo"}}, agentsPutOptions()); err != nil {
		t.Fatal(err)
	}
	// Each level calls itself, the deepest gets the error, then each
	// answers in turn.
	self := llmtest.ToolCallSpec{ID: "again", Name: "echo", Input: `{"prompt":"once more"}`}
	f.parent.Add(llmtest.ToolStep(self), llmtest.ToolStep(self), llmtest.ToolStep(self),
		llmtest.TextStep("depth 2"), llmtest.TextStep("depth 1"), llmtest.TextStep("depth 0"))
	id := newID("self")
	d1 := turn.ChildTurnID(id, "again")
	d2 := turn.ChildTurnID(d1, "again")
	w, w2 := f.watch(id), f.watch(d2)
	f.submit(events.TurnRequest{TurnID: id, Agent: "echo", Messages: []events.Message{events.UserText("go")}})
	if c := w.completed(); c.Messages[len(c.Messages)-1].Text() != "depth 0" {
		t.Fatalf("root answered %q", c.Messages[len(c.Messages)-1].Text())
	}
	r := toolResult(t, w2.waitType(events.TypeTurnCompleted), "again")
	if !r.IsError || !strings.Contains(r.Content, "depth 3") || !strings.Contains(r.Content, "2") {
		t.Fatalf("the deepest call's result %+v; want an error naming depth 3 and the limit 2", r)
	}
	if _, ok, _ := turn.LoadState(natstest.Context(t), f.js, turn.ChildTurnID(d2, "again")); ok {
		t.Fatal("a turn started past the depth limit")
	}

	// Two calls in one step with MaxChildren 1: the second is refused.
	f.parent.Add(llmtest.ToolStep(
		llmtest.ToolCallSpec{ID: "one", Name: "echo", Input: `{"prompt":"1"}`},
		llmtest.ToolCallSpec{ID: "two", Name: "echo", Input: `{"prompt":"2"}`}),
		llmtest.TextStep("child one"), llmtest.TextStep("both asked"))
	id2 := newID("many")
	w3 := f.watch(id2)
	f.submit(events.TurnRequest{TurnID: id2, Agent: "echo", Messages: []events.Message{events.UserText("go")}})
	w3.completed()
	evs := w3.events()
	if r := toolResult(t, evs, "one"); r.IsError {
		t.Fatalf("first call %+v; want the child's answer", r)
	}
	if r := toolResult(t, evs, "two"); !r.IsError || !strings.Contains(r.Content, "more than the 1") {
		t.Fatalf("second call %+v; want an error naming the limit", r)
	}
}

// The cancel of a parent whose replica died reaches its children at
// once, from the children its checkpoint lists: the paused child is
// aborted by whichever replica takes the cancel, without waiting for the
// parent's request to come back.
func TestCancelOfAParentWhoseReplicaDiedReachesItsChild(t *testing.T) {
	f, _ := geoFamily(t)
	f.parent.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "researcher", Input: `{"prompt":"capital of France?"}`}))
	f.child.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "get_capital", Input: `{"country":"France"}`}))
	// An AckWait far beyond the test: the parent's request does not come
	// back while it runs.
	ncA := f.connect()
	a := f.startTurnOn(ncA, turn.Config{Instance: "a", AckWait: time.Minute, Hooks: pauseChain(t)})
	id := newID("dead-parent")
	childID := turn.ChildTurnID(id, "call_1")
	cw := f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("capital of France?")}})
	cw.waitType(events.TypeTurnPaused)
	natstest.Eventually(t, "the parent's checkpoint to list its child", func() bool {
		st, ok, err := turn.LoadState(natstest.Context(t), f.js, id)
		return err == nil && ok && len(st.Children) == 1 && st.Children[0].TurnID == childID && st.Children[0].CallID == "call_1"
	})
	ncA.Close()
	f.startTurn(turn.Config{Instance: "b", AckWait: time.Minute, Hooks: pauseChain(t)})
	f.cancelTurn(id)
	cend := cw.waitFor("the child's abort", func(evs []ev) bool { return find(evs, events.TypeTurnAborted) >= 0 })
	if c := decode[events.TurnEnded](t, cend[find(cend, events.TypeTurnAborted)]); c.Code != turn.CodeCancelled {
		t.Fatalf("child aborted with %+v; want code cancelled", c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx)
}

// A sub-agent with on_parent_cancel "abandon" is not cancelled with its
// parent: the child runs on after the parent ended aborted.
func TestAbandonedChildOutlivesItsParent(t *testing.T) {
	f := newFamily(t)
	f.startTurn(turn.Config{})
	putAgent(t, f.env, events.AgentDefinition{Name: "slow", Model: "child:m", OnParentCancel: events.OnParentCancelAbandon})
	putAgent(t, f.env, events.AgentDefinition{Name: "lead", Model: "parent:m", Agents: []string{"slow"}})
	f.parent.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "slow", Input: `{"prompt":"take your time"}`}))
	f.child.Add(llmtest.BlockingStep("still working"))
	id := newID("abandon")
	childID := turn.ChildTurnID(id, "call_1")
	w, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("go")}})
	cw.waitType(events.TypeTurnStep)
	f.cancelTurn(id)
	if end := w.waitEnd(); end.Type != events.TypeTurnAborted {
		t.Fatalf("parent ended with %s %s; want aborted", end.Type, end.Data)
	}
	if st, _, _ := turn.LoadState(natstest.Context(t), f.js, childID); st == nil || st.Status != turn.StatusRunning {
		t.Fatalf("abandoned child's state %+v; want still running", st)
	}
	f.cancelTurn(childID) // the test's end
	cw.waitEnd()
}

// A child paused for approval shows on its parent's stream with the
// calls it waits for; a resume sent to the child's turn id continues it,
// which the parent's stream says (resumed), and the parent goes on with
// the child's answer.
func TestChildPausedForApprovalIsResumedByItsTurnID(t *testing.T) {
	f, _ := geoFamily(t)
	f.scriptResearch("Paris, approved.")
	f.startTurn(turn.Config{Hooks: pauseChain(t)})
	id := newID("child-approval")
	childID := turn.ChildTurnID(id, "call_1")
	w := f.watch(id)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("capital of France?")}})
	evs := w.waitFor("llmw.tool.child paused", func(evs []ev) bool { return strings.Contains(statuses(childEvents(t, evs)), "paused") })
	cs := childEvents(t, evs)
	if p := cs[len(cs)-1]; len(p.Pending) != 1 || p.Pending[0].ID != "c1" || p.Pending[0].Name != "get_capital" || p.ChildTurnID != childID {
		t.Fatalf("llmw.tool.child paused %+v; want the child's pending call c1 get_capital", p)
	}
	f.resume(events.ResumeRequest{TurnID: childID, Decisions: map[string]events.Decision{"c1": {Kind: events.DecisionApprove}}})
	c := w.completed()
	if got := c.Messages[len(c.Messages)-1].Text(); got != "Paris, approved." {
		t.Fatalf("parent's answer %q", got)
	}
	if got := statuses(childEvents(t, w.events())); got != "started,paused,resumed,completed" {
		t.Fatalf("llmw.tool.child statuses %s; want started,paused,resumed,completed", got)
	}
	if r := toolResult(t, w.events(), "call_1"); r.IsError || r.Content != "Paris" {
		t.Fatalf("call result %+v; want the child's answer", r)
	}
}

// A replica that stops while a parent waits for its child hands the
// parent off at once (Stop does not wait for the child); another
// replica continues the parent, which takes the child's answer once
// the child is resumed.
func TestStopHandsAWaitingParentOff(t *testing.T) {
	f, _ := geoFamily(t)
	f.scriptResearch("Paris, after the hand-off.")
	a := f.startTurn(turn.Config{Instance: "a", Hooks: pauseChain(t)})
	id := newID("stop-parent")
	childID := turn.ChildTurnID(id, "call_1")
	w, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("capital of France?")}})
	cw.waitType(events.TypeTurnPaused)
	f.startTurn(turn.Config{Instance: "b", Hooks: pauseChain(t)})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v; want the waiting parent handed off in the drain", err)
	}
	w.waitFor("the parent taken over", func(evs []ev) bool { return count(evs, events.TypeTurnStarted) == 2 })
	f.resume(events.ResumeRequest{TurnID: childID, Decisions: map[string]events.Decision{"c1": {Kind: events.DecisionApprove}}})
	c := w.completed()
	if got := c.Messages[len(c.Messages)-1].Text(); got != "Paris, after the hand-off." {
		t.Fatalf("parent's answer %q", got)
	}
	if r := toolResult(t, w.events(), "call_1"); r.IsError || r.Content != "Paris" {
		t.Fatalf("call result %+v; want the child's answer", r)
	}
}

// The parent's replica dies while its child waits for approval; the
// child is resumed, finishes, and its state expires (FinishedTTL)
// before the parent's request comes back: the replica that continues
// the parent takes the child's answer from the child's events, without
// a wait that would not end (the submit is a duplicate) and without
// starting the child again.
func TestParentTakesTheResultOfAnExpiredChild(t *testing.T) {
	f, _ := geoFamily(t)
	f.scriptResearch("Paris, from an expired child.")
	const ackWait = 8 * time.Second
	ncA := f.connect()
	a := f.startTurnOn(ncA, turn.Config{Instance: "a", AckWait: ackWait, Hooks: pauseChain(t)})
	id := newID("expired-child")
	childID := turn.ChildTurnID(id, "call_1")
	w, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("capital of France?")}})
	cw.waitType(events.TypeTurnPaused)
	w.waitFor("llmw.tool.child paused", func(evs []ev) bool { return strings.Contains(statuses(childEvents(t, evs)), "paused") })
	// The paused child's submit is acknowledged (only the parent's is
	// left in the work queue): redelivered after the child's state
	// expired, it would start the child again, as a new submit of the id.
	natstest.Eventually(t, "the child's submit acknowledged", func() bool {
		st, err := f.js.Stream(natstest.Context(t), events.StreamTurns)
		if err != nil {
			return false
		}
		info, err := st.Info(natstest.Context(t))
		return err == nil && info.State.Msgs == 1
	})
	ncA.Close() // the parent's replica is gone
	f.startTurn(turn.Config{Instance: "b", AckWait: ackWait, FinishedTTL: time.Second, Hooks: pauseChain(t)})
	f.resume(events.ResumeRequest{TurnID: childID, Decisions: map[string]events.Decision{"c1": {Kind: events.DecisionApprove}}})
	cw.waitType(events.TypeTurnCompleted)
	natstest.Eventually(t, "the child's state expired", func() bool {
		_, ok, err := turn.LoadState(natstest.Context(t), f.js, childID)
		return err == nil && !ok
	})
	if n := count(w.events(), events.TypeTurnStarted); n != 1 {
		t.Fatalf("the parent was continued (%d llmw.turn.started) before its child's state expired; the test needs it to expire in the gap", n)
	}
	c := w.completed()
	if got := c.Messages[len(c.Messages)-1].Text(); got != "Paris, from an expired child." {
		t.Fatalf("parent's answer %q", got)
	}
	if r := toolResult(t, w.events(), "call_1"); r.IsError || r.Content != "Paris" {
		t.Fatalf("call result %+v; want the expired child's answer", r)
	}
	if got := statuses(childEvents(t, w.events())); !strings.HasSuffix(got, ",completed") {
		t.Fatalf("llmw.tool.child statuses %s; want the child's end named", got)
	}
	if f.child.Calls() != 2 {
		t.Fatalf("the child's model was called %d times; want 2 (the child not started again)", f.child.Calls())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx)
}

// A child whose model call fails before it reports any usage leaves no
// reservation in the tree's ledger: the budget it had reserved is the
// tree's again, and a later sibling's call fits in it.
func TestFailedChildReleasesItsReservation(t *testing.T) {
	f := newFamily(t)
	f.startTurn(turn.Config{StepRetries: -1})
	putAgent(t, f.env, events.AgentDefinition{Name: "worker", Model: "child:m", MaxTokens: 20})
	putAgent(t, f.env, events.AgentDefinition{Name: "boss", Model: "parent:m", MaxTokens: 20, Agents: []string{"worker"}})
	f.parent.Add(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_a", Name: "worker", Input: `{"prompt":"a"}`}).WithUsage(10, 10),
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_b", Name: "worker", Input: `{"prompt":"b"}`}).WithUsage(10, 10),
	)
	f.child.Add(llmtest.FailStep(errors.New("the provider broke")), llmtest.TextStep("work").WithUsage(10, 10))
	id := newID("release")
	w := f.watch(id)
	// 60 tokens: the parent's two calls (20 each, max_tokens 20 their
	// estimate) and one child's; the failed child's reservation must
	// not count.
	f.submit(events.TurnRequest{TurnID: id, Agent: "boss", MaxTotalTokens: 60, Messages: []events.Message{events.UserText("go")}})
	w.waitEnd()
	evs := w.events()
	if r := toolResult(t, evs, "call_a"); !r.IsError {
		t.Fatalf("call_a's result %+v; want the failed child's error", r)
	}
	if r := toolResult(t, evs, "call_b"); r.IsError || r.Content != "work" {
		t.Fatalf("call_b's result %+v; want the second child's answer (the first child's reservation released)", r)
	}
	e, err := f.js.KeyValue(natstest.Context(t), events.BucketTurnState)
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.Get(natstest.Context(t), turn.TreeKey(id))
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Turns map[string]struct {
			ReservedTokens int64 `json:"reserved_tokens"`
		} `json:"turns"`
	}
	if err := json.Unmarshal(v.Value(), &l); err != nil {
		t.Fatal(err)
	}
	if a := l.Turns[turn.ChildTurnID(id, "call_a")]; a.ReservedTokens != 0 {
		t.Fatalf("the failed child still reserves %d tokens in the ledger %s", a.ReservedTokens, v.Value())
	}
}

// A child cancelled during its model call (its parent's cancel) leaves
// no reservation in the tree's ledger.
func TestCancelledChildReleasesItsReservation(t *testing.T) {
	f := newFamily(t)
	f.startTurn(turn.Config{})
	putAgent(t, f.env, events.AgentDefinition{Name: "worker", Model: "child:m", MaxTokens: 20})
	putAgent(t, f.env, events.AgentDefinition{Name: "boss", Model: "parent:m", MaxTokens: 20, Agents: []string{"worker"}})
	f.parent.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_a", Name: "worker", Input: `{"prompt":"a"}`}).WithUsage(10, 10))
	f.child.Add(llmtest.BlockingStep("work"))
	id := newID("release-cancel")
	childID := turn.ChildTurnID(id, "call_a")
	w, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "boss", MaxTotalTokens: 100, Messages: []events.Message{events.UserText("go")}})
	cw.waitType(events.TypeBlockDelta)
	kv, err := f.js.KeyValue(natstest.Context(t), events.BucketTurnState)
	if err != nil {
		t.Fatal(err)
	}
	reserved := func() int64 {
		v, err := kv.Get(natstest.Context(t), turn.TreeKey(id))
		if err != nil {
			t.Fatal(err)
		}
		var l struct {
			Turns map[string]struct {
				ReservedTokens int64 `json:"reserved_tokens"`
			} `json:"turns"`
		}
		if err := json.Unmarshal(v.Value(), &l); err != nil {
			t.Fatal(err)
		}
		return l.Turns[childID].ReservedTokens
	}
	if r := reserved(); r <= 0 {
		t.Fatalf("the child's running call reserves %d tokens; want its estimate", r)
	}
	f.cancelTurn(id)
	cw.waitEnd()
	w.waitEnd()
	if r := reserved(); r != 0 {
		t.Fatalf("the cancelled child still reserves %d tokens", r)
	}
}

// A child's submit that no stream answers for longer than RetryTimeout
// (LLMW_TURNS without a leader; here without the submit subject) does
// not answer the call with that error: the parent is handed off, and
// the replica that continues it submits the child, whose answer is the
// call's result.
func TestChildSubmitNotStoredHandsTheParentOff(t *testing.T) {
	f := newFamily(t)
	f.parent.Add(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "researcher", Input: `{"prompt":"capital of France?"}`}),
		llmtest.TextStep("Paris, after all."),
	)
	f.child.Add(llmtest.TextStep("Paris"))
	f.startTurn(turn.Config{AckWait: 2 * time.Second, RetryTimeout: 300 * time.Millisecond})
	putAgent(t, f.env, events.AgentDefinition{Name: "researcher", Model: "child:m"})
	putAgent(t, f.env, events.AgentDefinition{Name: "lead", Model: "parent:m", Agents: []string{"researcher"}})
	var refused atomic.Bool
	restored := make(chan struct{})
	turn.SetBeforeChildSubmit(t, func(ctx context.Context, parentID, childID string) {
		if !refused.CompareAndSwap(false, true) {
			return
		}
		// No stream takes the submit subject: a publish has no
		// responders, as while the stream has no leader.
		restore := updateStream(t, f.env, events.StreamTurns, func(c *jetstream.StreamConfig) {
			c.Subjects = slices.DeleteFunc(c.Subjects, func(s string) bool { return strings.HasSuffix(s, ".turn.submit") })
		})
		go func() {
			defer close(restored)
			time.Sleep(time.Second) // past the submit's retries
			restore()
		}()
	})
	id := newID("submit-refused")
	w := f.watch(id)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("capital of France?")}})
	c := w.completed()
	<-restored
	if got := c.Messages[len(c.Messages)-1].Text(); got != "Paris, after all." {
		t.Fatalf("parent's answer %q", got)
	}
	if r := toolResult(t, w.events(), "call_1"); r.IsError || r.Content != "Paris" {
		t.Fatalf("call result %+v; want the child's answer, not the submit's error", r)
	}
	if n := count(w.events(), events.TypeTurnStarted); n < 2 {
		t.Fatalf("%d llmw.turn.started of the parent; want it handed off and continued", n)
	}
	if f.child.Calls() != 1 {
		t.Fatalf("the child's model was called %d times; want once", f.child.Calls())
	}
}

// refuseWrites makes stream refuse every message (a tiny MaxMsgSize)
// until the returned func restores it.
func refuseWrites(t *testing.T, e *env, stream string) func() {
	t.Helper()
	return updateStream(t, e, stream, func(c *jetstream.StreamConfig) { c.MaxMsgSize = 16 })
}

// updateStream changes stream's config with f until the returned func
// restores it.
func updateStream(t *testing.T, e *env, stream string, f func(*jetstream.StreamConfig)) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	was := s.CachedInfo().Config
	cfg := was
	cfg.Subjects = slices.Clone(was.Subjects)
	f(&cfg)
	if _, err := e.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := e.js.UpdateStream(ctx, was); err != nil {
			t.Error(err)
		}
	}
}

// A child's submit that LLMW_TURNS refuses (too large) is the call's
// error result: the parent goes on, not handed off again and again.
func TestChildSubmitRefusedIsTheCallsError(t *testing.T) {
	f := newFamily(t)
	f.parent.Add(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "researcher", Input: `{"prompt":"capital of France?"}`}),
		llmtest.TextStep("No researcher today."),
	)
	f.startTurn(turn.Config{RetryTimeout: 300 * time.Millisecond})
	putAgent(t, f.env, events.AgentDefinition{Name: "researcher", Model: "child:m"})
	putAgent(t, f.env, events.AgentDefinition{Name: "lead", Model: "parent:m", Agents: []string{"researcher"}})
	turn.SetBeforeChildSubmit(t, func(ctx context.Context, parentID, childID string) {
		t.Cleanup(refuseWrites(t, f.env, events.StreamTurns))
	})
	id := newID("submit-too-large")
	w := f.watch(id)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("capital of France?")}})
	c := w.completed()
	if got := c.Messages[len(c.Messages)-1].Text(); got != "No researcher today." {
		t.Fatalf("parent's answer %q", got)
	}
	if r := toolResult(t, w.events(), "call_1"); !r.IsError || !strings.Contains(r.Content, "could not be submitted") {
		t.Fatalf("call result %+v; want the submit's error", r)
	}
	if n := count(w.events(), events.TypeTurnStarted); n != 1 {
		t.Fatalf("%d llmw.turn.started of the parent; want 1 (not handed off)", n)
	}
}

// A pinned sub-agent whose definition cannot be read for want of NATS
// (longer than RetryTimeout) is not offered with the default input:
// the run is handed off, and the replica that continues the turn reads
// it and offers it with its input_schema.
func TestUnreadableSubAgentHandsTheRunOff(t *testing.T) {
	f := newFamily(t)
	f.parent.Add(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "capital", Input: `{"country":"France"}`}),
		llmtest.TextStep("Paris it is."),
	)
	f.child.Add(llmtest.TextStep("Paris"))
	f.startTurn(turn.Config{AckWait: 2 * time.Second, RetryTimeout: 200 * time.Millisecond})
	putAgent(t, f.env, events.AgentDefinition{Name: "capital", Model: "child:m",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"country":{"type":"string"}},"required":["country"]}`)})
	putAgent(t, f.env, events.AgentDefinition{Name: "lead", Model: "parent:m", Agents: []string{"capital"}})
	until := time.Now().Add(time.Second)
	turn.SetBeforeResolvePinned(t, func(string) error {
		if time.Now().Before(until) {
			return context.DeadlineExceeded
		}
		return nil
	})
	id := newID("unreadable-agent")
	w := f.watch(id)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("capital of France?")}})
	c := w.completed()
	if got := c.Messages[len(c.Messages)-1].Text(); got != "Paris it is." {
		t.Fatalf("parent's answer %q", got)
	}
	if r := toolResult(t, w.events(), "call_1"); r.IsError || r.Content != "Paris" {
		t.Fatalf("call result %+v; want the child's answer", r)
	}
	req := f.parent.Requests()[0]
	if len(req.Tools) != 1 || !strings.Contains(string(req.Tools[0].InputSchema), `"country"`) {
		t.Fatalf("the parent's model was offered %+v; want the sub-agent with its input_schema", req.Tools)
	}
}

// The watch of a child's state loses its consumer (gone with the node
// that held it) while the child waits for approval; the child is
// resumed and completes. The parent takes the child's answer from a
// read of its state, sooner than nats.go notices the lost consumer
// (two missed heartbeats, ten seconds and more) and makes another.
func TestParentTakesItsChildsEndWhenItsWatchIsLost(t *testing.T) {
	f, _ := geoFamily(t)
	f.parent.Add(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "researcher", Input: `{"prompt":"capital of France?"}`}),
		llmtest.TextStep("Paris, approved."),
	)
	f.child.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "get_capital", Input: `{"country":"France"}`}), llmtest.TextStep("Paris"))
	f.startTurn(turn.Config{Hooks: pauseChain(t)})
	id := newID("lost-watch")
	childID := turn.ChildTurnID(id, "call_1")
	w, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("capital of France?")}})
	w.waitFor("llmw.tool.child paused", func(evs []ev) bool { return strings.Contains(statuses(childEvents(t, evs)), "paused") })

	ctx := natstest.Context(t)
	str, err := f.js.Stream(ctx, "KV_"+events.BucketTurnState)
	if err != nil {
		t.Fatal(err)
	}
	watched := "$KV." + events.BucketTurnState + "." + childID
	deleted := 0
	for ci := range str.ListConsumers(ctx).Info() {
		if ci.Config.FilterSubject == watched || slices.Contains(ci.Config.FilterSubjects, watched) {
			if err := str.DeleteConsumer(ctx, ci.Name); err != nil {
				t.Fatal(err)
			}
			deleted++
		}
	}
	if deleted != 1 {
		t.Fatalf("%d consumers on the child's state key; want the parent's watch alone", deleted)
	}

	f.resume(events.ResumeRequest{TurnID: childID, Decisions: map[string]events.Decision{"c1": {Kind: events.DecisionApprove}}})
	cw.waitType(events.TypeTurnCompleted)
	natstest.EventuallyWithin(t, 6*time.Second, "the parent's end after its child's", func() bool {
		return find(w.events(), events.TypeTurnCompleted) >= 0
	})
	c := w.completed()
	if got := c.Messages[len(c.Messages)-1].Text(); got != "Paris, approved." {
		t.Fatalf("parent's answer %q", got)
	}
	if r := toolResult(t, w.events(), "call_1"); r.IsError || r.Content != "Paris" {
		t.Fatalf("call result %+v; want the child's answer", r)
	}
	if got := statuses(childEvents(t, w.events())); got != "started,paused,resumed,completed" && got != "started,paused,completed" {
		t.Fatalf("llmw.tool.child statuses %s; want started, paused, (resumed,) completed", got)
	}
}

// nats.go closes a watch whose consumer it cannot make again (its node
// gone, an error it does not retry). The first watch of the child's
// state closes under the parent while the child waits for approval;
// the parent watches again and takes the child's answer once the child
// is resumed.
func TestParentWatchesItsChildAgainWhenTheWatchCloses(t *testing.T) {
	f, _ := geoFamily(t)
	f.parent.Add(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "researcher", Input: `{"prompt":"capital of France?"}`}),
		llmtest.TextStep("Paris, approved."),
	)
	f.child.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "get_capital", Input: `{"country":"France"}`}), llmtest.TextStep("Paris"))
	var watches atomic.Int64
	turn.SetAfterChildWatch(t, func(_ string, w jetstream.KeyWatcher) {
		if watches.Add(1) == 1 {
			_ = w.Stop() // what nats.go does when it gives the consumer up
		}
	})
	f.startTurn(turn.Config{Hooks: pauseChain(t)})
	id := newID("closed-watch")
	childID := turn.ChildTurnID(id, "call_1")
	w, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("capital of France?")}})
	cw.waitType(events.TypeTurnPaused)
	f.resume(events.ResumeRequest{TurnID: childID, Decisions: map[string]events.Decision{"c1": {Kind: events.DecisionApprove}}})
	c := w.completed()
	if got := c.Messages[len(c.Messages)-1].Text(); got != "Paris, approved." {
		t.Fatalf("parent's answer %q", got)
	}
	if r := toolResult(t, w.events(), "call_1"); r.IsError || r.Content != "Paris" {
		t.Fatalf("call result %+v; want the child's answer", r)
	}
	if n := watches.Load(); n < 2 {
		t.Fatalf("%d watches of the child's state; want the closed one and another", n)
	}
}
