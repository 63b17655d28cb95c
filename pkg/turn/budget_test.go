package turn_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/price"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

// test:m costs 2 per million input tokens, 0.5 cached, 10 output.
func testPrices(t *testing.T) *price.Table {
	t.Helper()
	tb, err := price.Parse([]byte(`{"models":{"test:m":{"input":2,"cached_input":0.5,"output":10}}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// A turn stops with budget_exceeded before the call that would pass
// max_total_tokens: 1050 tokens used, call 2 counted at 1000 input plus
// max_tokens 100, 2150 > 2149. Ingest's provider never gets call 2.
func TestTurnStopsAtMaxTotalTokens(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "count", Input: `{}`}).WithUsage(1000, 50),
		llmtest.TextStep("never sent"),
	)
	e.scripted(p)
	e.startToolexec(toolexec.Config{}, countingTool("count", new(atomic.Int64), nil))
	e.startTurn(turn.Config{})
	id := newID("budget")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}, Tools: []string{"count"},
		MaxTokens: 100, MaxTotalTokens: 2149})
	end := w.waitEnd()
	f := decode[events.TurnFailed](t, end)
	if end.Type != events.TypeTurnFailed || f.Code != "budget_exceeded" || !strings.Contains(f.Reason, "max_total_tokens (2149)") {
		t.Fatalf("end %s %s", end.Type, end.Data)
	}
	if p.Calls() != 1 {
		t.Fatalf("the provider got %d calls", p.Calls())
	}
}

// max_cost on a model the price table does not have is refused before
// any model call, naming the field.
func TestMaxCostWithoutAPriceFails(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(llmtest.TextStep("never sent"))
	e.scripted(p)
	e.startTurn(turn.Config{Prices: testPrices(t)})
	id := newID("noprice")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:other", Messages: []events.Message{events.UserText("go")}, MaxCost: 0.5})
	end := w.waitEnd()
	f := decode[events.TurnFailed](t, end)
	if end.Type != events.TypeTurnFailed || f.Code != "invalid_request" || !strings.Contains(f.Reason, "max_cost") || !strings.Contains(f.Reason, `"test:other"`) {
		t.Fatalf("end %s %s", end.Type, end.Data)
	}
	if p.Calls() != 0 {
		t.Fatalf("the provider got %d calls", p.Calls())
	}
}

// The running cost survives a hand-off: replica a makes call 1 (1000 in,
// 50 out: 0.0025) and is stopped during call 2; replica b, which reads
// the checkpoint, makes call 2 again (1300 in, 20 out: 0.0028) and
// reports 0.0053 for the turn, in llmw.usage and llmw.turn.completed.
func TestCostSurvivesAHandOff(t *testing.T) {
	e := newEnv(t)
	e.scripted(llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "count", Input: `{}`}).WithUsage(1000, 50),
		llmtest.BlockingStep("half an ans"),
		llmtest.TextStep("the whole answer").WithUsage(1300, 20),
	))
	e.startToolexec(toolexec.Config{}, countingTool("count", new(atomic.Int64), nil))
	a, err := turn.New(e.connect(), turn.Config{Instance: "a", Logger: quietLogger(), AckWait: 2 * time.Second, Prices: testPrices(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := newID("cost")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}, Tools: []string{"count"}, MaxCost: 1})
	w.waitFor("the second step streaming", func(evs []ev) bool {
		return count(evs, events.TypeBlockDelta) > 0 && count(evs, events.TypeTurnStep) == 2 &&
			strings.Contains(string(evs[len(evs)-1].Data), "half an ans")
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx) // too short: the turn is handed off

	e.startTurn(turn.Config{Instance: "b", AckWait: 2 * time.Second, Prices: testPrices(t)})
	done := w.completed()
	var reports []events.UsageReport
	for _, x := range w.events() {
		if x.Type == events.TypeUsage {
			reports = append(reports, decode[events.UsageReport](t, x))
		}
	}
	if len(reports) != 2 || reports[0].TotalCost == nil || *reports[0].TotalCost != 0.0025 ||
		reports[1].Cost == nil || *reports[1].Cost != 0.0028 || reports[1].TotalCost == nil || *reports[1].TotalCost != 0.0053 {
		t.Fatalf("usage reports %s", mustJSON(t, reports))
	}
	if done.Cost == nil || *done.Cost != 0.0053 || *done.Usage.InputTokens != 2300 {
		t.Fatalf("completed cost %v usage %s", done.Cost, mustJSON(t, done.Usage))
	}
}
