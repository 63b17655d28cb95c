package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/llmworker/llmworker/pkg/compact"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooktest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/price"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// A 32k-token model: its room is 32768 − 4096 (max output) − 1024
// (llm.DefaultReserve: 2% of the window, at least 1024) = 27648 tokens; the turn compacts above 0.8 of
// it (22118) down to 0.5 of it (13824) if it can, and keeps the newest
// quarter (6912 tokens) as it is.
const (
	window32k = 32768
	maxOut32k = 4096
	room32k   = window32k - maxOut32k - 1024
)

func limits32k(string) (llm.ModelLimits, bool) {
	return llm.ModelLimits{ContextWindow: window32k, MaxOutputTokens: maxOut32k}, true
}

// router sends the summarizer's calls (compact.SummarySystem) to
// summarize and the turn's model calls to main, recording both.
type router struct {
	main *llmtest.Scripted

	mu        sync.Mutex
	summaries []llm.Request
	// summaryUsage is what each summarizer call reports.
	summaryIn, summaryOut int64
}

func (p *router) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	if req.System != compact.SummarySystem {
		return p.main.Stream(ctx, req)
	}
	p.mu.Lock()
	p.summaries = append(p.summaries, *req)
	n := len(p.summaries)
	p.mu.Unlock()
	sc := llmtest.TextStep(fmt.Sprintf("summary %d: the user sent long texts, the assistant answered.", n)).WithUsage(p.summaryIn, p.summaryOut)
	return llmtest.NewScripted(sc).Stream(ctx, req)
}

func (p *router) summaryCalls() []llm.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]llm.Request(nil), p.summaries...)
}

// requestTokens is the estimate of what a request's context holds: its
// messages, system prompt and tool definitions.
func requestTokens(req llm.Request) int64 {
	n := llm.EstimateMessages(req.Messages) + compact.EstimateText(llm.EstimateMessages, req.System)
	if len(req.Tools) > 0 {
		b, _ := json.Marshal(req.Tools)
		n += compact.EstimateText(llm.EstimateMessages, string(b))
	}
	return n
}

// checkUnits fails when a tool_use of the request has no result in it, or
// a result no tool_use: a compaction split a unit.
func checkUnits(t *testing.T, i int, req llm.Request) {
	t.Helper()
	uses, results := map[string]bool{}, map[string]bool{}
	for _, m := range req.Messages {
		for _, p := range m.Content {
			switch p.Type {
			case events.PartToolUse:
				uses[p.ID] = true
			case events.PartToolResult:
				results[p.ToolUseID] = true
			}
		}
	}
	for id := range uses {
		if !results[id] {
			t.Errorf("request %d: tool_use %s without its result", i, id)
		}
	}
	for id := range results {
		if !uses[id] {
			t.Errorf("request %d: result of %s without its tool_use", i, id)
		}
	}
}

func compactions(rec *recorder) []events.TurnCompacted {
	var out []events.TurnCompacted
	for _, d := range rec.ofType(events.TypeTurnCompacted) {
		out = append(out, d.(events.TurnCompacted))
	}
	return out
}

// A session of 40 KB user turns on a 32k-token model goes on: each turn
// reads the compaction the turn before left (RunCompacted). A 40 KB
// message is 10,000 tokens and a turn adds it and a short answer: turns
// 1 and 2 fit (20,000 < 22,118), turn 3 (30,000) compacts, leaving the
// summary and its own message (10,000 ≥ 6,912, the newest quarter kept),
// turn 4 fits again (summary + 2 messages + answer), turn 5 compacts, and
// so on: every odd turn from 3 on compacts, to the position of its own
// message (2 × (turn − 1)).
func TestCompactionSessionOf40KBTurns(t *testing.T) {
	const turns = 12
	main := llmtest.NewScripted()
	for range turns {
		main.Add(llmtest.TextStep("noted").WithUsage(100, 10))
	}
	p := &router{main: main, summaryIn: 1000, summaryOut: 50}
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Model: "test:m32k", ModelLimits: limits32k, Observer: rec})

	var (
		history []events.Message
		active  *events.Compaction
		seen    int
	)
	for turn := 1; turn <= turns; turn++ {
		history = append(history, events.UserText(strings.Repeat(string(rune('a'+turn%26)), 40_000)))
		res, err := w.RunCompacted(context.Background(), history, active)
		if err != nil || res.Status != worker.StatusCompleted {
			t.Fatalf("turn %d: %v %s %s", turn, err, res.Status, res.Reason)
		}
		if len(res.Messages) != 2*turn {
			t.Fatalf("turn %d: transcript has %d messages, want every original (%d)", turn, len(res.Messages), 2*turn)
		}
		history, active = res.Messages, res.Compaction
		cs := compactions(rec)
		wantNew := turn >= 3 && turn%2 == 1
		if got := len(cs) - seen; got != map[bool]int{true: 1, false: 0}[wantNew] {
			t.Fatalf("turn %d: %d compactions, want compaction %v", turn, got, wantNew)
		}
		if wantNew {
			c := cs[len(cs)-1]
			if c.To != 2*(turn-1) || !strings.HasSuffix(c.Policy, "summary") || c.TokensAfter > room32k/2 || c.TokensBefore <= room32k*8/10 {
				t.Errorf("turn %d: compaction %+v, want to=%d, a summary, tokens from above %d to at most %d", turn, c, 2*(turn-1), room32k*8/10, room32k/2)
			}
			if c.Usage == nil || *c.Usage.InputTokens != 1000 {
				t.Errorf("turn %d: compaction usage %+v, want the summarizer's", turn, c.Usage)
			}
			// The summarizer's usage is in the turn's.
			if *res.Usage.InputTokens != 1100 || *res.Usage.OutputTokens != 60 {
				t.Errorf("turn %d: usage in %d out %d, want the call's and the summarizer's (1100, 60)", turn, *res.Usage.InputTokens, *res.Usage.OutputTokens)
			}
		} else if *res.Usage.InputTokens != 100 {
			t.Errorf("turn %d: usage in %d, want 100", turn, *res.Usage.InputTokens)
		}
		seen = len(cs)
	}
	for i, req := range main.Requests() {
		if n := requestTokens(req); n > room32k {
			t.Errorf("request %d: ~%d tokens, more than the room of %d", i, n, room32k)
		}
	}
	if n := len(p.summaryCalls()); n != (turns-1)/2 {
		t.Errorf("%d summarizer calls, want %d", n, (turns-1)/2)
	}
	// The summarizer's tokens never stream as the assistant's.
	for _, d := range rec.ofType(events.TypeTextComplete) {
		if strings.Contains(d.(events.TextComplete).Text, "summary") {
			t.Errorf("summarizer text reached the observers: %q", d.(events.TextComplete).Text)
		}
	}
}

