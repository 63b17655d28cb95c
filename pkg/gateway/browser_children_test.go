package gateway_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/llmworker/llmworker/pkg/events"
)

// The web UI draws a sub-agent's child turn under the call that runs it,
// and a child of the child under its call, each with its text, tools and
// status; the Approve button of a paused child's call resumes the child;
// a reload draws the finished tree again from the session's messages.
func TestBrowserSubAgents(t *testing.T) {
	bin := needChromium(t)
	tr := newTree(t)
	user := []events.Message{{Role: events.RoleUser, Content: []events.Part{{Type: events.PartText, Text: "Tidy up /tmp"}}}}
	st := started("tR", "sb", "", "", "", 0)
	st.Input = user
	tr.emit("sb", "tR", st, events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("sb", "tR", textBlock(1, 0, "Asking the cleaner.")...)
	tr.emit("sb", "tR", subAgentCall(1, "c1", "cleaner", "tC", 1)...)
	tr.emit("", "tC", started("tC", "", "tR", "c1", "tR", 1), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("", "tC", textBlock(1, 0, "Looking at /tmp.")...)
	tr.emit("", "tC", subAgentCall(1, "c5", "lister", "tG", 2)...)
	tr.emit("", "tG", started("tG", "", "tC", "c5", "tR", 2), events.TurnStep{Step: 1, Model: "m:x"})
	tr.emit("", "tG", textBlock(1, 0, "Two old files.")...)
	tr.emit("", "tG", events.TurnCompleted{StopReason: events.StopEndTurn})
	tr.emit("", "tC", child("c5", "lister", "tG", 2, events.ChildCompleted), events.ToolCallResult{CallID: "c5", Name: "lister", Content: "Two old files."})
	tr.emit("", "tC", call(2, "c7", "delete", `{"path":"/tmp/old"}`)...)
	pending := []events.ToolCall{{ID: "c7", Name: "delete", Input: json.RawMessage(`{"path":"/tmp/old"}`)}}
	tr.emit("", "tC", events.TurnPaused{Reason: "needs a person", Hook: "approve-it", Pending: pending})
	paused := child("c1", "cleaner", "tC", 1, events.ChildPaused)
	paused.Pending = pending
	tr.emit("sb", "tR", paused)

	bctx, wait, eval := openBrowser(t, bin)
	const (
		childSel = `.msg.assistant .tool[data-call-id="c1"] .child[data-turn-id="tC"]`
		grandSel = childSel + ` .tool[data-call-id="tC.c5"] .child[data-turn-id="tG"]`
		callSel  = childSel + ` .tool[data-call-id="tC.c7"]`
	)
	// The part of the page a selector draws, as text ("" when none).
	textAt := func(sel string) string {
		return eval(`(document.querySelector(` + jsString(sel) + `) || {}).textContent || ''`)
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(tr.c.URL+"/#chat=sb"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)),
	); err != nil {
		t.Fatal(err)
	}
	wait("the paused child's call with its approval buttons, nested", `!!document.querySelector(`+jsString(callSel+` button.approve`)+`) && !window.llmw.streaming`)
	if got := textAt(childSel); !strings.Contains(got, "Looking at /tmp.") || !strings.Contains(got, "paused") {
		t.Errorf("the child's block reads %q, want its text and its status", got)
	}
	if got := textAt(grandSel); !strings.Contains(got, "Two old files.") || !strings.Contains(got, "completed") {
		t.Errorf("the grandchild's block reads %q", got)
	}
	dir := os.Getenv("LLMW_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "llmworker-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gateway-ui-sub-agents.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the paused sub-agent: %s", filepath.Join(dir, "gateway-ui-sub-agents.png"))
	// The children's text is drawn only under their calls.
	if n := eval(`String(Array.from(document.querySelectorAll('.msg.assistant > .part-text')).filter(e => /Looking|Two old/.test(e.textContent)).length)`); n != "0" {
		t.Errorf("%s of the children's text parts are drawn at the message's top level", n)
	}

	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(callSel+` button.approve`))); err != nil {
		t.Fatal(err)
	}
	rq := resumeOf(t, tr, "tC")
	if d := rq.Decisions["c7"]; d.Kind != events.DecisionApprove || len(rq.Decisions) != 1 {
		t.Fatalf("the Approve button resumed %+v, want tC's c7 approved", rq)
	}
	tr.emit("", "tC", events.TurnResumed{Decisions: rq.Decisions}, events.ToolStarted{CallID: "c7", Name: "delete"},
		events.ToolCallResult{CallID: "c7", Name: "delete", Content: "deleted"}, events.TurnStep{Step: 2, Model: "m:x"})
	tr.emit("", "tC", textBlock(2, 0, "Removed it.")...)
	tr.emit("", "tC", events.TurnCompleted{StopReason: events.StopEndTurn})
	tr.emit("sb", "tR", child("c1", "cleaner", "tC", 1, events.ChildCompleted),
		events.ToolCallResult{CallID: "c1", Name: "cleaner", Content: "Removed it."}, events.TurnCompleted{StopReason: events.StopEndTurn})
	wait("the child's end", `!!document.querySelector(`+jsString(childSel+`[data-status="completed"]`)+`) && !window.llmw.streaming`)
	if got := eval(`document.querySelector(` + jsString(callSel) + `).dataset.state`); got != "output-available" {
		t.Errorf("the approved call is %s", got)
	}
	if got := textAt(childSel); !strings.Contains(got, "Removed it.") {
		t.Errorf("after the resume the child's block reads %q", got)
	}

	// A reload draws the tree from the session's messages.
	if err := chromedp.Do(bctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
		t.Fatal(err)
	}
	wait("the reloaded tree", `!!document.querySelector(`+jsString(grandSel)+`)`)
	if got := textAt(childSel); !strings.Contains(got, "Looking at /tmp.") || !strings.Contains(got, "Removed it.") || strings.Count(got, "Removed it.") != 1 {
		t.Errorf("after a reload the child's block reads %q", got)
	}
	if got := textAt(grandSel); !strings.Contains(got, "Two old files.") {
		t.Errorf("after a reload the grandchild's block reads %q", got)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
