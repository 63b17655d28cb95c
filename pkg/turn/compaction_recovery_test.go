package turn_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/compact"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

// Usage the scripted calls of the crash tests report. The turn's model
// calls report no input tokens: the compaction is then estimated by the
// estimator alone (a reported count would scale it).
const (
	stepInput, stepOutput       = 0, 10
	summaryInput, summaryOutput = 1000, 50
)

// crashingSummarizer answers the summarizer's calls (compact.SummarySystem)
// with sessionSummary and the turn's calls from main; the first
// summarizer call runs onFirst before it answers.
type crashingSummarizer struct {
	main    *llmtest.Scripted
	sums    *atomic.Int64
	onFirst func()
}

func (p crashingSummarizer) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	if req.System != compact.SummarySystem {
		return p.main.Stream(ctx, req)
	}
	if p.sums.Add(1) == 1 {
		p.onFirst()
	}
	return llmtest.NewScripted(llmtest.TextStep(sessionSummary).WithUsage(summaryInput, summaryOutput)).Stream(ctx, req)
}

// A replica that cannot commit a compaction after its summarizer
// answered (the state bucket refuses the checkpoint that holds it, as
// when the replica is killed there) hands the turn off; the replica that
// continues it from the checkpoint before summarizes again. The turn's
// events hold one llmw.turn.compacted and one llmw.usage of its summary,
// the model reads one summary, and the turn's usage counts the summary
// once: the first summary's charge was never committed
// (docs/architecture.md, "Compaction", Durability).
func TestCompactionCommittedOnceAfterACrash(t *testing.T) {
	e := newEnv(t)
	id := newID("compact-crash")
	// Nine steps of 700 bytes of text and a call pass the 4,000-token
	// window's threshold once (sessionCompaction: room 2,000, compaction
	// above 1,600 down to 1,000), then the answer; clearing the short
	// results frees too little, so the compaction summarizes.
	const calls = 9
	main := llmtest.NewScripted()
	for i := range calls {
		main.Add(llmtest.TextToolStep(strings.Repeat("t", 700), llmtest.ToolCallSpec{ID: fmt.Sprintf("call-%d", i), Name: "look", Input: `{}`}).WithUsage(stepInput, stepOutput))
	}
	main.Add(llmtest.TextStep("done").WithUsage(stepInput, stepOutput))
	restore := make(chan func(), 1)
	p := crashingSummarizer{main: main, sums: new(atomic.Int64), onFirst: func() { restore <- e.refuseStateWrites() }}
	look := tool.Must("look", "looks", func(context.Context, noArgs) (string, error) { return "seen", nil })
	e.startTurn(turn.Config{Instance: "a", AckWait: 2 * time.Second, RetryTimeout: 300 * time.Millisecond,
		Provider: p, Models: tinyModels(t), Compaction: sessionCompaction, Tools: []tool.Tool{look}})
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: smallWindow, MaxSteps: calls + 1, Tools: []string{"look"},
		Messages: []events.Message{events.UserText("look, again and again")}})
	var undo func()
	select {
	case undo = <-restore:
	case <-time.After(waitFor):
		t.Fatalf("no summarizer call:%s", describe(w.events()))
	}
	// The request comes back once the run handed the turn off.
	e.awaitRedelivery()
	undo()
	done := w.completed()
	if got := done.Messages[len(done.Messages)-1].Text(); got != "done" {
		t.Fatalf("final text %q", got)
	}
	if n := p.sums.Load(); n != 2 {
		t.Fatalf("the summarizer was called %d times, want 2 (once before the crash, once after)", n)
	}
	evs := w.events()
	if n := count(evs, events.TypeTurnCompacted); n != 1 {
		t.Fatalf("%d llmw.turn.compacted, want 1:%s", n, describe(evs))
	}
	c := decode[events.TurnCompacted](t, evs[find(evs, events.TypeTurnCompacted)])
	if c.ID != id+".c1" || !strings.Contains(c.Policy, "summary") {
		t.Fatalf("compaction %+v, want %s.c1 with a summary", c, id)
	}
	var summaries int
	for _, ev := range evs {
		if ev.Type == events.TypeUsage && decode[events.UsageReport](t, ev).Compaction == c.ID {
			summaries++
		}
	}
	if summaries != 1 {
		t.Fatalf("%d llmw.usage of the summary, want 1", summaries)
	}
	// Every model call after the compaction reads one summary.
	reqs := main.Requests()
	last := reqs[len(reqs)-1]
	if n := strings.Count(mustJSON(t, last.Messages), sessionSummary); n != 1 {
		t.Fatalf("the last model call reads the summary %d times, want once", n)
	}
	// The turn's usage: each model call once (calls + 1) and one summary.
	wantIn, wantOut := int64((calls+1)*stepInput+summaryInput), int64((calls+1)*stepOutput+summaryOutput)
	if main.Calls() != calls+1 {
		t.Fatalf("%d model calls, want %d", main.Calls(), calls+1)
	}
	if u := done.Usage; u.InputTokens == nil || *u.InputTokens != wantIn || u.OutputTokens == nil || *u.OutputTokens != wantOut {
		t.Fatalf("the turn's usage %s, want %d input and %d output tokens", mustJSON(t, u), wantIn, wantOut)
	}
	checkSeq(t, evs)
}