// fetchTool returns 20 KB for every call: the block of the call's number.
func fetchTool(t *testing.T) tool.Tool {
	f, err := tool.New("fetch", "fetches a page", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (string, error) {
		return bigResult(in.N), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func bigResult(n int) string {
	head := fmt.Sprintf("page %d:", n)
	return head + strings.Repeat(fmt.Sprintf("%c", 'A'+n%26), 20_000-len(head))
}

// A turn of 200 tool calls with 20 KB results (5,000 tokens each) on a
// 32k-token model completes: the results are offloaded, then cleared,
// then summarized as the calls pile up; every request fits the room and
// never splits a call from its result; read_result reads an offloaded
// result back from the originals.
func TestCompactionTurnOfManyToolCalls(t *testing.T) {
	const calls = 200
	main := llmtest.NewScripted()
	for i := 1; i <= calls; i++ {
		main.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: fmt.Sprintf("c%d", i), Name: "fetch", Input: fmt.Sprintf(`{"n":%d}`, i)}))
	}
	// The model reads call 1's result from byte 19,990 on.
	main.Add(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "r", Name: compact.ReadResultTool, Input: `{"call_id":"c1","offset":19990}`}))
	main.Add(llmtest.TextStep("done"))
	p := &router{main: main, summaryIn: 500, summaryOut: 20}
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Model: "test:m32k", ModelLimits: limits32k, Observer: rec,
		Tools: []tool.Tool{fetchTool(t)}, MaxSteps: calls + 2, NoEagerStart: true})
	res := mustRun(t, w, events.UserText("fetch the pages"))
	if res.Status != worker.StatusCompleted || res.Steps != calls+2 {
		t.Fatalf("status %s (%s), %d steps; want completed after %d", res.Status, res.Reason, res.Steps, calls+2)
	}
	reqs := main.Requests()
	for i, req := range reqs {
		if n := requestTokens(req); n > room32k {
			t.Errorf("request %d: ~%d tokens, more than the room of %d", i, n, room32k)
		}
		checkUnits(t, i, req)
	}
	policies := map[string]int{}
	for _, c := range compactions(rec) {
		policies[c.Policy]++
	}
	for _, want := range []string{"offload", "offload,clear", "offload,clear,summary"} {
		if policies[want] == 0 {
			t.Errorf("no compaction of policy %q; got %v", want, policies)
		}
	}
	// The first compaction comes when five results (25,000 tokens) pass
	// 22,118, before call 6: the newest two calls (10,000 tokens ≥ 6,912)
	// stay, the three before are offloaded (a 1,024-byte preview each).
	cs := compactions(rec)
	if len(cs) == 0 {
		t.Fatal("no compaction")
	}
	first := cs[0]
	if first.Step != 6 || first.Policy != "offload" || first.To != 1+2*3 {
		t.Errorf("first compaction %+v, want step 6, offload, to 7", first)
	}
	offloaded := reqs[5].Messages[2].Content[0].Content
	if !strings.HasPrefix(offloaded, bigResult(1)[:1024]+"\n[offloaded: 1024 of 20000 bytes shown") {
		t.Errorf("call 1's result in request 6 = %.1100q…, want its first 1024 bytes and the offload note", offloaded)
	}
	if !hasTool(reqs[5], compact.ReadResultTool) || hasTool(reqs[4], compact.ReadResultTool) {
		t.Errorf("read_result offered in requests 5, 6: %v %v; want only once a compaction is active", hasTool(reqs[4], compact.ReadResultTool), hasTool(reqs[5], compact.ReadResultTool))
	}
	last := res.Messages[len(res.Messages)-2]
	if got, want := last.Content[0].Content, "[bytes 19990 to 20000 of 20000 of the result of call c1]\n"+bigResult(1)[19990:]; got != want {
		t.Errorf("read_result answered %q, want %q", got, want)
	}
	if len(res.Messages) != 2+2*(calls+1) {
		t.Errorf("transcript has %d messages, want all %d originals", len(res.Messages), 2+2*(calls+1))
	}
}

