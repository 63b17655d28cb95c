package turn_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmworker/llmworker/internal/leaf/poll"
	"github.com/llmworker/llmworker/pkg/compact"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/models"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/turn"
)

// summarizing sends the summarizer's calls (compact.SummarySystem) to
// sum and the turn's model calls to main; while block is set, the next
// model call of the turn plays blocked's next step instead.
type summarizing struct {
	main, sum, blocked *llmtest.Scripted
	// armed: the next summarizer call sets block.
	armed, block *atomic.Bool
}

func (p summarizing) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	switch {
	case req.System == compact.SummarySystem:
		if p.armed.CompareAndSwap(true, false) {
			p.block.Store(true)
		}
		return p.sum.Stream(ctx, req)
	case p.block != nil && p.block.CompareAndSwap(true, false):
		return p.blocked.Stream(ctx, req)
	}
	return p.main.Stream(ctx, req)
}

// smallWindow is a model of a 4,000-token window and 1,000 output
// tokens; with sessionCompaction's reserve of 1,000 its room is 2,000
// tokens: a turn compacts above 1,600 (the default threshold 0.8),
// keeping the newest units of at least 300 tokens as they are, and
// the summary of a span below 2,000 tokens is one call.
const smallWindow = "test:small"

var sessionCompaction = events.CompactionConfig{Reserve: 1000, KeepRecent: 300, SummaryMaxTokens: 200}

