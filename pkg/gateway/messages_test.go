package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// A session's history as UI messages: each turn's question (from its
// llmw.turn.started) before the assistant message its stream builds,
// with the tool call's approval, the recorded answer, and how the turn
// ended — for a paused turn, a finished one and a stopped one.
func TestSessionMessages(t *testing.T) {
	st := startStack(t, stackOpts{approve: "fixed_version"})
	_, srv := startGateway(t, st, gateway.Config{})
	c := &gateway.Client{URL: srv.URL}
	sc, _ := replay.Lookup("anthropic")
	var wantText, wantReasoning string
	for _, step := range sc.Steps {
		for _, b := range readRecorded(t, step).blocks {
			switch b.typ {
			case "text":
				wantText += b.text
			case "thinking":
				wantReasoning += b.text
			}
		}
	}
	const chat = "history-1"
	second := "And <b>again</b>?"

	if got, err := c.Messages(ctxT(t), "no-such-chat"); err != nil || len(got) != 0 {
		t.Fatalf("messages of an unknown chat: %v, %v; want none", got, err)
	}

	s, err := c.Chat(ctxT(t), &gateway.ChatRequest{ID: chat, Messages: []gateway.UIMessage{userMsg(sc.Prompt)}})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := readAll(t, s, nil)
	s.Close()
	turn1 := first[0].field("messageId")
	msgs, err := c.Messages(ctxT(t), chat)
	if err != nil {
		t.Fatal(err)
	}
	checkUser(t, msgs, 0, sc.Prompt)
	a := checkAssistant(t, msgs, 1, turn1, "paused")
	call := toolPart(t, a)
	if call.State != "approval-requested" || call.Type != "tool-"+sc.Tools[0] || call.Approval == nil || call.Approval.ID != gateway.ApprovalID(call.ToolCallID) {
		t.Fatalf("paused call %s", js(call))
	}

	approved := true
	call.State, call.Approval.Approved = "approval-responded", &approved
	s, err = c.Chat(ctxT(t), &gateway.ChatRequest{ID: chat, Messages: []gateway.UIMessage{userMsg(sc.Prompt), {ID: turn1, Role: "assistant", Parts: []gateway.UIPart{call}}}})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, s, nil)
	s.Close()

	s, err = c.Chat(ctxT(t), &gateway.ChatRequest{ID: chat, Messages: []gateway.UIMessage{userMsg(second)}})
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := readAll(t, s, nil)
	s.Close()
	turn2 := p2[0].field("messageId")
	if err := c.Stop(ctxT(t), chat); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the stopped turn in the history", func() bool {
		msgs, err = c.Messages(ctxT(t), chat)
		return err == nil && len(msgs) == 4 && msgs[3].Metadata != nil && msgs[3].Metadata.Status == "aborted"
	})
	checkUser(t, msgs, 0, sc.Prompt)
	a = checkAssistant(t, msgs, 1, turn1, "completed")
	if a.Metadata.FinishReason != "stop" || a.Metadata.Error != "" {
		t.Fatalf("finished turn's metadata %s", js(a.Metadata))
	}
	call = toolPart(t, a)
	if call.State != "output-available" || call.Approval == nil || call.Approval.Approved == nil || !*call.Approval.Approved || len(call.Output) == 0 {
		t.Fatalf("approved call %s", js(call))
	}
	var text, reasoning string
	for _, p := range a.Parts {
		switch p.Type {
		case "text":
			text += p.Text
		case "reasoning":
			reasoning += p.Text
		}
		if (p.Type == "text" || p.Type == "reasoning") && p.State != "done" {
			t.Errorf("%s part of a finished turn in state %q", p.Type, p.State)
		}
	}
	if text != wantText || reasoning != wantReasoning {
		t.Fatalf("answer %q, reasoning %q; recorded %q, %q", text, reasoning, wantText, wantReasoning)
	}
	checkUser(t, msgs, 2, second)
	a = checkAssistant(t, msgs, 3, turn2, "aborted")
	if !strings.Contains(a.Metadata.Error, "cancel") || toolPart(t, a).State != "output-error" {
		t.Fatalf("stopped turn %s", js(a))
	}
}

func checkUser(t *testing.T, msgs []gateway.ChatMessage, i int, text string) {
	t.Helper()
	if len(msgs) <= i {
		t.Fatalf("%d messages, want message %d: %s", len(msgs), i, js(msgs))
	}
	m := msgs[i]
	if m.Role != "user" || len(m.Parts) != 1 || m.Parts[0].Type != "text" || m.Parts[0].Text != text || m.ID == "" || m.Metadata != nil {
		t.Fatalf("message %d %s, want the user's %q", i, js(m), text)
	}
}

func checkAssistant(t *testing.T, msgs []gateway.ChatMessage, i int, turnID, status string) gateway.ChatMessage {
	t.Helper()
	if len(msgs) <= i {
		t.Fatalf("%d messages, want message %d: %s", len(msgs), i, js(msgs))
	}
	m := msgs[i]
	if m.Role != "assistant" || m.ID != turnID || m.Metadata == nil || m.Metadata.TurnID != turnID || m.Metadata.Status != status {
		t.Fatalf("message %d %s, want turn %s's answer, %s", i, js(m), turnID, status)
	}
	return m
}

func toolPart(t *testing.T, m gateway.ChatMessage) gateway.UIPart {
	t.Helper()
	var out []gateway.UIPart
	for _, p := range m.Parts {
		if p.ToolCallID != "" {
			out = append(out, p)
		}
	}
	if len(out) != 1 {
		t.Fatalf("tool parts of %s: %d, want 1", js(m), len(out))
	}
	return out[0]
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A session of several completed turns reads back whole: each turn's
// question and its answer, in order. Every turn's llmw.turn.completed
// carries only what that turn added; the history is built from the
// session's events, turn by turn.
func TestSessionMessagesOfSeveralTurns(t *testing.T) {
	st := startStack(t, stackOpts{})
	_, srv := startGateway(t, st, gateway.Config{})
	c := &gateway.Client{URL: srv.URL}
	sc, _ := replay.Lookup("anthropic")
	var wantText string
	for _, step := range sc.Steps {
		for _, b := range readRecorded(t, step).blocks {
			if b.typ == "text" {
				wantText += b.text
			}
		}
	}
	const chat = "history-several"
	var questions, turns []string
	for k := range 4 {
		q := "question " + string(rune('A'+k))
		s, err := c.Chat(ctxT(t), &gateway.ChatRequest{ID: chat, Messages: []gateway.UIMessage{userMsg(q)}})
		if err != nil {
			t.Fatal(err)
		}
		parts, _ := readAll(t, s, nil)
		s.Close()
		questions, turns = append(questions, q), append(turns, parts[0].field("messageId"))
	}
	var msgs []gateway.ChatMessage
	natstest.Eventually(t, "every turn completed in the history", func() bool {
		var err error
		msgs, err = c.Messages(ctxT(t), chat)
		return err == nil && len(msgs) == 2*len(turns) && msgs[len(msgs)-1].Metadata != nil && msgs[len(msgs)-1].Metadata.Status == "completed"
	})
	for k := range turns {
		checkUser(t, msgs, 2*k, questions[k])
		a := checkAssistant(t, msgs, 2*k+1, turns[k], "completed")
		var text string
		for _, p := range a.Parts {
			if p.Type == "text" {
				text += p.Text
			}
		}
		if text != wantText {
			t.Errorf("turn %d's answer %q, recorded %q", k, text, wantText)
		}
	}
}