func hasTool(req llm.Request, name string) bool {
	for _, d := range req.Tools {
		if d.Name == name {
			return true
		}
	}
	return false
}

// overflowErr is the error of a provider that refused the context as too
// long.
var overflowErr = &llm.APIError{ErrKind: llm.KindContextOverflow, Status: 400, Err: errors.New("prompt is too long")}

// A provider's context_overflow makes the turn compact and make the call
// once more; a second refusal fails the turn with context_overflow (no
// third call). The model's window is unknown, so only the refusal makes
// the turn compact.
func TestCompactionOverflowRetriesOnce(t *testing.T) {
	msgs := []events.Message{}
	for i := range 6 {
		msgs = append(msgs, events.UserText(strings.Repeat("x", 8000)), events.AssistantText(fmt.Sprint("answer ", i)))
	}
	msgs = append(msgs, events.UserText("and now?"))

	t.Run("retry answers", func(t *testing.T) {
		main := llmtest.NewScripted(llmtest.FailStep(overflowErr), llmtest.TextStep("fine"))
		p := &router{main: main}
		rec := &recorder{}
		w := mustNew(t, worker.Config{Provider: p, Model: "test:m", Observer: rec})
		res := mustRun(t, w, msgs...)
		if res.Status != worker.StatusCompleted {
			t.Fatalf("status %s (%s %s), want completed", res.Status, res.Code, res.Reason)
		}
		reqs := main.Requests()
		if len(reqs) != 2 || len(compactions(rec)) != 1 {
			t.Fatalf("%d calls, %d compactions; want 2 and 1", len(reqs), len(compactions(rec)))
		}
		// The retry is at most ForcedShare of the refused request.
		if a, b := requestTokens(reqs[0]), requestTokens(reqs[1]); float64(b) > compact.ForcedShare*float64(a) {
			t.Errorf("retry has ~%d tokens, the refused call ~%d: want at most %v of it", b, a, compact.ForcedShare)
		}
	})
	t.Run("second refusal fails", func(t *testing.T) {
		main := llmtest.NewScripted(llmtest.FailStep(overflowErr), llmtest.FailStep(overflowErr), llmtest.TextStep("never"))
		w := mustNew(t, worker.Config{Provider: &router{main: main}, Model: "test:m", StepAttempts: 5})
		res := mustRun(t, w, msgs...)
		if res.Status != worker.StatusFailed || res.Code != worker.CodeContextOverflow || !errors.Is(res.Err(), worker.ErrContextOverflow) {
			t.Fatalf("status %s code %s (%s), want failed context_overflow", res.Status, res.Code, res.Reason)
		}
		if main.Calls() != 2 {
			t.Errorf("%d calls, want 2 (the refused call and one retry)", main.Calls())
		}
	})
	t.Run("disabled fails at once", func(t *testing.T) {
		main := llmtest.NewScripted(llmtest.FailStep(overflowErr), llmtest.TextStep("never"))
		w := mustNew(t, worker.Config{Provider: &router{main: main}, Model: "test:m", Compaction: events.CompactionConfig{Disabled: ptr(true)}})
		res := mustRun(t, w, msgs...)
		if res.Code != worker.CodeContextOverflow || main.Calls() != 1 {
			t.Fatalf("code %s after %d calls, want context_overflow after 1", res.Code, main.Calls())
		}
	})
}

// A single message larger than the room fails the turn with
// context_overflow naming it, before any provider call.
func TestCompactionMessageAboveWindow(t *testing.T) {
	main := llmtest.NewScripted(llmtest.TextStep("never"))
	w := mustNew(t, worker.Config{Provider: &router{main: main}, Model: "test:m32k", ModelLimits: limits32k})
	res := mustRun(t, w, events.UserText("hi"), events.AssistantText("hello"), events.UserText(strings.Repeat("y", 4*room32k+400)))
	if res.Code != worker.CodeContextOverflow || main.Calls() != 0 {
		t.Fatalf("code %s (%s) after %d calls, want context_overflow before any", res.Code, res.Reason, main.Calls())
	}
	if !strings.Contains(res.Reason, "transcript position 2 (user)") {
		t.Errorf("reason %q does not name the message at position 2", res.Reason)
	}
}