func tinyModels(t *testing.T) *models.Table {
	t.Helper()
	tab, err := models.Parse([]byte(`{"models": {"`+smallWindow+`": {"context_window": 4000, "max_output_tokens": 1000}}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

const sessionSummary = "SUMMARY OF THE SESSION"

func newSummarizing() summarizing {
	p := summarizing{main: llmtest.NewScripted(), sum: llmtest.NewScripted(), blocked: llmtest.NewScripted(llmtest.BlockingStep("half")), armed: new(atomic.Bool), block: new(atomic.Bool)}
	p.sum.SetFallback(llmtest.TextStep(sessionSummary))
	return p
}

// projected is what the model reads under compaction c (nil: none): c's
// messages, then the originals from c.To on (docs/architecture.md,
// "Compaction").
func projected(c *events.Compaction, originals []events.Message) []events.Message {
	if c == nil {
		return originals
	}
	return append(append([]events.Message{}, c.Messages...), originals[c.To:]...)
}

func sameMessages(t *testing.T, what string, got, want []events.Message) {
	t.Helper()
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Fatalf("%s:\n got %s\nwant %s", what, roles(got), roles(want))
	}
}

// itemBytes is what LLMW_TRANSCRIPTS holds of msgs: one stream message
// per item, its data the item's JSON (pkg/transcript).
func itemBytes(t *testing.T, msgs []events.Message) int64 {
	t.Helper()
	var n int64
	for i := range msgs {
		b, err := msgs[i].AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		n += int64(len(b))
	}
	return n
}

func loadSession(t *testing.T, e *env, id string) *turn.Session {
	t.Helper()
	s, ok, err := turn.LoadSession(natstest.Context(t), e.js, id)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return &turn.Session{}
	}
	return s
}

// A session's compaction outlives its turn: the summarizer is called once
// per compaction, not once per turn; each turn's model call reads the
// session's active compaction and the originals after it; and a turn
// reads from LLMW_TRANSCRIPTS only the originals after the compaction's
// To, so what it reads does not grow with the session.
func TestSessionCompactionOutlivesTheTurn(t *testing.T) {
	e := newEnv(t)
	p := newSummarizing()
	const turns = 24
	svc := e.startTurn(turn.Config{Provider: p, Models: tinyModels(t), Compaction: sessionCompaction})
	var read atomic.Int64
	turn.Transcripts(svc).SetReadObserver(func(_ string, _, bytes int) { read.Add(int64(bytes)) })
	session := newID("compacted-session")
	compactions := 0
	for i := 0; i < turns; i++ {
		p.main.Add(llmtest.TextStep(fmt.Sprintf("answer %d ", i) + strings.Repeat("a", 400)))
		before := loadSession(t, e, session)
		input := events.UserText(fmt.Sprintf("question %d ", i) + strings.Repeat("q", 400))
		full := append(append([]events.Message{}, before.Messages...), input)
		read.Store(0)
		sums := p.sum.Calls()
		id := newID("compacted-turn")
		w := e.watch(id)
		e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: smallWindow, Messages: []events.Message{input}})
		end := w.waitEnd()
		if end.Type != events.TypeTurnCompleted {
			t.Fatalf("turn %d: %s %s", i, end.Type, end.Data)
		}
		after := loadSession(t, e, session)
		reqs := p.main.Requests()
		call := reqs[len(reqs)-1].Messages
		switch n := count(w.events(), events.TypeTurnCompacted); n {
		case 0:
			if p.sum.Calls() != sums {
				t.Fatalf("turn %d: the summarizer was called without a compaction", i)
			}
			if (after.Compaction == nil) != (before.Compaction == nil) || after.Compaction != nil && after.Compaction.ID != before.Compaction.ID {
				t.Fatalf("turn %d made no compaction and the session's changed: %+v → %+v", i, before.Compaction, after.Compaction)
			}
			sameMessages(t, fmt.Sprintf("turn %d's model call", i), call, projected(before.Compaction, full))
		case 1:
			compactions++
			c := after.Compaction
			if c == nil || c.ID != id+".c1" {
				t.Fatalf("turn %d compacted; the session's compaction is %+v", i, c)
			}
			if got := p.sum.Calls() - sums; got != 1 {
				t.Fatalf("turn %d: %d summarizer calls for one compaction", i, got)
			}
			if c.To > len(before.Messages) || before.Compaction != nil && c.To <= before.Compaction.To {
				t.Fatalf("turn %d: the compaction covers [0, %d) of %d messages (the session's was %+v)", i, c.To, len(full), before.Compaction)
			}
			if s := c.Messages[0].Text(); !strings.HasPrefix(s, fmt.Sprintf("[Summary of the conversation before transcript position %d, written by %s", c.To, smallWindow)) || !strings.HasSuffix(s, sessionSummary) {
				t.Fatalf("turn %d: the summary message is %q", i, s)
			}
			sameMessages(t, fmt.Sprintf("turn %d's model call", i), call, projected(c, full))
		default:
			t.Fatalf("turn %d compacted %d times", i, n)
		}
		// The turn read the session's originals from its compaction's To
		// on, nothing before.
		base := 0
		if before.Compaction != nil {
			base = before.Compaction.To
		}
		if got, want := read.Load(), itemBytes(t, before.Messages[base:]); got != want {
			t.Fatalf("turn %d read %d bytes of transcript; the %d originals after position %d are %d bytes", i, got, len(before.Messages)-base, base, want)
		}
		done := decode[events.TurnCompleted](t, end)
		if done.TranscriptLength != len(full)+1 || len(done.Messages) != 2 || done.Messages[0].Text() != input.Text() {
			t.Fatalf("turn %d completed with %d messages and transcript_length %d, want its 2 and %d", i, len(done.Messages), done.TranscriptLength, len(full)+1)
		}
	}
	if compactions < 3 {
		t.Fatalf("%d compactions in %d turns; the test needs at least 3", compactions, turns)
	}
	if p.sum.Calls() != compactions {
		t.Fatalf("%d summarizer calls for %d compactions", p.sum.Calls(), compactions)
	}
	if s := loadSession(t, e, session); len(s.Messages) != 2*turns {
		t.Fatalf("the session holds %d messages, want %d", len(s.Messages), 2*turns)
	}
}

// textTurn runs turn i of session on the model table's small model, its
// question and answer of 400 bytes each.
func textTurn(t *testing.T, e *env, p summarizing, session string, i int) {
	t.Helper()
	p.main.Add(llmtest.TextStep(fmt.Sprintf("answer %d ", i) + strings.Repeat("a", 400)))
	id := newID("text-turn")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: smallWindow,
		Messages: []events.Message{events.UserText(fmt.Sprintf("question %d ", i) + strings.Repeat("q", 400))}})
	if end := w.waitEnd(); end.Type != events.TypeTurnCompleted {
		t.Fatalf("turn %d: %s %s", i, end.Type, end.Data)
	}
}

// A turn of a compacted session that compacts again and is continued on
// another replica keeps its compaction: the replica reads the originals
// after the session's compaction and the turn's own, makes no second
// summary, and its model call reads the turn's compaction.
func TestSessionCompactionSurvivesRecovery(t *testing.T) {
	e := newEnv(t)
	p := newSummarizing()
	a, err := turn.New(e.connect(), turn.Config{Instance: "a", Logger: quietLogger(), AckWait: 2 * time.Second, Provider: p, Models: tinyModels(t), Compaction: sessionCompaction})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	session := newID("recovered-session")
	i := 0
	for ; loadSession(t, e, session).Compaction == nil; i++ {
		if i == 20 {
			t.Fatal("no compaction in 20 turns")
		}
		textTurn(t, e, p, session, i)
	}
	before := loadSession(t, e, session)
	// The next turns until one compacts again: its model call blocks.
	p.armed.Store(true)
	var id string
	var w *watcher
	var input events.Message
	for ; p.blocked.Calls() == 0; i++ {
		if i == 40 {
			t.Fatal("no second compaction in 40 turns")
		}
		before = loadSession(t, e, session)
		p.main.Add(llmtest.TextStep(fmt.Sprintf("answer %d ", i) + strings.Repeat("a", 400)))
		id = newID("recovered-turn")
		w = e.watch(id)
		input = events.UserText(fmt.Sprintf("question %d ", i) + strings.Repeat("q", 400))
		e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: smallWindow, Messages: []events.Message{input}})
		w.waitFor("the turn's end or its blocked model call", func(evs []ev) bool {
			return find(evs, events.TypeTurnCompleted) >= 0 || p.blocked.Calls() > 0 && count(evs, events.TypeBlockDelta) > 0
		})
	}
	if before.Compaction == nil || before.Compaction.To == 0 {
		t.Fatalf("the session's compaction before the turn: %+v", before.Compaction)
	}
	// The checkpoint before the blocked call holds the turn's compaction.
	poll.Until(t, waitFor, "the turn's compaction checkpointed", func() bool {
		st, ok, err := turn.LoadState(natstest.Context(t), e.js, id)
		return err == nil && ok && st.Checkpoint != nil && st.Checkpoint.Compaction != nil && st.Checkpoint.Compaction.ID == id+".c1"
	})
	sums := p.sum.Calls()
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx) // too short: the turn is handed off
	e.startTurn(turn.Config{Instance: "b", AckWait: 2 * time.Second, Provider: p, Models: tinyModels(t), Compaction: sessionCompaction})
	end := w.waitEnd()
	if end.Type != events.TypeTurnCompleted {
		t.Fatalf("the continued turn: %s %s", end.Type, end.Data)
	}
	if p.sum.Calls() != sums {
		t.Fatalf("the continued turn called the summarizer %d more times", p.sum.Calls()-sums)
	}
	after := loadSession(t, e, session)
	c := after.Compaction
	if c == nil || c.ID != id+".c1" {
		t.Fatalf("the session's compaction after the continued turn: %+v", c)
	}
	reqs := p.main.Requests()
	full := append(append([]events.Message{}, before.Messages...), input)
	sameMessages(t, "the continued model call", reqs[len(reqs)-1].Messages, projected(c, full))
	done := decode[events.TurnCompleted](t, end)
	if done.TranscriptLength != len(full)+1 || len(done.Messages) != 2 {
		t.Fatalf("completed with %d messages and transcript_length %d, want 2 and %d", len(done.Messages), done.TranscriptLength, len(full)+1)
	}
	if len(after.Messages) != len(full)+1 {
		t.Fatalf("the session holds %d messages, want %d", len(after.Messages), len(full)+1)
	}
}

// read_result of a tool result that lies before the session's
// compaction returns the original, read from the session's transcript:
// the turn holds only the messages after the compaction.
func TestReadResultBeforeTheSessionCompaction(t *testing.T) {
	e := newEnv(t)
	p := newSummarizing()
	original := "ORIGINAL RESULT " + strings.Repeat("r", 600)
	look := tool.Must("look", "looks", func(context.Context, noArgs) (string, error) { return original, nil })
	e.startTurn(turn.Config{Provider: p, Models: tinyModels(t), Compaction: sessionCompaction, Tools: []tool.Tool{look}})
	session := newID("read-session")
	p.main.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c-old", Name: "look", Input: `{}`}), llmtest.TextStep("looked"))
	id := newID("read-first")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: smallWindow, Tools: []string{"look"}, Messages: []events.Message{events.UserText("look")}})
	if end := w.waitEnd(); end.Type != events.TypeTurnCompleted {
		t.Fatalf("first turn: %s %s", end.Type, end.Data)
	}
	for i := 0; loadSession(t, e, session).Compaction == nil; i++ {
		if i == 20 {
			t.Fatal("no compaction in 20 turns")
		}
		textTurn(t, e, p, session, i)
	}
	if c := loadSession(t, e, session).Compaction; c.To <= 2 {
		t.Fatalf("the compaction covers [0, %d), not the result at position 2", c.To)
	}
	p.main.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c-read", Name: compact.ReadResultTool, Input: `{"call_id": "c-old"}`}), llmtest.TextStep("read"))
	id = newID("read-later")
	w = e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: smallWindow, Messages: []events.Message{events.UserText("read c-old again")}})
	if end := w.waitEnd(); end.Type != events.TypeTurnCompleted {
		t.Fatalf("the reading turn: %s %s", end.Type, end.Data)
	}
	reqs := p.main.Requests()
	last := reqs[len(reqs)-1].Messages
	_, results := toolUses(last)
	r, ok := results["c-read"]
	if !ok || r.IsError || !strings.HasSuffix(r.Content, "\n"+original) {
		t.Fatalf("read_result of c-old answered %+v", r)
	}
}

// A turn request's compaction setting is the session's from then on:
// its later turns compact with the service's default, then the
// session's setting, then their own request's.
func TestSessionKeepsTheCompactionSetting(t *testing.T) {
	e := newEnv(t)
	p := newSummarizing()
	off, on := true, false
	def := sessionCompaction
	def.Disabled = &off
	e.startTurn(turn.Config{Provider: p, Models: tinyModels(t), Compaction: def})
	session := newID("setting-session")
	p.main.Add(llmtest.TextStep("first answer"))
	id := newID("setting-first")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: smallWindow, Compaction: &events.CompactionConfig{Disabled: &on},
		Messages: []events.Message{events.UserText("first question")}})
	if end := w.waitEnd(); end.Type != events.TypeTurnCompleted {
		t.Fatalf("first turn: %s %s", end.Type, end.Data)
	}
	if c := loadSession(t, e, session).CompactionConfig; c == nil || c.Disabled == nil || *c.Disabled {
		t.Fatalf("the session's compaction setting: %+v", c)
	}
	// The later requests set nothing: the session's setting turns
	// compaction on over the service's default.
	for i := 0; loadSession(t, e, session).Compaction == nil; i++ {
		if i == 20 {
			t.Fatal("no compaction in 20 turns: the session's setting was not applied")
		}
		textTurn(t, e, p, session, i)
	}
	if p.sum.Calls() != 1 {
		t.Fatalf("%d summarizer calls, want 1", p.sum.Calls())
	}
}

// A session compacted on demand (CompactSession) keeps the compaction:
// its next turn reads it and the originals after it, with no summary of
// its own, and reads no original before it.
func TestCompactSessionOnDemand(t *testing.T) {
	e := newEnv(t)
	p := newSummarizing()
	svc := e.startTurn(turn.Config{Provider: p, Models: tinyModels(t), Compaction: sessionCompaction})
	session := newID("on-demand")
	for i := 0; i < 4; i++ {
		textTurn(t, e, p, session, i)
	}
	if s := loadSession(t, e, session); s.Compaction != nil || p.sum.Calls() != 0 {
		t.Fatalf("4 turns compacted already: %+v", s.Compaction)
	}
	ctx := natstest.Context(t)
	if _, err := turn.CompactSession(ctx, e.js, p, "no-such-session", turn.CompactOptions{}); !errors.Is(err, turn.ErrNoSession) {
		t.Fatalf("an unknown session: %v", err)
	}
	c, err := turn.CompactSession(ctx, e.js, p, session, turn.CompactOptions{Limits: tinyModels(t).Lookup, Compaction: sessionCompaction})
	if err != nil || c == nil {
		t.Fatalf("CompactSession: %+v %v", c, err)
	}
	if p.sum.Calls() != 1 || c.Model != smallWindow || !strings.HasSuffix(c.Messages[0].Text(), sessionSummary) || c.To == 0 || c.To >= 8 {
		t.Fatalf("the compaction: to %d, model %q, %d summarizer calls, %q", c.To, c.Model, p.sum.Calls(), c.Messages[0].Text())
	}
	before := loadSession(t, e, session)
	if before.Compaction == nil || before.Compaction.ID != c.ID {
		t.Fatalf("the session's compaction: %+v, want %s", before.Compaction, c.ID)
	}
	var read atomic.Int64
	turn.Transcripts(svc).SetReadObserver(func(_ string, _, bytes int) { read.Add(int64(bytes)) })
	textTurn(t, e, p, session, 4)
	reqs := p.main.Requests()
	input := reqs[len(reqs)-1].Messages[len(reqs[len(reqs)-1].Messages)-1]
	sameMessages(t, "the next turn's model call", reqs[len(reqs)-1].Messages, projected(c, append(before.Messages, input)))
	if p.sum.Calls() != 1 {
		t.Fatalf("the next turn summarized again: %d calls", p.sum.Calls())
	}
	if got, want := read.Load(), itemBytes(t, before.Messages[c.To:]); got != want {
		t.Fatalf("the next turn read %d bytes; the originals after position %d are %d", got, c.To, want)
	}
}
