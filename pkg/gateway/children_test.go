package gateway_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// These tests store the events of a parent turn and of its sub-agents'
// child turns themselves, shaped as docs/protocol.md ("Tool child") says
// a turn service stores them, on the real subjects of an embedded NATS
// server, and read them through the gateway.

// tree publishes worker events as the turn service does: on
// P.emit.<session>.<turn>.<channel>, seq counting per turn.
type tree struct {
	t    *testing.T
	srv  *natstest.Server
	subj events.Subjects
	seq  map[string]uint64
	c    *gateway.Client
}

func newTree(t *testing.T) *tree {
	t.Helper()
	srv := natstest.Start(t, natstest.Options{Provision: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := gateway.New(ctx, srv.NC, gateway.Config{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(g)
	t.Cleanup(func() {
		g.Close()
		hs.CloseClientConnections()
		hs.Close()
	})
	return &tree{t: t, srv: srv, subj: events.NewSubjects(""), seq: map[string]uint64{}, c: &gateway.Client{URL: hs.URL}}
}

// emit stores the events of turn (of session; "" for none) in order.
func (tr *tree) emit(session, turn string, evs ...events.WorkerEvent) {
	tr.t.Helper()
	for _, ev := range evs {
		data, err := events.MarshalData(ev)
		if err != nil {
			tr.t.Fatal(err)
		}
		tr.seq[turn]++
		env := &events.Envelope{Source: "/llmw/test/1", Type: ev.WorkerType(), TurnID: turn, SessionID: session, Seq: tr.seq[turn], Data: data}
		if _, err := tr.srv.JS.PublishMsg(ctxT(tr.t), cenats.NewMsg(tr.subj.Emit(session, turn, ev.Channel()), env)); err != nil {
			tr.t.Fatal(err)
		}
	}
}

func started(turn, session string, parent, call, root string, depth int) events.TurnStarted {
	return events.TurnStarted{TurnID: turn, SessionID: session, Model: "m:x", ParentTurnID: parent, ParentCallID: call, RootTurnID: root, Depth: depth}
}

func textBlock(step, index int, deltas ...string) []events.WorkerEvent {
	evs := []events.WorkerEvent{events.WorkerBlockStart{BlockStart: events.BlockStart{Index: index, BlockType: events.BlockText}, Step: step}}
	for _, d := range deltas {
		evs = append(evs, events.WorkerBlockDelta{BlockDelta: events.TextDelta(index, d), Step: step})
	}
	return append(evs, events.WorkerBlockStop{BlockStop: events.BlockStop{Index: index, BlockType: events.BlockText}, Step: step})
}

// call is a tool call of step 1: its block, its complete input and its
// start.
func call(index int, id, name, input string) []events.WorkerEvent {
	return []events.WorkerEvent{
		events.WorkerBlockStart{BlockStart: events.BlockStart{Index: index, BlockType: events.BlockToolUse, ID: id, Name: name}, Step: 1},
		events.WorkerBlockDelta{BlockDelta: events.BlockDelta{Index: index, Kind: events.DeltaInputJSON, Content: input}, Step: 1},
		events.WorkerBlockStop{BlockStop: events.BlockStop{Index: index, BlockType: events.BlockToolUse}, Step: 1},
		events.ToolCallComplete{Step: 1, ID: id, Name: name, Input: json.RawMessage(input)},
	}
}

func child(callID, name, childTurn string, depth int, status events.ChildStatus) events.ToolChild {
	return events.ToolChild{CallID: callID, Name: name, ChildTurnID: childTurn, ChildSessionID: events.NoSession, Agent: name + "@3", Depth: depth, Status: status}
}

// subAgentCall is the parent's call of a sub-agent up to its child's
// start.
func subAgentCall(index int, callID, name, childTurn string, depth int) []events.WorkerEvent {
	return append(call(index, callID, name, `{"prompt":"look it up"}`),
		events.ToolStarted{CallID: callID, Name: name},
		child(callID, name, childTurn, depth, events.ChildStarted))
}

// owner is a part's providerMetadata.llmw.
func owner(p part) gateway.ChildOwner {
	var m struct {
		PM struct {
			L gateway.ChildOwner `json:"llmw"`
		} `json:"providerMetadata"`
	}
	_ = json.Unmarshal(p.Raw, &m)
	return m.PM.L
}

// textOf joins the text deltas of the parts whose id starts with prefix
// and has no further "." (that turn's own text).
func textOf(ps []part, prefix string) string {
	var b strings.Builder
	for _, p := range ps {
		id := p.field("id")
		if p.Type == "text-delta" && strings.HasPrefix(id, prefix) && !strings.Contains(strings.TrimPrefix(id, prefix), ".") {
			b.WriteString(p.field("delta"))
		}
	}
	return b.String()
}

func find(ps []part, typ, key, val string) int {
	return slices.IndexFunc(ps, func(p part) bool { return p.Type == typ && p.field(key) == val })
}

func count(ps []part, typ string) int {
	n := 0
	for _, p := range ps {
		if p.Type == typ {
			n++
		}
	}
	return n
}

// A sub-agent's child turn shows in its parent's stream, live: its text
// and its tool call with the child's ids and owner, its status as the
// parent names it, none of its step or end parts; a replay of the turn
// and the session's messages give the same.
func TestChildTurnLiveReplayAndMessages(t *testing.T) {
	tr := newTree(t)
	tr.emit("s1", "tR", started("tR", "s1", "", "", "", 0), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("s1", "tR", textBlock(1, 0, "Asking ", "the researcher.")...)

	s, err := tr.c.Resume(ctxT(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	live, _ := readAll(t, s, func(ps []part) bool { return textOf(ps, "text-") == "Asking the researcher." })

	tr.emit("s1", "tR", subAgentCall(1, "c1", "researcher", "tC", 1)...)
	live2, _ := readAll(t, s, func(ps []part) bool { return find(ps, "data-llmw-child", "id", "child-c1") >= 0 })
	live = append(live, live2...)

	// The child runs from here: its parts come live, after its parent named it.
	tr.emit("", "tC", started("tC", "", "tR", "c1", "tR", 1), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("", "tC", textBlock(1, 0, "Searching", " now.")...)
	tr.emit("", "tC", call(1, "c9", "search", `{"q":"nats"}`)...)
	tr.emit("", "tC", events.ToolStarted{CallID: "c9", Name: "search"},
		events.ToolCallResult{CallID: "c9", Name: "search", Content: `{"hits":3}`},
		events.TurnStep{Step: 2, Model: "m:x"})
	tr.emit("", "tC", textBlock(2, 0, "Three hits.")...)
	tr.emit("", "tC", events.UsageReport{Step: 2}, events.TurnCompleted{StopReason: events.StopEndTurn})
	tr.emit("s1", "tR", child("c1", "researcher", "tC", 1, events.ChildCompleted),
		events.ToolCallResult{CallID: "c1", Name: "researcher", Content: "Three hits."},
		events.TurnStep{Step: 2, Model: "m:x"})
	tr.emit("s1", "tR", textBlock(2, 0, "Done.")...)
	tr.emit("s1", "tR", events.TurnCompleted{StopReason: events.StopEndTurn})
	rest, done := readAll(t, s, nil)
	if !done {
		t.Fatal("the stream did not end with the turn")
	}
	live = append(live, rest...)

	if got := textOf(live, "tC.text-"); got != "Searching now.Three hits." {
		t.Errorf("the child's text = %q, want the deltas it stored", got)
	}
	if got := textOf(live, "text-"); got != "Asking the researcher.Done." {
		t.Errorf("the parent's text = %q", got)
	}
	i := find(live, "text-start", "id", "tC.text-1")
	if i < 0 {
		t.Fatalf("no text-start tC.text-1 in %v", types(live))
	}
	if o := owner(live[i]); o != (gateway.ChildOwner{TurnID: "tC", ToolCallID: "c1", Depth: 1}) {
		t.Errorf("the child's text part names %+v, want turn tC under call c1 at depth 1", o)
	}
	j := find(live, "tool-input-available", "toolCallId", "tC.c9")
	if j < 0 || owner(live[j]).TurnID != "tC" || live[j].field("toolName") != "search" {
		t.Fatalf("the child's call: no tool-input-available tC.c9 (search) owned by tC in %v", types(live))
	}
	if k := find(live, "tool-output-available", "toolCallId", "tC.c9"); k < 0 || live[k].field("output") != `{"hits":3}` {
		t.Errorf("the child's call has no output {\"hits\":3}")
	}
	if find(live, "data-llmw-tool-started", "id", "started-tC.c9") < 0 || find(live, "data-llmw-usage", "id", "tC.usage") < 0 {
		t.Errorf("the child's tool start or usage is missing (ids started-tC.c9, tC.usage)")
	}
	// The child's steps and end are not the parent's.
	if n := count(live, "start-step"); n != 2 {
		t.Errorf("%d start-step parts, want the parent's 2", n)
	}
	if n := count(live, "finish"); n != 1 {
		t.Errorf("%d finish parts, want the parent's 1", n)
	}
	var statuses []string
	for _, p := range live {
		if p.Type == "data-llmw-child" {
			var d events.ToolChild
			_ = json.Unmarshal([]byte(p.field("data")), &d)
			statuses = append(statuses, string(d.Status))
			if p.field("id") != "child-c1" || d.ChildTurnID != "tC" {
				t.Errorf("data-llmw-child %s: want id child-c1 naming tC", p.Raw)
			}
		}
	}
	if !slices.Equal(statuses, []string{"started", "completed"}) {
		t.Errorf("the child's statuses = %v", statuses)
	}
	if k := find(live, "tool-output-available", "toolCallId", "c1"); k < 0 || live[k].field("output") != "Three hits." {
		t.Errorf("the sub-agent call's output is not the child's answer")
	}

	// A replay gives the same parts, each once.
	r, err := tr.c.HTTPGet(ctxT(t), "/api/chat/s1/stream?turn=tR")
	if err != nil {
		t.Fatal(err)
	}
	var replayed []string
	for _, l := range strings.Split(r, "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok && d != "[DONE]" {
			replayed = append(replayed, d)
		}
	}
	var lived []string
	for _, p := range live {
		lived = append(lived, string(p.Raw))
	}
	if !slices.Equal(replayed, lived) {
		t.Errorf("replay differs from the live stream:\nlive   %v\nreplay %v", lived, replayed)
	}

	msgs, err := tr.c.Messages(ctxT(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	a := msgs[len(msgs)-1]
	var texts []string
	var tool *gateway.UIPart
	for i, p := range a.Parts {
		if p.Type == "text" && strings.Contains(string(p.ProviderMetadata), `"turnId":"tC"`) {
			texts = append(texts, p.Text)
		}
		if p.ToolCallID == "tC.c9" {
			tool = &a.Parts[i]
		}
	}
	if !slices.Equal(texts, []string{"Searching now.", "Three hits."}) {
		t.Errorf("messages: the child's text parts = %q", texts)
	}
	if tool == nil || tool.Type != "tool-search" || tool.State != "output-available" || !strings.Contains(string(tool.CallProviderMetadata), `"toolCallId":"c1"`) {
		t.Errorf("messages: the child's call = %+v", tool)
	}
}

// resumeOf reads the resume request the gateway stored for turn.
func resumeOf(t *testing.T, tr *tree, turn string) events.ResumeRequest {
	t.Helper()
	cons, err := tr.srv.JS.CreateOrUpdateConsumer(ctxT(t), events.StreamTurns, jetstream.ConsumerConfig{
		Durable: "test-resumes", FilterSubject: tr.subj.TurnResume(), AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("no resume of %s stored: %v", turn, err)
		}
		env, err := events.DecodeEnvelope(m.Headers(), m.Data())
		if err != nil {
			t.Fatal(err)
		}
		var rq events.ResumeRequest
		if err := json.Unmarshal(env.Data, &rq); err != nil {
			t.Fatal(err)
		}
		_ = m.Ack()
		if rq.TurnID == turn {
			return rq
		}
	}
}

// approval is the assistant message a client sends back with its answer
// to the approval request of toolCallID.
func approval(toolCallID, name string, approved bool, input string) []gateway.UIMessage {
	p := gateway.UIPart{Type: "tool-" + name, ToolCallID: toolCallID, State: "approval-responded",
		Approval: &gateway.UIApproval{ID: gateway.ApprovalID(toolCallID), Approved: &approved}}
	if input != "" {
		p.Input = json.RawMessage(input)
	}
	return []gateway.UIMessage{userMsg("go"), {ID: "tR", Role: "assistant", Parts: []gateway.UIPart{p}}}
}

// A child paused by a hook pauses its parent's stream: its calls are
// approval requests of the parent's message, and the answer resumes the
// child's turn, not the parent's; the next stream goes on from there.
func TestChildApprovalResumesTheChild(t *testing.T) {
	tr := newTree(t)
	tr.emit("s2", "tR", started("tR", "s2", "", "", "", 0), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("s2", "tR", subAgentCall(0, "c1", "cleaner", "tC", 1)...)
	tr.emit("", "tC", started("tC", "", "tR", "c1", "tR", 1), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("", "tC", call(0, "c7", "delete", `{"path":"/tmp/a"}`)...)
	pending := []events.ToolCall{{ID: "c7", Name: "delete", Input: json.RawMessage(`{"path":"/tmp/a"}`)}}
	tr.emit("", "tC", events.TurnPaused{Reason: "needs a person", Hook: "approve-it", Pending: pending})
	paused := child("c1", "cleaner", "tC", 1, events.ChildPaused)
	paused.Pending = pending
	tr.emit("s2", "tR", paused)

	s, err := tr.c.Resume(ctxT(t), "s2")
	if err != nil {
		t.Fatal(err)
	}
	ps, done := readAll(t, s, nil)
	if !done {
		t.Fatal("the stream did not end while the child waits for a person")
	}
	i := find(ps, "tool-approval-request", "toolCallId", "tC.c7")
	if i < 0 || ps[i].field("approvalId") != "approval-tC.c7" {
		t.Fatalf("no approval request for the child's call tC.c7 in %v", types(ps))
	}
	if last := ps[len(ps)-1]; last.Type != "finish" || last.field("finishReason") != "" {
		t.Errorf("the stream ends with %s, want finish without a reason (a pause)", last.Raw)
	}

	// Approved with another input: an edit of the child's call.
	ans, err := tr.c.Chat(ctxT(t), &gateway.ChatRequest{ID: "s2", Messages: approval("tC.c7", "delete", true, `{"path":"/tmp/b"}`)})
	if err != nil {
		t.Fatal(err)
	}
	rq := resumeOf(t, tr, "tC")
	d, ok := rq.Decisions["c7"]
	if !ok || d.Kind != events.DecisionEdit || string(d.Input) != `{"path":"/tmp/b"}` || len(rq.Decisions) != 1 {
		t.Fatalf("the child's resume = %+v, want c7 edited to /tmp/b", rq)
	}
	tr.emit("", "tC", events.TurnResumed{Decisions: rq.Decisions}, events.ToolStarted{CallID: "c7", Name: "delete"},
		events.ToolCallResult{CallID: "c7", Name: "delete", Content: "deleted"})
	next, _ := readAll(t, ans, func(ps []part) bool { return find(ps, "tool-output-available", "toolCallId", "tC.c7") >= 0 })
	if next[0].Type != "start" || next[0].field("messageId") != "tR" {
		t.Fatalf("the answer's stream starts with %s", next[0].Raw)
	}
	// Nothing the first stream had is written again.
	if find(next, "tool-input-available", "toolCallId", "tC.c7") >= 0 || find(next, "tool-approval-request", "toolCallId", "tC.c7") >= 0 {
		t.Errorf("the answer's stream repeats parts: %v", types(next))
	}
	ans.Close()
}

// Approval answers name the child turn: one of another turn's tree is
// refused, and a deny of a child's call is a deny.
func TestChildApprovalChecks(t *testing.T) {
	tr := newTree(t)
	tr.emit("s3", "tR", started("tR", "s3", "", "", "", 0), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("s3", "tR", subAgentCall(0, "c1", "cleaner", "tC", 1)...)
	pending := []events.ToolCall{{ID: "c7", Name: "delete", Input: json.RawMessage(`{}`)}}
	// tX is paused, but a child of another session's turn.
	tr.emit("", "tX", started("tX", "", "tOther", "c1", "tOther", 1), events.TurnPaused{Reason: "r", Pending: pending})
	tr.emit("", "tC", started("tC", "", "tR", "c1", "tR", 1), events.TurnPaused{Reason: "r", Pending: pending})

	_, err := tr.c.Chat(ctxT(t), &gateway.ChatRequest{ID: "s3", Messages: approval("tX.c7", "delete", true, "")})
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("an answer for another tree's turn: %v, want 403", err)
	}
	s, err := tr.c.Chat(ctxT(t), &gateway.ChatRequest{ID: "s3", Messages: approval("tC.c7", "delete", false, "")})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if rq := resumeOf(t, tr, "tC"); rq.Decisions["c7"].Kind != events.DecisionDeny {
		t.Errorf("the child's resume = %+v, want c7 denied", rq)
	}
}

// A cancel of the parent aborts the paused child: its approval request
// is withdrawn in the parent's stream, whichever end comes first.
func TestChildApprovalWithdrawnOnAbort(t *testing.T) {
	for _, tc := range []struct {
		name string
		// childEvent: the child stores its own llmw.turn.aborted;
		// parentEvent: the parent its llmw.tool.child aborted.
		childEvent, parentEvent bool
		want                    string
	}{
		{"child aborted", true, true, "not run: the turn ended (cancelled: the parent was cancelled)"},
		{"parent says so", false, true, "not run: the sub-agent's turn ended (aborted: cancelled)"},
		{"the turn ends first", false, false, "not run: the turn ended (cancelled: stopped)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTree(t)
			tr.emit("s4", "tR", started("tR", "s4", "", "", "", 0), events.TurnStep{Step: 1, Model: "m:x"})
			tr.emit("s4", "tR", subAgentCall(0, "c1", "cleaner", "tC", 1)...)
			tr.emit("", "tC", started("tC", "", "tR", "c1", "tR", 1), events.TurnStep{Step: 1, Model: "m:x"})
			tr.emit("", "tC", call(0, "c7", "delete", `{}`)...)
			tr.emit("", "tC", events.TurnPaused{Reason: "r", Pending: []events.ToolCall{{ID: "c7", Name: "delete", Input: json.RawMessage(`{}`)}}})
			tr.emit("s4", "tR", child("c1", "cleaner", "tC", 1, events.ChildPaused))

			if tc.childEvent {
				tr.emit("", "tC", events.TurnAborted{Reason: "the parent was cancelled", Code: "cancelled"})
			}
			if tc.parentEvent {
				aborted := child("c1", "cleaner", "tC", 1, events.ChildAborted)
				aborted.Code = "cancelled"
				tr.emit("s4", "tR", aborted, events.ToolCallResult{CallID: "c1", Name: "cleaner", Content: "sub-agent aborted: cancelled", IsError: true})
			}
			tr.emit("s4", "tR", events.TurnAborted{Reason: "stopped", Code: "cancelled"})

			s, err := tr.c.HTTPGet(ctxT(t), "/api/chat/s4/stream?turn=tR")
			if err != nil {
				t.Fatal(err)
			}
			req := strings.Index(s, `"type":"tool-approval-request","approvalId":"approval-tC.c7"`)
			wd := strings.Index(s, `{"type":"tool-output-error","toolCallId":"tC.c7","errorText":"`+tc.want+`"}`)
			if req < 0 || wd < req || strings.Count(s, `"toolCallId":"tC.c7","errorText"`) != 1 {
				t.Errorf("want the approval request of tC.c7, then its withdrawal once (%q), got:\n%s", tc.want, s)
			}
			msgs, err := tr.c.Messages(ctxT(t), "s4")
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range msgs[len(msgs)-1].Parts {
				if p.ToolCallID == "tC.c7" && p.State != "output-error" {
					t.Errorf("messages: the withdrawn call is %s", p.State)
				}
			}
		})
	}
}

// Two sub-agents run at once: each child's parts keep their own ids and
// owner; one paused child does not end the stream while the other runs,
// and it ends once only people are waited for.
func TestTwoParallelChildren(t *testing.T) {
	tr := newTree(t)
	tr.emit("s5", "tR", started("tR", "s5", "", "", "", 0), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("s5", "tR", subAgentCall(0, "c1", "alpha", "tA", 1)...)
	tr.emit("s5", "tR", subAgentCall(1, "c2", "beta", "tB", 1)...)
	tr.emit("", "tA", started("tA", "", "tR", "c1", "tR", 1), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("", "tB", started("tB", "", "tR", "c2", "tR", 1), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("", "tA", events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 0, BlockType: events.BlockText}, Step: 1})
	tr.emit("", "tB", events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 0, BlockType: events.BlockText}, Step: 1})
	for _, w := range []string{"one ", "two ", "three"} {
		tr.emit("", "tA", events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "A:"+w), Step: 1})
		tr.emit("", "tB", events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "B:"+w), Step: 1})
	}
	tr.emit("", "tA", events.WorkerBlockStop{BlockStop: events.BlockStop{Index: 0, BlockType: events.BlockText}, Step: 1})
	tr.emit("", "tA", call(1, "c7", "delete", `{}`)...)
	tr.emit("", "tA", events.TurnPaused{Reason: "r", Pending: []events.ToolCall{{ID: "c7", Name: "delete", Input: json.RawMessage(`{}`)}}})
	tr.emit("s5", "tR", child("c1", "alpha", "tA", 1, events.ChildPaused))

	s, err := tr.c.Resume(ctxT(t), "s5")
	if err != nil {
		t.Fatal(err)
	}
	ps, done := readAll(t, s, func(ps []part) bool {
		return find(ps, "data-llmw-child", "id", "child-c1") >= 0 && strings.Contains(ps[len(ps)-1].field("data"), `"paused"`)
	})
	if done {
		t.Fatal("the stream ended while child tB still runs")
	}
	// tB still streams; the stream goes on.
	tr.emit("", "tB", events.WorkerBlockStop{BlockStop: events.BlockStop{Index: 0, BlockType: events.BlockText}, Step: 1},
		events.TurnCompleted{StopReason: events.StopEndTurn})
	tr.emit("s5", "tR", child("c2", "beta", "tB", 1, events.ChildCompleted), events.ToolCallResult{CallID: "c2", Name: "beta", Content: "B done"})
	rest, done := readAll(t, s, nil)
	if !done {
		t.Fatal("the stream did not end once only tA's approval was waited for")
	}
	ps = append(ps, rest...)
	if a, b := textOf(ps, "tA.text-"), textOf(ps, "tB.text-"); a != "A:one A:two A:three" || b != "B:one B:two B:three" {
		t.Errorf("the children's texts are %q and %q", a, b)
	}
	for _, p := range ps {
		if p.Type == "text-start" {
			o := owner(p)
			if want := map[string]string{"tA": "c1", "tB": "c2"}[o.TurnID]; want == "" || want != o.ToolCallID || !strings.HasPrefix(p.field("id"), o.TurnID+".") {
				t.Errorf("%s: owner %+v", p.Raw, o)
			}
		}
	}
	if find(ps, "tool-approval-request", "toolCallId", "tA.c7") < 0 || find(ps, "tool-output-available", "toolCallId", "c2") < 0 {
		t.Errorf("want tA's approval request and beta's output in %v", types(ps))
	}
}

// A child of a child (depth 2) shows in the root's stream too, under its
// parent's call; its events stored before its parent named it are not
// lost; an approval of its call resumes it.
func TestGrandchild(t *testing.T) {
	tr := newTree(t)
	tr.emit("s6", "tR", started("tR", "s6", "", "", "", 0), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("s6", "tR", subAgentCall(0, "c1", "planner", "tA", 1)...)
	tr.emit("", "tA", started("tA", "", "tR", "c1", "tR", 1), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("", "tA", call(0, "c5", "researcher", `{"prompt":"dig"}`)...)
	tr.emit("", "tA", events.ToolStarted{CallID: "c5", Name: "researcher"})
	// The grandchild starts before tA's llmw.tool.child names it.
	tr.emit("", "tG", started("tG", "", "tA", "c5", "tR", 2), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("", "tG", textBlock(1, 0, "deep ")...)

	s, err := tr.c.Resume(ctxT(t), "s6")
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := readAll(t, s, func(ps []part) bool { return find(ps, "tool-input-available", "toolCallId", "tA.c5") >= 0 })
	tr.emit("", "tA", child("c5", "researcher", "tG", 2, events.ChildStarted))
	tr.emit("", "tG", textBlock(1, 1, "down")...)
	tr.emit("", "tG", call(2, "c8", "delete", `{}`)...)
	tr.emit("", "tG", events.TurnPaused{Reason: "r", Pending: []events.ToolCall{{ID: "c8", Name: "delete", Input: json.RawMessage(`{}`)}}})
	tr.emit("", "tA", child("c5", "researcher", "tG", 2, events.ChildPaused))
	tr.emit("s6", "tR", child("c1", "planner", "tA", 1, events.ChildPaused))
	rest, done := readAll(t, s, nil)
	if !done {
		t.Fatal("the stream did not end while the grandchild waits for a person")
	}
	ps = append(ps, rest...)
	if got := textOf(ps, "tG.text-"); got != "deep down" {
		t.Errorf("the grandchild's text = %q, want \"deep down\" (its first block was stored before its parent named it)", got)
	}
	i := find(ps, "text-start", "id", "tG.text-1")
	if i < 0 {
		t.Fatalf("no tG.text-1 in %v", types(ps))
	}
	if o := owner(ps[i]); o != (gateway.ChildOwner{TurnID: "tG", ToolCallID: "tA.c5", Depth: 2}) {
		t.Errorf("the grandchild's part names %+v, want tG under tA.c5 at depth 2", o)
	}
	if find(ps, "data-llmw-child", "id", "child-tA.c5") < 0 || find(ps, "tool-approval-request", "toolCallId", "tG.c8") < 0 {
		t.Errorf("want data-llmw-child child-tA.c5 and the approval request of tG.c8 in %v", types(ps))
	}
	a, err := tr.c.Chat(ctxT(t), &gateway.ChatRequest{ID: "s6", Messages: approval("tG.c8", "delete", true, "")})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if rq := resumeOf(t, tr, "tG"); rq.Decisions["c8"].Kind != events.DecisionApprove {
		t.Errorf("the grandchild's resume = %+v, want c8 approved", rq)
	}
}

// A child turn whose events are on its parent's session is no message of
// its own in the session's history: its parts are in its parent's.
func TestChildOnTheParentsSession(t *testing.T) {
	tr := newTree(t)
	tr.emit("s7", "tR", started("tR", "s7", "", "", "", 0), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("s7", "tR", call(0, "c1", "helper", `{"prompt":"p"}`)...)
	c := child("c1", "helper", "tC", 1, events.ChildStarted)
	c.ChildSessionID = "s7"
	tr.emit("s7", "tR", c)
	tr.emit("s7", "tC", started("tC", "s7", "tR", "c1", "tR", 1), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("s7", "tC", textBlock(1, 0, "from the child")...)
	msgs, err := tr.c.Messages(ctxT(t), "s7")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		if m.Role == "assistant" {
			ids = append(ids, m.ID)
		}
	}
	if !slices.Equal(ids, []string{"tR"}) {
		t.Fatalf("assistant messages %v, want tR's alone", ids)
	}
	found := false
	for _, p := range msgs[len(msgs)-1].Parts {
		found = found || p.Type == "text" && p.Text == "from the child"
	}
	if !found {
		t.Errorf("the child's text is not in tR's message: %+v", msgs[len(msgs)-1].Parts)
	}
}

// The parent may store llmw.tool.child resumed before the child stores
// its llmw.turn.resumed (the parent follows the child's state): the
// stream of the approval's answer does not end there as if the child
// still waited for a person.
func TestChildResumedBeforeItsOwnEvent(t *testing.T) {
	tr := newTree(t)
	tr.emit("s7", "tR", started("tR", "s7", "", "", "", 0), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("s7", "tR", subAgentCall(0, "c1", "cleaner", "tC", 1)...)
	tr.emit("", "tC", started("tC", "", "tR", "c1", "tR", 1), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("", "tC", call(0, "c7", "delete", `{}`)...)
	pending := []events.ToolCall{{ID: "c7", Name: "delete", Input: json.RawMessage(`{}`)}}
	tr.emit("", "tC", events.TurnPaused{Reason: "r", Pending: pending})
	tr.emit("s7", "tR", child("c1", "cleaner", "tC", 1, events.ChildPaused))

	ans, err := tr.c.Chat(ctxT(t), &gateway.ChatRequest{ID: "s7", Messages: approval("tC.c7", "delete", true, "")})
	if err != nil {
		t.Fatal(err)
	}
	defer ans.Close()
	tr.emit("s7", "tR", child("c1", "cleaner", "tC", 1, events.ChildResumed))
	first, done := readAll(t, ans, func(ps []part) bool { return find(ps, "data-llmw-child", "id", "child-c1") >= 0 })
	if done {
		t.Fatalf("the answer's stream ended at the parent's word that the child resumed: %v", types(first))
	}
	rq := resumeOf(t, tr, "tC")
	tr.emit("", "tC", events.TurnResumed{Decisions: rq.Decisions}, events.ToolStarted{CallID: "c7", Name: "delete"},
		events.ToolCallResult{CallID: "c7", Name: "delete", Content: "deleted"}, events.TurnCompleted{StopReason: events.StopEndTurn})
	tr.emit("s7", "tR", child("c1", "cleaner", "tC", 1, events.ChildCompleted),
		events.ToolCallResult{CallID: "c1", Name: "cleaner", Content: "tidy"}, events.TurnCompleted{StopReason: events.StopEndTurn})
	rest, done := readAll(t, ans, nil)
	if !done || find(rest, "tool-output-available", "toolCallId", "tC.c7") < 0 || find(rest, "tool-output-available", "toolCallId", "c1") < 0 {
		t.Errorf("the answer's stream: done %v, %v; want the child's call and the parent's answered", done, types(rest))
	}
}