// A run continued from the checkpoint written after a compaction does
// not compact again, and sends the same projection. The checkpoint
// commits the compaction: the run that wrote it announces it (and its
// summary's usage) after the write, and the continued run, which
// cannot know whether that happened, announces it again with the same
// id, its summary charged once in the turn's usage.
func TestCompactionCheckpointContinues(t *testing.T) {
	msgs := []events.Message{}
	for i := range 3 {
		msgs = append(msgs, events.UserText(strings.Repeat(string(rune('a'+i)), 40_000)), events.AssistantText("ok"))
	}
	msgs = append(msgs, events.UserText("go on"))
	var cps []*worker.Checkpoint
	// announcedAt: how many llmw.turn.compacted the observer had seen
	// when each checkpoint was written.
	var announcedAt []int
	first := &recorder{}
	main := llmtest.NewScripted(llmtest.TextStep("first").WithUsage(30_000, 5))
	p := &router{main: main, summaryIn: 20_000, summaryOut: 300}
	w := mustNew(t, worker.Config{Provider: p, Model: "test:m32k", ModelLimits: limits32k, TurnID: "t1", Observer: first,
		Checkpoint: func(_ context.Context, cp *worker.Checkpoint) error {
			cps = append(cps, cp)
			announcedAt = append(announcedAt, len(compactions(first)))
			return nil
		}})
	mustRun(t, w, msgs...)
	if len(cps) == 0 || cps[0].Compaction == nil || cps[0].Compaction.ID != "t1.c1" || len(p.summaryCalls()) != 1 {
		t.Fatalf("checkpoints %d, first compaction %+v, summaries %d; want the compaction t1.c1 in the checkpoint before the call", len(cps), cps[0].Compaction, len(p.summaryCalls()))
	}
	if announcedAt[0] != 0 || len(compactions(first)) != 1 {
		t.Fatalf("llmw.turn.compacted: %d before its checkpoint was written, %d in all; want 0 and 1", announcedAt[0], len(compactions(first)))
	}
	if u := cps[0].Usage; u.InputTokens == nil || *u.InputTokens != 20_000 {
		t.Fatalf("the committing checkpoint's usage %+v, want the summary's 20000 input tokens", u)
	}
	// The checkpoint crosses a process boundary as JSON.
	b, err := json.Marshal(cps[0])
	if err != nil {
		t.Fatal(err)
	}
	var cp worker.Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatal(err)
	}
	main2 := llmtest.NewScripted(llmtest.TextStep("again").WithUsage(30_000, 5))
	p2 := &router{main: main2}
	rec := &recorder{}
	w2 := mustNew(t, worker.Config{Provider: p2, Model: "test:m32k", ModelLimits: limits32k, TurnID: "t1", Observer: rec})
	res, err := w2.RunFrom(context.Background(), &cp)
	if err != nil || res.Status != worker.StatusCompleted {
		t.Fatalf("RunFrom: %v %+v", err, res)
	}
	if cs := compactions(rec); len(p2.summaryCalls()) != 0 || len(cs) != 1 || cs[0].ID != "t1.c1" {
		t.Errorf("continued run: %d summarizer calls, compactions %+v; want none and t1.c1 announced again", len(p2.summaryCalls()), cs)
	}
	var summaryUsage int
	for _, d := range rec.ofType(events.TypeUsage) {
		if u := d.(events.UsageReport); u.Compaction == "t1.c1" {
			summaryUsage++
		}
	}
	// The turn's input tokens: the summary's 20000 and the model call's 30000.
	if summaryUsage != 1 || res.Usage.InputTokens == nil || *res.Usage.InputTokens != 50_000 {
		t.Errorf("continued run: %d usage reports of t1.c1, usage %+v; want 1 and 50000 input tokens", summaryUsage, res.Usage)
	}
	if a, b := jsonString(t, main.Requests()[0].Messages), jsonString(t, main2.Requests()[0].Messages); a != b {
		t.Errorf("continued run's projection differs:\n%.300s\n%.300s", a, b)
	}
}

// A call whose result never came (an orphan of a dead tool host) is kept
// as it is by every compaction, and the compactions after it still run.
func TestCompactionKeepsOrphanedCall(t *testing.T) {
	orphan := events.Message{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("lost", "fetch", json.RawMessage(`{"n":0}`))}}
	msgs := []events.Message{events.UserText(strings.Repeat("a", 40_000)), orphan, events.UserText(strings.Repeat("b", 40_000)), events.AssistantText("ok"), events.UserText(strings.Repeat("c", 40_000))}
	main := llmtest.NewScripted(llmtest.TextStep("one"), llmtest.TextStep("two"))
	p := &router{main: main}
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Model: "test:m32k", ModelLimits: limits32k, Observer: rec})
	res := mustRun(t, w, msgs...)
	c1 := res.Compaction
	if c1 == nil || c1.To != 4 || len(c1.Messages) != 2 || jsonString(t, c1.Messages[1]) != jsonString(t, orphan) {
		t.Fatalf("compaction %s, want to=4: the summary, then the orphaned call as it is", jsonString(t, c1))
	}
	msgs = append(res.Messages, events.UserText(strings.Repeat("d", 40_000)), events.AssistantText("ok"), events.UserText(strings.Repeat("e", 40_000)))
	res2, err := w.RunCompacted(context.Background(), msgs, c1)
	if err != nil {
		t.Fatal(err)
	}
	c2 := res2.Compaction
	if c2 == nil || c2.To != 8 || len(c2.Messages) != 2 || jsonString(t, c2.Messages[1]) != jsonString(t, orphan) {
		t.Fatalf("second compaction %s, want to=8 with the orphaned call kept", jsonString(t, c2))
	}
}

