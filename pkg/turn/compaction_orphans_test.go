package turn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/turn"
)

// unpaired returns the call ids of msgs that a provider refuses, sorted:
// a tool_use whose result is not in the message right after it (the
// worker's tool message of its step; Anthropic and Bedrock want it in
// the next user turn, OpenAI in the tool messages that follow, Gemini
// one response per call), and a tool_result whose tool_use is not in the
// message right before it.
func unpaired(msgs []events.Message) []string {
	has := func(i int, typ events.PartType, id string) bool {
		if i < 0 || i >= len(msgs) {
			return false
		}
		return slices.ContainsFunc(msgs[i].Content, func(p events.Part) bool {
			return p.Type == typ && (p.ID == id && typ == events.PartToolUse || p.ToolUseID == id && typ == events.PartToolResult)
		})
	}
	var out []string
	for i, m := range msgs {
		for _, p := range m.Content {
			switch {
			case p.Type == events.PartToolUse && (!has(i+1, events.PartToolResult, p.ID) || msgs[i+1].Role != events.RoleTool):
				out = append(out, p.ID)
			case p.Type == events.PartToolResult && !has(i-1, events.PartToolUse, p.ToolUseID):
				out = append(out, p.ToolUseID)
			}
		}
	}
	slices.Sort(out)
	return out
}

// The summarizer's input names calls and results by id (compact.render).
var (
	summarizedCall   = regexp.MustCompile(`calls tool \w+, call id (\S+)\]`)
	summarizedResult = regexp.MustCompile(`\[tool (?:result|error) of call (\S+)\]`)
)

// summarizedIDs returns the call ids of the calls and of the results a
// summarizer's prompt holds.
func summarizedIDs(prompt string) (calls, results []string) {
	for _, m := range summarizedCall.FindAllStringSubmatch(prompt, -1) {
		calls = append(calls, m[1])
	}
	for _, m := range summarizedResult.FindAllStringSubmatch(prompt, -1) {
		results = append(results, m[1])
	}
	slices.Sort(calls)
	slices.Sort(results)
	return calls, results
}

