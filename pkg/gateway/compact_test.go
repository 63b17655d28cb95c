package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/internal/service/turnsvc"
	"github.com/llmworker/llmworker/pkg/compact"
	"github.com/llmworker/llmworker/pkg/llm"

	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
)

// POST /api/chat/{id}/compact compacts a session between its turns, as
// `llmworker session compact ID`: the turn service summarizes it on the
// model of its last turn, the session keeps the compaction, and its next
// turn reads the summary instead of the messages it covers. An unknown
// session is 404, a model the gateway does not offer 400.
func TestCompactEndpoint(t *testing.T) {
	// Messages of 2,000 bytes: the summary is far shorter than the span.
	long := strings.Repeat(" and so on", 200)
	script := llmtest.NewScripted(llmtest.TextStep("answer one"+long), llmtest.TextStep("answer two"+long),
		llmtest.TextStep("SUMMARY OF TWO TURNS"), llmtest.TextStep("answer three"))
	st := startStack(t, stackOpts{script: script})
	_, srv := startGateway(t, st, gateway.Config{Model: "script:compact"})
	c := &gateway.Client{URL: srv.URL}
	turn := func(msg string) {
		t.Helper()
		s, err := c.Chat(ctxT(t), &gateway.ChatRequest{ID: "compacted", Messages: []gateway.UIMessage{userMsg(msg)}})
		if err != nil {
			t.Fatal(err)
		}
		parts, done := readAll(t, s, nil)
		s.Close()
		if !done || parts[len(parts)-1].Type != "finish" {
			t.Fatalf("turn %q: %v", msg, types(parts))
		}
	}
	turn("question one" + long)
	turn("question two" + long)

	got, err := c.Compact(ctxT(t), "compacted", "")
	if err != nil {
		t.Fatal(err)
	}
	// The session: question one, answer one, question two, answer two;
	// the last unit stays.
	if got == nil || got.To != 3 || !strings.Contains(got.Policy, "summary") || got.Model != "script:compact" ||
		len(got.Messages) != 1 || !strings.Contains(got.Messages[0].Text(), "SUMMARY OF TWO TURNS") {
		t.Fatalf("compaction %+v, want positions [0, 3) summarized by script:compact", got)
	}
	reqs := script.Requests()
	if sum := reqs[2]; sum.Model != "script:compact" || !strings.Contains(sum.Messages[0].Text(), "question one") {
		t.Fatalf("the summary's request: model %s, %.200q", sum.Model, sum.Messages[0].Text())
	}

	turn("question three")
	reqs = script.Requests()
	next := reqs[len(reqs)-1].Messages
	if len(next) != 3 || !strings.Contains(next[0].Text(), "SUMMARY OF TWO TURNS") || next[1].Text() != "answer two"+long || next[2].Text() != "question three" {
		b, _ := json.Marshal(next)
		t.Fatalf("the next turn's model call reads %d messages: %.300s", len(next), b)
	}

	var he *gateway.HTTPError
	if _, err := c.Compact(ctxT(t), "no-such-session", ""); !errors.As(err, &he) || he.Status != http.StatusNotFound {
		t.Fatalf("compact of an unknown session: %v, want 404", err)
	}
	if _, err := c.Compact(ctxT(t), "compacted", "openai:gpt-4o"); !errors.As(err, &he) || he.Status != http.StatusBadRequest || !strings.Contains(he.Message, `model: "openai:gpt-4o" is not offered here`) {
		t.Fatalf("compact for a model not offered: %v, want 400 naming it", err)
	}
}

// A turn that compacts its session's context shows one divider
// (data-llmw-compacted) in its live stream, in every replay of it (a
// reconnecting UI) and in the session's messages.
func TestCompactedDividerOnce(t *testing.T) {
	dir := t.TempDir()
	models := filepath.Join(dir, "models.json")
	// A 4,000-token window: with a reserve of 1,000 and 1,000 tokens of
	// output the room is 2,000, compacted above 1,600.
	if err := os.WriteFile(models, []byte(`{"models":{"script:small":{"context_window":4000,"max_output_tokens":1000}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat(" and so on", 150)
	// Turns of 3,000 bytes each, until one passes the threshold and
	// summarizes.
	script := llmtest.NewScripted()
	script.SetFallback(llmtest.TextStep("an answer" + long))
	p := summariesApart{main: script}
	st := startStack(t, stackOpts{provider: p, turn: turnsvc.Options{Models: models, Compaction: `{"reserve":1000,"keep_recent":300,"summary_max_tokens":200}`}})
	_, srv := startGateway(t, st, gateway.Config{Model: "script:small"})
	c := &gateway.Client{URL: srv.URL}
	dividers := func(ps []part) int {
		n := 0
		for _, p := range ps {
			if p.Type == "data-llmw-compacted" {
				n++
			}
		}
		return n
	}
	turnID := ""
	for i := 0; turnID == ""; i++ {
		if i == 6 {
			t.Fatal("no compaction in 6 turns")
		}
		s, err := c.Chat(ctxT(t), &gateway.ChatRequest{ID: "divider", Messages: []gateway.UIMessage{userMsg(fmt.Sprintf("question %d%s", i, long))}})
		if err != nil {
			t.Fatal(err)
		}
		parts, done := readAll(t, s, nil)
		s.Close()
		if !done || parts[len(parts)-1].Type != "finish" {
			t.Fatalf("turn %d: %v", i+1, types(parts))
		}
		switch dividers(parts) {
		case 0:
		case 1:
			turnID = parts[0].field("messageId")
		default:
			t.Fatalf("turn %d's stream shows %d dividers: %v", i+1, dividers(parts), types(parts))
		}
	}
	// A UI that reconnects replays the turn's stream: one divider, each
	// time.
	for range 2 {
		resp, err := http.Get(srv.URL + "/api/chat/divider/stream?turn=" + turnID)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("replay: %d %v", resp.StatusCode, err)
		}
		if n := strings.Count(string(b), `"type":"data-llmw-compacted"`); n != 1 {
			t.Fatalf("the replay shows %d dividers, want 1", n)
		}
	}
	msgs, err := c.Messages(ctxT(t), "divider")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == "data-llmw-compacted" {
				n++
			}
		}
	}
	if n != 1 {
		t.Fatalf("the session's messages show %d dividers, want 1", n)
	}
}

// summariesApart answers the summarizer's calls (compact.SummarySystem)
// with "SUMMARY" and the others from main.
type summariesApart struct{ main *llmtest.Scripted }

func (p summariesApart) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	if req.System == compact.SummarySystem {
		return llmtest.NewScripted(llmtest.TextStep("SUMMARY")).Stream(ctx, req)
	}
	return p.main.Stream(ctx, req)
}