// A call paused for approval and resumed later (from its JSON state, in
// another worker) reaches the model whole, with its result: the
// compaction before the next call covers everything before it, never the
// call. keep_recent 100 makes the compaction cover all it may: the span
// ends at the call's unit, the last one.
func TestCompactionAfterApproval(t *testing.T) {
	chain := chainWith(t, func(c *chainT) {
		c.before("approval", hooktest.Always[beforeIn](beforeOut{Action: hook.ToolPause}))
	})
	msgs := []events.Message{events.UserText(text40k('a')), events.AssistantText("ok"), events.UserText(text40k('b')), events.AssistantText("ok"), events.UserText("go")}
	main := llmtest.NewScripted(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "p1", Name: "fetch", Input: `{"n":1}`}), llmtest.TextStep("fetched"))
	cfg := worker.Config{Provider: &router{main: main}, Model: "test:m32k", ModelLimits: limits32k, Hooks: chain, Tools: []tool.Tool{fetchTool(t)},
		Compaction: events.CompactionConfig{KeepRecent: 100}}
	res := mustRun(t, mustNew(t, cfg), msgs...)
	if res.Status != worker.StatusPaused || res.Compaction != nil {
		t.Fatalf("status %s, compaction %v; want paused without one (~20,000 tokens)", res.Status, res.Compaction)
	}
	var state worker.Checkpoint
	if err := json.Unmarshal([]byte(jsonString(t, res.State)), &state); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	cfg.Observer = rec
	res, err := mustNew(t, cfg).Resume(context.Background(), &state, map[string]events.Decision{"p1": {Kind: events.DecisionApprove}})
	if err != nil || res.Status != worker.StatusCompleted {
		t.Fatalf("Resume: %v %+v", err, res)
	}
	// With the 20 KB result the context (~25,000 tokens) passes 22,118.
	cs := compactions(rec)
	if len(cs) != 1 || cs[0].To != 5 {
		t.Fatalf("compactions %+v, want one up to the call's unit (position 5)", cs)
	}
	req := main.Requests()[1]
	n := len(req.Messages)
	if got := req.Messages[n-1].Content[0]; got.ToolUseID != "p1" || got.Content != bigResult(1) || req.Messages[n-2].ToolUses()[0].ID != "p1" {
		t.Errorf("the model did not read the approved call and its whole result last: %.200s", jsonString(t, req.Messages[n-2:]))
	}
	checkUnits(t, 1, req)
}

func text40k(c byte) string { return strings.Repeat(string(c), 40_000) }

// A call started early (Checkpoint.Eager) by a run that died is taken
// over by the run that continues the turn, across the compaction made
// before its model call: the compaction keeps it in the checkpoint,
// and the call is neither cancelled nor run twice.
func TestCompactionKeepsEagerCall(t *testing.T) {
	var msgs []events.Message
	for _, c := range []byte("abc") {
		msgs = append(msgs, events.UserText(text40k(c)), events.AssistantText("ok"))
	}
	msgs = append(msgs, events.UserText("fetch 1"))
	asked := json.RawMessage(`{"n":1}`)
	cp := &worker.Checkpoint{Version: worker.CheckpointVersion, TurnID: "t1", Phase: worker.PhaseModel, Messages: msgs,
		Eager: []worker.EagerCall{{PendingCall: worker.PendingCall{Call: events.ToolCall{ID: "e1", Name: "fetch", Input: asked}, State: worker.CallAllowed}, Asked: asked, Announced: true}}}
	main := llmtest.NewScripted(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "e1", Name: "fetch", Input: `{"n":1}`}), llmtest.TextStep("fetched"))
	var runs int
	fetch, err := tool.New("fetch", "fetches a page", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (string, error) {
		runs++
		return "page", nil
	}, tool.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	var cps []*worker.Checkpoint
	w := mustNew(t, worker.Config{Provider: &router{main: main}, Model: "test:m32k", ModelLimits: limits32k, TurnID: "t1", Tools: []tool.Tool{fetch}, Observer: rec,
		Checkpoint: func(_ context.Context, cp *worker.Checkpoint) error { cps = append(cps, cp); return nil }})
	res, err := w.RunFrom(context.Background(), cp)
	if err != nil || res.Status != worker.StatusCompleted {
		t.Fatalf("RunFrom: %v %+v", err, res)
	}
	if len(compactions(rec)) != 1 || cps[0].Compaction == nil || len(cps[0].Eager) != 1 || cps[0].Eager[0].Call.ID != "e1" {
		t.Fatalf("%d compactions; first checkpoint %s; want the compaction and the early call e1", len(compactions(rec)), jsonString(t, cps[0]))
	}
	if runs != 1 || len(rec.ofType(events.TypeToolCancelled)) != 0 {
		t.Errorf("fetch ran %d times, %d cancelled; want once, none", runs, len(rec.ofType(events.TypeToolCancelled)))
	}
	if got := res.Messages[len(res.Messages)-2].Content[0]; got.ToolUseID != "e1" || got.Content != "page" {
		t.Errorf("result %+v, want e1's", got)
	}
}