// twoTurns answers the calls whose messages hold "TURN-B" from b and the
// others from a; the summarizer's calls (compact.SummarySystem) answer
// sessionSummary, the first once release is closed (started is closed
// when it began).
type twoTurns struct {
	a, b             *llmtest.Scripted
	sums             *atomic.Int64
	started, release chan struct{}
}

func (p twoTurns) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	if req.System == compact.SummarySystem {
		if p.sums.Add(1) == 1 {
			close(p.started)
			select {
			case <-p.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return llmtest.NewScripted(llmtest.TextStep(sessionSummary)).Stream(ctx, req)
	}
	for _, m := range req.Messages {
		if strings.Contains(m.Text(), "TURN-B") {
			return p.b.Stream(ctx, req)
		}
	}
	return p.a.Stream(ctx, req)
}

// While a turn of a session commits a compaction (its summarizer
// answers only once another turn of the session ended), with parallel
// tool calls in each of its steps: the session holds every message of
// both turns once, the compacting turn announces one compaction and its
// later model calls read one summary, and the session's next turn reads
// no message twice.
func TestCompactionWhileTheSessionGoesOn(t *testing.T) {
	e := newEnv(t)
	const steps = 8
	a := llmtest.NewScripted()
	for i := range steps {
		a.Add(llmtest.TextToolStep(fmt.Sprintf("step %d ", i)+strings.Repeat("t", 700),
			llmtest.ToolCallSpec{ID: fmt.Sprintf("a%d-1", i), Name: "look", Input: fmt.Sprintf(`{"n":"a%d-1"}`, i)},
			llmtest.ToolCallSpec{ID: fmt.Sprintf("a%d-2", i), Name: "look", Input: fmt.Sprintf(`{"n":"a%d-2"}`, i)}))
	}
	a.Add(llmtest.TextStep("A done"))
	b := llmtest.NewScripted(llmtest.TextStep("B done"))
	b.SetFallback(llmtest.TextStep("C done"))
	p := twoTurns{a: a, b: b, sums: new(atomic.Int64), started: make(chan struct{}), release: make(chan struct{})}
	type lookArgs struct {
		N string `json:"n"`
	}
	look := tool.Must("look", "looks", func(_ context.Context, in lookArgs) (string, error) { return "seen " + in.N, nil })
	e.startTurn(turn.Config{Provider: p, Models: tinyModels(t), Compaction: sessionCompaction, Tools: []tool.Tool{look}})
	session := newID("busy-session")
	idA, idB := newID("turn-a"), newID("turn-b")
	wa, wb := e.watch(idA), e.watch(idB)
	e.submit(events.TurnRequest{TurnID: idA, SessionID: session, Model: smallWindow, MaxSteps: steps + 1, Tools: []string{"look"},
		Messages: []events.Message{events.UserText("TURN-A: look, again and again")}})
	select {
	case <-p.started:
	case <-time.After(waitFor):
		t.Fatalf("turn A did not compact:%s", describe(wa.events()))
	}
	e.submit(events.TurnRequest{TurnID: idB, SessionID: session, Model: smallWindow, Messages: []events.Message{events.UserText("TURN-B: a question")}})
	doneB := wb.completed()
	close(p.release)
	doneA := wa.completed()

	evs := wa.events()
	if n := count(evs, events.TypeTurnCompacted); n != 1 {
		t.Fatalf("turn A announced %d compactions, want 1:%s", n, describe(evs))
	}
	reqs := a.Requests()
	if n := strings.Count(mustJSON(t, reqs[len(reqs)-1].Messages), sessionSummary); n != 1 {
		t.Fatalf("turn A's last model call reads the summary %d times, want once", n)
	}
	// The session: each turn's messages once, B's first (it ended first).
	want := map[string]int{}
	for _, m := range []events.Message{events.UserText("TURN-B: a question"), events.AssistantText("B done"), events.UserText("TURN-A: look, again and again")} {
		want[mustJSON(t, m)]++
	}
	// A: its input, per step the assistant's message and one tool
	// message with both results, the answer.
	ownA := 1 + 2*steps + 1
	if doneA.TranscriptLength != ownA || doneB.TranscriptLength != 2 {
		t.Fatalf("transcript lengths: A %d, B %d; want %d and 2", doneA.TranscriptLength, doneB.TranscriptLength, ownA)
	}
	s := loadSession(t, e, session)
	if len(s.Messages) != 2+ownA {
		t.Fatalf("the session holds %d messages, want %d:\n%s", len(s.Messages), 2+ownA, roles(s.Messages))
	}
	got := map[string]int{}
	for _, m := range s.Messages {
		got[mustJSON(t, m)]++
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("the session holds %.80s %d times, want %d", k, got[k], n)
		}
	}
	for k, n := range got {
		if n != 1 {
			t.Errorf("the session holds %.80s %d times", k, n)
		}
	}
	for i := range steps {
		for _, id := range []string{fmt.Sprintf("a%d-1", i), fmt.Sprintf("a%d-2", i)} {
			if !strings.Contains(mustJSON(t, s.Messages), `"seen `+id+`"`) {
				t.Errorf("the session lost the result of %s", id)
			}
		}
	}
	// The session's next turn reads no message twice.
	idC := newID("turn-c")
	wc := e.watch(idC)
	e.submit(events.TurnRequest{TurnID: idC, SessionID: session, Model: smallWindow, Messages: []events.Message{events.UserText("TURN-B again")}})
	wc.completed()
	br := b.Requests()
	seen := map[string]bool{}
	for _, m := range br[len(br)-1].Messages {
		k := mustJSON(t, m)
		if seen[k] {
			t.Errorf("the next turn's model call reads %.80s twice", k)
		}
		seen[k] = true
	}
}

