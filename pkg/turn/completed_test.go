package turn_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// Each turn of a session ends with an llmw.turn.completed that carries
// the turn's own question and answer and the transcript's length after
// it (docs/protocol.md §5): the event of turn k is as large as the first
// one, not k times larger, and the turns' messages in order are the
// session's transcript.
func TestCompletedCarriesTheTurnsOwnMessages(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted()
	e.scripted(p)
	e.startTurn(turn.Config{})
	session := newID("own-messages")
	const turns = 6
	var all []events.Message
	var sizes []int
	for k := range turns {
		q := events.UserText(fmt.Sprintf("question %d: %s", k, strings.Repeat("q", 2000)))
		answer := fmt.Sprintf("answer %d: %s", k, strings.Repeat("a", 2000))
		p.Add(llmtest.TextStep(answer))
		id := newID(fmt.Sprintf("own-messages-%d", k))
		w := e.watch(id)
		e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: "test:m", Messages: []events.Message{q}})
		end := w.waitEnd()
		if end.Type != events.TypeTurnCompleted {
			t.Fatalf("turn %d ended %s: %s", k, end.Type, end.Data)
		}
		done := decode[events.TurnCompleted](t, end)
		if len(done.Messages) != 2 || done.Messages[0].Text() != q.Text() || done.Messages[1].Text() != answer {
			t.Fatalf("turn %d's completed carries %d messages, want its question and answer: %s", k, len(done.Messages), mustJSON(t, done.Messages))
		}
		if done.TranscriptLength != 2*(k+1) || done.From() != 2*k || done.SessionID != session {
			t.Fatalf("turn %d: transcript_length %d (from %d), session %q; want %d, %d, %q", k, done.TranscriptLength, done.From(), done.SessionID, 2*(k+1), 2*k, session)
		}
		all = append(all, done.Messages...)
		sizes = append(sizes, len(end.Data))
	}
	if last, first := sizes[turns-1], sizes[0]; last > first+64 {
		t.Errorf("completed event sizes %v grow with the session", sizes)
	}
	s, ok, err := turn.LoadSession(natstest.Context(t), e.js, session)
	if err != nil || !ok {
		t.Fatalf("LoadSession: %v %v", ok, err)
	}
	if mustJSON(t, s.Messages) != mustJSON(t, all) {
		t.Errorf("the session's transcript (%d messages) is not the turns' messages in order (%d)", len(s.Messages), len(all))
	}
}