// A turn holding only the originals after its compaction (Base) reads an
// older tool result through Config.Originals.
func TestReadResultBeforeBase(t *testing.T) {
	originals := []events.Message{events.UserText("go"), callMsg("old"), resultMsg("old", "the old page"), events.AssistantText("read it")}
	summary := events.UserText("summary: page fetched")
	cp := &worker.Checkpoint{Version: worker.CheckpointVersion, TurnID: "t1", Phase: worker.PhaseModel, Base: 4,
		Compaction: &events.Compaction{ID: "t0.c1", To: 4, Messages: []events.Message{summary}, Policy: "offload,clear,summary", Turn: "t0"},
		Messages:   []events.Message{events.UserText("what did the old page say?")}}
	main := llmtest.NewScripted(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "r", Name: compact.ReadResultTool, Input: `{"call_id":"old","offset":4}`}), llmtest.TextStep("it said: old page"))
	var asked [][2]int
	w := mustNew(t, worker.Config{Provider: &router{main: main}, Model: "test:m",
		Originals: func(_ context.Context, from, to int) ([]events.Message, error) {
			asked = append(asked, [2]int{from, to})
			return originals[from:to], nil
		}})
	res, err := w.RunFrom(context.Background(), cp)
	if err != nil || res.Status != worker.StatusCompleted {
		t.Fatalf("RunFrom: %v %+v", err, res)
	}
	if got, want := res.Messages[2].Content[0].Content, "[bytes 4 to 12 of 12 of the result of call old]\nold page"; got != want {
		t.Errorf("read_result = %q, want %q", got, want)
	}
	if len(asked) != 1 || asked[0] != [2]int{0, 4} {
		t.Errorf("Originals asked for %v, want [0, 4)", asked)
	}
	// The model read the compaction's projection: the summary, then the
	// originals from position 4.
	if first := main.Requests()[0].Messages; len(first) != 2 || first[0].Text() != summary.Text() {
		t.Errorf("first request %s, want the summary and the new question", jsonString(t, first))
	}
}

func callMsg(id string) events.Message {
	return events.Message{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart(id, "fetch", json.RawMessage(`{}`))}}
}

func resultMsg(id, content string) events.Message {
	return events.Message{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart(id, content, false)}}
}

// A fallback to another provider after a provider-native compaction
// reads the originals: the native compaction is only for its provider.
func TestNativeCompactionFallbackReexpands(t *testing.T) {
	msgs := []events.Message{events.UserText("first"), events.AssistantText("one"), events.UserText("second")}
	native := events.Message{Role: events.RoleUser, Content: []events.Part{events.TextPart("[anthropic compaction block]")}}
	cp := &worker.Checkpoint{Version: worker.CheckpointVersion, TurnID: "t1", Phase: worker.PhaseModel, Messages: msgs,
		Compaction: &events.Compaction{ID: "t1.c1", To: 2, Messages: []events.Message{native}, Policy: "native:anthropic", Turn: "t1"}}
	var got []llm.Request
	p := providerFunc(func(req *llm.Request) script {
		got = append(got, *req)
		if strings.HasPrefix(req.Model, "anthropic:") {
			return script{evs: []events.Event{started(), events.ErrorEvent{Code: "overloaded_error", Message: "busy"}, events.StatusEvent{Status: events.StatusFailed}}}
		}
		return textStep("from openai")
	})
	w := mustNew(t, worker.Config{Provider: p, Model: "anthropic:claude", FallbackModels: []string{"openai:gpt"}})
	res, err := w.RunFrom(context.Background(), cp)
	if err != nil || res.Status != worker.StatusCompleted {
		t.Fatalf("RunFrom: %v %+v", err, res)
	}
	if len(got) != 2 || len(got[0].Messages) != 2 || got[0].Messages[0].Text() != native.Text() {
		t.Fatalf("anthropic read %s, want the native compaction and the newest message", jsonString(t, got[0].Messages))
	}
	if jsonString(t, got[1].Messages) != jsonString(t, msgs) {
		t.Errorf("openai read %s, want the originals %s", jsonString(t, got[1].Messages), jsonString(t, msgs))
	}
}