// A turn of a session paused for approval, with a parallel call beside
// the paused one, does not keep the session from compacting: the
// session's other turns compact meanwhile; resumed later, the turn ends
// with its calls and their results whole in the session; and the
// session's later turns compact again, never splitting a call from its
// result.
func TestCompactionAroundAPausedTurn(t *testing.T) {
	e := newEnv(t)
	p := newSummarizing()
	chain := &hook.Chain{}
	if err := chain.BeforeToolCall(hook.Func[hook.ToolCallInput, hook.BeforeToolCallResult](
		func(context.Context, *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
			return hook.BeforeToolCallResult{Action: hook.ToolPause, Reason: "needs approval"}, nil
		}), hook.Options{Name: "approve", Matcher: "^approve_me$"}); err != nil {
		t.Fatal(err)
	}
	approveMe := tool.Must("approve_me", "needs a person", func(context.Context, noArgs) (string, error) { return "APPROVED " + strings.Repeat("r", 1500), nil })
	look := tool.Must("look", "looks", func(context.Context, noArgs) (string, error) { return "LOOKED", nil })
	e.startTurn(turn.Config{Provider: p, Models: tinyModels(t), Compaction: sessionCompaction, Hooks: chain, Tools: []tool.Tool{approveMe, look}})
	session := newID("paused-session")
	idA := newID("paused-turn")
	wa := e.watch(idA)
	p.main.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "ask", Name: "approve_me", Input: `{}`}, llmtest.ToolCallSpec{ID: "peek", Name: "look", Input: `{}`}))
	e.submit(events.TurnRequest{TurnID: idA, SessionID: session, Model: smallWindow, Tools: []string{"approve_me", "look"},
		Messages: []events.Message{events.UserText("ask, and look")}})
	if end := wa.waitEnd(); end.Type != events.TypeTurnPaused {
		t.Fatalf("turn A: %s %s", end.Type, end.Data)
	}
	// The session's other turns go on and compact.
	i := 0
	for ; loadSession(t, e, session).Compaction == nil; i++ {
		if i == 20 {
			t.Fatal("no compaction in 20 turns")
		}
		textTurn(t, e, p, session, i)
	}
	first := loadSession(t, e, session).Compaction.ID
	// Resumed later, the paused turn ends.
	p.main.Add(llmtest.TextStep("A done"))
	e.resume(events.ResumeRequest{TurnID: idA, Decisions: map[string]events.Decision{"ask": {Kind: events.DecisionApprove}}})
	wa.waitFor("turn A's end", func(evs []ev) bool { return find(evs, events.TypeTurnCompleted) >= 0 })
	s := loadSession(t, e, session)
	all := mustJSON(t, s.Messages)
	for _, want := range []string{`"APPROVED `, `"LOOKED"`, `"id":"ask"`, `"id":"peek"`} {
		if strings.Count(all, want) != 1 {
			t.Fatalf("the session holds %s %d times, want once", want, strings.Count(all, want))
		}
	}
	// Later turns compact again; each model call holds every call with its
	// result.
	for ; loadSession(t, e, session).Compaction.ID == first; i++ {
		if i == 40 {
			t.Fatal("no compaction after the paused turn ended")
		}
		textTurn(t, e, p, session, i)
		reqs := p.main.Requests()
		calls, results := 0, 0
		for _, m := range reqs[len(reqs)-1].Messages {
			calls += len(m.ToolUses())
			for _, part := range m.Content {
				if part.Type == events.PartToolResult {
					results++
				}
			}
		}
		if calls != results {
			t.Fatalf("turn %d's model call reads %d calls and %d results", i, calls, results)
		}
	}
}