// A session whose history holds orphaned calls — a call without its
// result ("lost", of a turn that died during its tools, in the history a
// client sent) and a result without its call ("ghost") — is compacted
// around them, twice: the summarizer reads every call with its result
// and neither orphan, and the model reads the orphans as they were and
// every other call beside its result. So a compaction leaves no call
// unpaired that was paired, and the orphans never stop a compaction.
func TestSessionCompactionAroundOrphanedCalls(t *testing.T) {
	e := newEnv(t)
	p := newSummarizing()
	e.startTurn(turn.Config{Provider: p, Models: tinyModels(t), Compaction: sessionCompaction})
	session := newID("orphans")
	call := func(id string, n int) events.Part {
		return events.ToolUsePart(id, "fetch", json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)))
	}
	history := []events.Message{
		events.UserText("first question " + strings.Repeat("q", 3200)),
		{Role: events.RoleAssistant, Content: []events.Part{call("lost", 0)}},
		events.UserText("that call never answered; go on"),
		{Role: events.RoleAssistant, Content: []events.Part{call("kept-a", 1), call("kept-b", 2)}},
		{Role: events.RoleTool, Content: []events.Part{
			events.ToolResultPart("kept-a", "A "+strings.Repeat("r", 400), false),
			events.ToolResultPart("kept-b", "B "+strings.Repeat("r", 400), false)}},
		events.AssistantText("fetched both"),
		{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("ghost", "a result whose call is gone", false)}},
		events.UserText("question 0 " + strings.Repeat("q", 400)),
	}
	orphans := []string{"ghost", "lost"}
	if got := unpaired(history); !slices.Equal(got, orphans) {
		t.Fatalf("the history's unpaired calls are %v, want %v", got, orphans)
	}
	p.main.Add(llmtest.TextStep("answer 0 " + strings.Repeat("a", 400)))
	id := newID("orphans-first")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: smallWindow, Messages: history})
	if end := w.waitEnd(); end.Type != events.TypeTurnCompleted {
		t.Fatalf("first turn: %s %s", end.Type, end.Data)
	}
	if c := loadSession(t, e, session).Compaction; c != nil {
		t.Fatalf("the first turn compacted already (%s): the test needs its orphans in the originals", c.ID)
	}

	var last *events.Compaction
	for n := 1; n <= 2; n++ {
		sums := p.sum.Calls()
		for i := 1; ; i++ {
			if i == 20 {
				t.Fatalf("compaction %d: none in 20 turns", n)
			}
			textTurn(t, e, p, session, 10*n+i)
			if c := loadSession(t, e, session).Compaction; c != nil && (last == nil || c.ID != last.ID) {
				break
			}
		}
		s := loadSession(t, e, session)
		c := s.Compaction
		if !strings.Contains(c.Policy, "summary") || p.sum.Calls() != sums+1 {
			t.Fatalf("compaction %d: policy %q after %d summarizer calls, want one summary", n, c.Policy, p.sum.Calls()-sums)
		}
		reqs := p.sum.Requests()
		prompt := reqs[len(reqs)-1].Messages[0].Text()
		calls, results := summarizedIDs(prompt)
		if !slices.Equal(calls, results) {
			t.Errorf("compaction %d: the summarizer read the calls %v and the results %v", n, calls, results)
		}
		for _, o := range orphans {
			if strings.Contains(prompt, o) {
				t.Errorf("compaction %d: the summarizer read orphan %q:\n%s", n, o, prompt)
			}
		}
		if n == 1 && !slices.Equal(calls, []string{"kept-a", "kept-b"}) {
			t.Errorf("compaction 1: the summarizer read the calls %v, want kept-a and kept-b with their results", calls)
		}
		// The compaction holds the summary, then the units of the
		// orphans as the history had them.
		if len(c.Messages) != 4 || mustJSON(t, c.Messages[1:]) != mustJSON(t, []events.Message{history[1], history[5], history[6]}) {
			t.Fatalf("compaction %d holds %v, want the summary, the lost call, and the answer with the ghost result", n, roles(c.Messages))
		}
		proj := projected(c, s.Messages)
		if got := unpaired(proj); !slices.Equal(got, orphans) {
			t.Errorf("compaction %d: the projection's unpaired calls are %v, want the orphans %v alone", n, got, orphans)
		}
		// The session's next turn reads that projection.
		textTurn(t, e, p, session, 10*n)
		mreqs := p.main.Requests()
		read := mreqs[len(mreqs)-1].Messages
		if len(read) != len(proj)+1 {
			t.Fatalf("the model call after compaction %d reads %v, want the projection %v and a question", n, roles(read), roles(proj))
		}
		sameMessages(t, fmt.Sprintf("the model call after compaction %d", n), read[:len(proj)], proj)
		if got := unpaired(read); !slices.Equal(got, orphans) {
			t.Errorf("compaction %d: the model read the unpaired calls %v, want %v", n, got, orphans)
		}
		last = c
	}
}

// A session turn cancelled while its tool runs leaves the session as it
// was: the call without a result stays in the turn's own transcript,
// and the session's next turn reads only completed turns, every call
// beside its result.
func TestCancelledToolsLeaveNoOrphanInTheSession(t *testing.T) {
	e := newEnv(t)
	p := newSummarizing()
	started := make(chan struct{}, 1)
	slow := tool.Must("slow", "runs until cancelled", func(ctx context.Context, _ noArgs) (string, error) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return "", ctx.Err()
	})
	e.startTurn(turn.Config{Provider: p, Models: tinyModels(t), Compaction: sessionCompaction, Tools: []tool.Tool{slow}})
	session := newID("cancelled-tools")
	textTurn(t, e, p, session, 0)
	before := loadSession(t, e, session)

	p.main.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c-slow", Name: "slow", Input: `{}`}))
	id := newID("cancelled-during-tools")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: smallWindow, Tools: []string{"slow"},
		Messages: []events.Message{events.UserText("run slow")}})
	<-started
	e.cancelTurn(id)
	if end := w.waitEnd(); end.Type != events.TypeTurnAborted {
		t.Fatalf("the cancelled turn: %s %s", end.Type, end.Data)
	}
	after := loadSession(t, e, session)
	sameMessages(t, "the session after the cancelled turn", after.Messages, before.Messages)

	textTurn(t, e, p, session, 1)
	reqs := p.main.Requests()
	read := reqs[len(reqs)-1].Messages
	if got := unpaired(read); len(got) != 0 {
		t.Fatalf("the next turn's model call reads the unpaired calls %v: %v", got, roles(read))
	}
	if want := append(append([]events.Message{}, before.Messages...), read[len(read)-1]); mustJSON(t, read) != mustJSON(t, want) {
		t.Fatalf("the next turn's model call reads %v, want the completed turn's messages and its question", roles(read))
	}
}