// A compaction is one compact span under the turn's invoke_agent span,
// naming its policy, span and the summarizer's model; a call without a
// compaction makes none.
func TestCompactionSpan(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	msgs := []events.Message{events.UserText(text40k('a')), events.AssistantText("ok"), events.UserText(text40k('b')), events.AssistantText("ok"), events.UserText(text40k('c'))}
	main := llmtest.NewScripted(llmtest.TextStep("one"))
	w := mustNew(t, worker.Config{Provider: &router{main: main, summaryIn: 7, summaryOut: 3}, Model: "test:m32k", ModelLimits: limits32k, TurnID: "t1"})
	mustRun(t, w, msgs...)
	var compacts []sdktrace.ReadOnlySpan
	var agent sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		switch s.Name() {
		case "compact":
			compacts = append(compacts, s)
		case telemetry.OpInvokeAgent:
			agent = s
		}
	}
	if len(compacts) != 1 || agent == nil || compacts[0].Parent().SpanID() != agent.SpanContext().SpanID() {
		t.Fatalf("%d compact spans (invoke_agent %v), want one under invoke_agent", len(compacts), agent != nil)
	}
	for k, want := range map[attribute.Key]string{"llmw.compaction.id": "t1.c1", "llmw.compaction.policy": "offload,clear,summary", "llmw.compaction.to": "4",
		telemetry.GenAIRequestModel: "test:m32k", "gen_ai.usage.input_tokens": "7"} {
		if got, _ := attrValue(compacts[0], k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

// RunAfter runs a turn that holds the transcript from base on: the model
// reads the compaction and the originals after its To, the result's
// messages start at base, and a base the compaction does not cover is
// refused before anything runs.
func TestRunAfterHoldsTheTranscriptFromBase(t *testing.T) {
	p := llmtest.NewScripted(llmtest.TextStep("answer"))
	w, err := worker.New(worker.Config{Provider: p, Model: "test:m"})
	if err != nil {
		t.Fatal(err)
	}
	c := &events.Compaction{ID: "t0.c1", To: 4, Messages: []events.Message{events.UserText("summary of 0..3")}, Policy: "summary"}
	held := []events.Message{events.UserText("q2"), events.AssistantText("a2"), events.UserText("q3")} // positions 3, 4, 5
	for _, bad := range []struct {
		base int
		c    *events.Compaction
	}{{3, nil}, {5, c}, {-1, c}, {0, &events.Compaction{ID: "x", To: 4}}} {
		if _, err := w.RunAfter(context.Background(), bad.base, held, bad.c); !errors.Is(err, worker.ErrInvalidMessages) {
			t.Errorf("base %d, compaction %+v: %v, want ErrInvalidMessages", bad.base, bad.c, err)
		}
	}
	res, err := w.RunAfter(context.Background(), 3, held, c)
	if err != nil || res.Status != worker.StatusCompleted {
		t.Fatalf("%v %+v", err, res)
	}
	want := []string{"user:summary of 0..3", "assistant:a2", "user:q3"}
	var got []string
	for _, m := range p.Requests()[0].Messages {
		got = append(got, string(m.Role)+":"+m.Text())
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the model read %q, want %q", got, want)
	}
	if len(res.Messages) != 4 || res.Messages[0].Text() != "q2" || res.Compaction == nil || res.Compaction.ID != c.ID {
		t.Fatalf("result: %d messages from %q, compaction %+v", len(res.Messages), res.Messages[0].Text(), res.Compaction)
	}
}

// Before a model call the run counts the request as the input tokens the
// provider reported for the last call (which the request repeats) plus
// the estimate of what was added since: a provider that counts more than
// the estimator makes the run compact when the estimate alone would not.
func TestCompactionCountsTheReportedInput(t *testing.T) {
	// 32,000 bytes of text: about 8,000 tokens by the estimator, far
	// below the threshold of 22,118.
	msgs := []events.Message{events.UserText(strings.Repeat("a", 16_000)), events.AssistantText("ok"), events.UserText(strings.Repeat("b", 16_000))}
	run := func(reportedInput int64) (*worker.Result, *router, *recorder) {
		t.Helper()
		main := llmtest.NewScripted(
			llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "fetch", Input: `{"n":1}`}).WithUsage(reportedInput, 10),
			llmtest.TextStep("done").WithUsage(reportedInput, 10))
		p := &router{main: main, summaryIn: 100, summaryOut: 10}
		rec := &recorder{}
		w := mustNew(t, worker.Config{Provider: p, Model: "test:m32k", ModelLimits: limits32k, Observer: rec,
			Tools: []tool.Tool{tool.Must("fetch", "fetches", func(context.Context, struct {
				N int `json:"n"`
			}) (string, error) {
				return "fetched", nil
			})}})
		return mustRun(t, w, msgs...), p, rec
	}
	// Counted by the estimator alone (the provider reports no input): no
	// compaction.
	if res, p, rec := run(0); res.Status != worker.StatusCompleted || len(compactions(rec)) != 0 || len(p.summaryCalls()) != 0 {
		t.Fatalf("without a reported count: %s (%s), %d compactions; want completed without any", res.Status, res.Reason, len(compactions(rec)))
	}
	// The provider counted the first request as 25,000 tokens: the
	// second is counted from there, above the threshold, and compacts.
	res, p, rec := run(25_000)
	cs := compactions(rec)
	if res.Status != worker.StatusCompleted || len(cs) != 1 || len(p.summaryCalls()) != 1 {
		t.Fatalf("with a count of 25000: %s (%s), compactions %+v, %d summaries; want one compaction with a summary", res.Status, res.Reason, cs, len(p.summaryCalls()))
	}
	// What was added (a call and its short result) is a few dozen tokens.
	if c := cs[0]; c.Step != 2 || c.TokensBefore <= 25_000 || c.TokensBefore > 25_500 {
		t.Errorf("compaction %+v, want one before call 2 from 25,000 tokens and what was added", c)
	}
}

// failingSummarizer refuses the summaries asked of model fail and
// answers the others, recording the models asked.
type failingSummarizer struct {
	router
	fail  string
	asked []string
}

func (p *failingSummarizer) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	if req.System == compact.SummarySystem {
		p.mu.Lock()
		p.asked = append(p.asked, req.Model)
		p.mu.Unlock()
		if req.Model == p.fail {
			return nil, errors.New("overloaded")
		}
	}
	return p.router.Stream(ctx, req)
}

