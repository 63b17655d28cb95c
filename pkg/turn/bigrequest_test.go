package turn_test

import (
	"context"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/turn"
)

// A model call whose request is larger than the server's max payload
// (here its transcript fits a checkpoint, and the tool definitions the
// call adds do not fit a message) reaches the model whole through
// LLMW_REQUESTS, and the turn completes.
func TestModelCallLargerThanAMessage(t *testing.T) {
	s := natstest.Start(t, natstest.Options{MaxPayload: 128 << 10})
	e := &env{t: t, url: s.URL(), emb: s.Embedded, nc: s.NC, js: s.JS}
	manual := strings.Repeat("a long manual. ", 40<<10/15)
	doc := tool.Must("manual", manual, func(context.Context, noArgs) (string, error) { return "", nil })
	p := llmtest.NewScripted(llmtest.TextStep("read it all"))
	e.scripted(p)
	e.startTurn(turn.Config{Tools: []tool.Tool{doc}})
	question := events.UserText(strings.Repeat("q", 100<<10))
	id := newID("big-call")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{question}, Tools: []string{"manual"}})
	done := w.completed()
	if got := done.Messages[len(done.Messages)-1].Text(); got != "read it all" {
		t.Fatalf("answer %q", got)
	}
	reqs := p.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model calls", len(reqs))
	}
	r := reqs[0]
	if len(r.Messages) != 1 || r.Messages[0].Text() != question.Text() || len(r.Tools) != 1 || r.Tools[0].Description != manual {
		t.Fatalf("the model got %d messages and %d tools, not the question and the manual whole", len(r.Messages), len(r.Tools))
	}
	if size := len(mustJSON(t, r)); size <= int(s.NC.MaxPayload()) {
		t.Fatalf("the request is %d bytes, within the max payload %d: the test proves nothing", size, s.NC.MaxPayload())
	}
}