// A replica stopped after it committed a compaction and announced it,
// during the model call that reads it: the replica that continues the
// turn reads the committed compaction (no second summary) and announces
// it again, and the turn's events hold it once, with its summary's
// usage once.
func TestCompactionAnnouncedOnceAcrossRecovery(t *testing.T) {
	e := newEnv(t)
	p := newSummarizing()
	const calls = 9
	for i := range calls {
		p.main.Add(llmtest.TextToolStep(fmt.Sprintf("step %d ", i)+strings.Repeat("t", 700),
			llmtest.ToolCallSpec{ID: fmt.Sprintf("call-%d", i), Name: "look", Input: `{}`}).WithUsage(stepInput, stepOutput))
	}
	p.main.Add(llmtest.TextStep("done").WithUsage(stepInput, stepOutput))
	p.sum.SetFallback(llmtest.TextStep(sessionSummary).WithUsage(summaryInput, summaryOutput))
	// The model call after the summary blocks.
	p.armed.Store(true)
	look := tool.Must("look", "looks", func(context.Context, noArgs) (string, error) { return "seen", nil })
	cfg := turn.Config{Instance: "a", Logger: quietLogger(), AckWait: 2 * time.Second, Provider: p, Models: tinyModels(t), Compaction: sessionCompaction, Tools: []tool.Tool{look}}
	a, err := turn.New(e.connect(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	id := newID("announced")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: smallWindow, MaxSteps: calls + 1, Tools: []string{"look"},
		Messages: []events.Message{events.UserText("look, again and again")}})
	w.waitFor("the compaction and the blocked model call", func(evs []ev) bool {
		return find(evs, events.TypeTurnCompacted) >= 0 && p.blocked.Calls() > 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx) // too short: the turn is handed off
	cfg.Instance = "b"
	e.startTurn(cfg)
	done := w.completed()
	if got := done.Messages[len(done.Messages)-1].Text(); got != "done" {
		t.Fatalf("final text %q", got)
	}
	if n := p.sum.Calls(); n != 1 {
		t.Fatalf("%d summarizer calls, want 1", n)
	}
	evs := w.events()
	if n := count(evs, events.TypeTurnCompacted); n != 1 {
		t.Fatalf("%d llmw.turn.compacted, want 1:%s", n, describe(evs))
	}
	summaries := 0
	for _, ev := range evs {
		if ev.Type == events.TypeUsage && decode[events.UsageReport](t, ev).Compaction == id+".c1" {
			summaries++
		}
	}
	if summaries != 1 {
		t.Fatalf("%d llmw.usage of the summary, want 1", summaries)
	}
	if u := done.Usage; u.InputTokens == nil || *u.InputTokens != int64((calls+1)*stepInput+summaryInput) {
		t.Fatalf("the turn's usage %s, want %d input tokens", mustJSON(t, u), (calls+1)*stepInput+summaryInput)
	}
	checkSeq(t, evs)
}

// summariesApart answers the summarizer's calls (compact.SummarySystem)
// with sessionSummary and the others from main.
type summariesApart struct{ main *llmtest.Scripted }

func (p summariesApart) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	if req.System == compact.SummarySystem {
		return llmtest.NewScripted(llmtest.TextStep(sessionSummary)).Stream(ctx, req)
	}
	return p.main.Stream(ctx, req)
}