// A summary the turn's model fails to make is asked of its fallback
// model, as the turn's own calls fall back.
func TestCompactionSummaryFallsBack(t *testing.T) {
	msgs := []events.Message{}
	for i := range 3 {
		msgs = append(msgs, events.UserText(strings.Repeat(string(rune('a'+i)), 40_000)), events.AssistantText("ok"))
	}
	msgs = append(msgs, events.UserText("go on"))
	p := &failingSummarizer{router: router{main: llmtest.NewScripted(llmtest.TextStep("done"))}, fail: "test:m32k"}
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Model: "test:m32k", FallbackModels: []string{"test:b32k"}, ModelLimits: limits32k, Observer: rec})
	res := mustRun(t, w, msgs...)
	cs := compactions(rec)
	if res.Status != worker.StatusCompleted || len(cs) != 1 || cs[0].Policy != "offload,clear,summary" || cs[0].Model != "test:b32k" {
		t.Fatalf("%s (%s), compactions %+v; want completed after one summary by test:b32k", res.Status, res.Reason, cs)
	}
	if strings.Join(p.asked, " ") != "test:m32k test:b32k" {
		t.Errorf("summaries asked of %v, want test:m32k then test:b32k", p.asked)
	}
}

// A summary that would pass the turn's max_total_tokens is not asked
// for: the prompt alone (~30,000 tokens) is above the budget of 20,000.
// Without it the context cannot fit, and the turn fails with
// budget_exceeded before any model call.
func TestCompactionSummaryWithinTheBudget(t *testing.T) {
	msgs := []events.Message{}
	for i := range 3 {
		msgs = append(msgs, events.UserText(strings.Repeat(string(rune('a'+i)), 40_000)), events.AssistantText("ok"))
	}
	msgs = append(msgs, events.UserText("go on"))
	main := llmtest.NewScripted(llmtest.TextStep("never"))
	p := &router{main: main}
	w := mustNew(t, worker.Config{Provider: p, Model: "test:m32k", ModelLimits: limits32k, MaxTotalTokens: 20_000})
	res := mustRun(t, w, msgs...)
	if res.Code != worker.CodeBudgetExceeded || !strings.Contains(res.Reason, "a summary on test:m32k would pass max_total_tokens (20000)") {
		t.Fatalf("%s %s (%s); want budget_exceeded naming the summary", res.Status, res.Code, res.Reason)
	}
	if len(p.summaryCalls()) != 0 || main.Calls() != 0 {
		t.Fatalf("%d summaries, %d model calls; want none", len(p.summaryCalls()), main.Calls())
	}
}

// A summary is priced at the summarizer's price: its cost is in its
// llmw.usage and the turn's cost; a max_cost it would pass keeps it from
// being asked for. test:m32k costs 2 per million input tokens and 10 per
// million output tokens.
func TestCompactionSummaryCost(t *testing.T) {
	tb, err := price.Parse([]byte(`{"currency":"USD","models":{"test:m32k":{"input":2,"output":10}}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []events.Message{}
	for i := range 3 {
		msgs = append(msgs, events.UserText(strings.Repeat(string(rune('a'+i)), 40_000)), events.AssistantText("ok"))
	}
	msgs = append(msgs, events.UserText("go on"))
	main := llmtest.NewScripted(llmtest.TextStep("done").WithUsage(30_000, 5))
	p := &router{main: main, summaryIn: 20_000, summaryOut: 300}
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Model: "test:m32k", ModelLimits: limits32k, Prices: tb, MaxCost: 1, Observer: rec})
	res := mustRun(t, w, msgs...)
	// The summary: 20,000 × 2 + 300 × 10 = 43,000 millionths; the call:
	// 30,000 × 2 + 5 × 10 = 60,050 millionths.
	if res.Status != worker.StatusCompleted || res.Cost == nil || math.Abs(*res.Cost-0.10305) > 1e-12 {
		t.Fatalf("%s (%s), cost %v; want completed at 0.10305", res.Status, res.Reason, res.Cost)
	}
	var summary *events.UsageReport
	for _, d := range rec.ofType(events.TypeUsage) {
		if u := d.(events.UsageReport); u.Compaction != "" {
			summary = &u
		}
	}
	if summary == nil || summary.Cost == nil || math.Abs(*summary.Cost-0.043) > 1e-12 {
		t.Fatalf("the summary's usage report %+v, want cost 0.043", summary)
	}
	// Under a max_cost of 0.04 the summary (about 30,000 input tokens and
	// 2,048 output tokens: 0.08) is not asked for.
	p2 := &router{main: llmtest.NewScripted(llmtest.TextStep("never"))}
	w2 := mustNew(t, worker.Config{Provider: p2, Model: "test:m32k", ModelLimits: limits32k, Prices: tb, MaxCost: 0.04})
	res = mustRun(t, w2, msgs...)
	if res.Code != worker.CodeBudgetExceeded || !strings.Contains(res.Reason, "a summary on test:m32k would pass max_cost (0.04)") || len(p2.summaryCalls()) != 0 {
		t.Fatalf("%s %s (%s), %d summaries; want budget_exceeded naming the summary, none asked for", res.Status, res.Code, res.Reason, len(p2.summaryCalls()))
	}
}