// A replica dies while the model streams, after a read-only call started
// early on toolexec; the replica that continues the turn has a smaller
// window for the model (its model table), compacts before it makes the
// model call again, and takes the call over across the compaction: the
// call runs once, its result is in the transcript once, and the model
// call made again reads the summary.
func TestCompactionKeepsAnEagerCallOnRecovery(t *testing.T) {
	e := newEnv(t)
	half := llmtest.Script{Events: append([]events.Event{events.StatusEvent{Status: events.StatusStarted}},
		llmtest.ToolUseBlockEvents(0, llmtest.ToolCallSpec{ID: "c1", Name: "look", Input: `{"q":"x"}`})...),
		WaitForCancel: true}
	main := llmtest.NewScripted(half, llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "look", Input: `{"q":"x"}`}), llmtest.TextStep("all done"))
	p := summariesApart{main: main}
	var runs atomic.Int64
	release := make(chan struct{})
	look := tool.Must("look", "reads", func(ctx context.Context, a lookArgs) (string, error) {
		runs.Add(1)
		select {
		case <-release:
			return "looked at " + a.Q, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}, tool.WithReadOnly())
	e.startToolexec(toolexec.Config{}, look)
	// About 1,700 tokens: below the threshold of a's 32k-token window,
	// above that of b's 4,000-token one (1,600).
	var msgs []events.Message
	for i := range 2 {
		msgs = append(msgs, events.UserText(fmt.Sprintf("question %d ", i)+strings.Repeat("q", 1500)), events.AssistantText(fmt.Sprintf("answer %d ", i)+strings.Repeat("a", 1500)))
	}
	msgs = append(msgs, events.UserText("go"))
	ncA := e.connect()
	a, err := turn.New(ncA, turn.Config{Instance: "a", Logger: quietLogger(), AckWait: time.Second, Provider: p, Models: smallModels(t), Compaction: sessionCompaction})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := newID("eager-compacted")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: smallWindow, Messages: msgs, Tools: []string{"look"}})
	natstest.Eventually(t, "the call to start", func() bool { return runs.Load() == 1 })
	natstest.Eventually(t, "the checkpoint listing the call", func() bool {
		st, ok, err := turn.LoadState(context.Background(), e.js, id)
		return err == nil && ok && st.Checkpoint != nil && len(st.Checkpoint.Eager) == 1
	})
	if n := count(w.events(), events.TypeTurnCompacted); n != 0 {
		t.Fatalf("replica a compacted %d times, want none", n)
	}
	ncA.Close() // the replica is gone

	e.startTurn(turn.Config{Instance: "b", AckWait: time.Second, Provider: p, Models: tinyModels(t), Compaction: sessionCompaction})
	w.waitFor("b's compaction", func(evs []ev) bool { return find(evs, events.TypeTurnCompacted) >= 0 })
	close(release)
	done := w.completed()
	_, results := toolUses(done.Messages)
	if len(results) != 1 || results["c1"].Content != "looked at x" {
		t.Fatalf("results %+v, want c1's", results)
	}
	if runs.Load() != 1 {
		t.Fatalf("look ran %d times, want once", runs.Load())
	}
	evs := w.events()
	if n := count(evs, events.TypeTurnCompacted); n != 1 {
		t.Fatalf("%d compactions, want 1:%s", n, describe(evs))
	}
	if got := callIDs(t, evs, events.TypeToolResult); len(got) != 1 || got[0] != "c1" {
		t.Fatalf("llmw.tool.result for %v, want c1 once:%s", got, describe(evs))
	}
	if got := callIDs(t, evs, events.TypeToolCancelled); len(got) != 0 {
		t.Fatalf("llmw.tool.cancelled for %v, want none", got)
	}
	reqs := main.Requests()
	if again := reqs[1].Messages; !strings.Contains(again[0].Text(), sessionSummary) || again[len(again)-1].Text() != "go" {
		t.Fatalf("the model call made again reads %s", roles(again))
	}
	if n := e.storedResults(id, "c1"); n != 1 {
		t.Fatalf("%d results of c1 stored, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx)
}
