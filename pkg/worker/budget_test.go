package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/price"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// budgetPrices prices test:m per million tokens: input 2, cached input
// 0.5, cache creation 2.5, output 10. "test" counts cached tokens apart
// from input_tokens (price.Split).
const budgetPrices = `{"currency":"USD","models":{"test:m":{"input":2,"cached_input":0.5,"cache_creation":2.5,"output":10}}}`

func budgetTable(t *testing.T) *price.Table {
	t.Helper()
	tb, err := price.Parse([]byte(budgetPrices), false)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// cacheUsage is a usage event with cache reads and writes.
func cacheUsage(in, read, write, out int64) events.Event {
	return events.UsageEvent{InputTokens: events.Int64(in), CacheReadInputTokens: events.Int64(read),
		CacheCreationInputTokens: events.Int64(write), OutputTokens: events.Int64(out)}
}

// budgetSteps: call 1 asks for get_weather and reports step1, call 2
// answers and reports step2.
func budgetSteps(step1, step2 events.Event) *scripted {
	s1 := toolStep(call{"c1", "get_weather", `{"city":"Oslo"}`})
	s1.evs = append(s1.evs[:len(s1.evs)-1], step1, completed())
	s2 := textStep("sunny")
	s2.evs = append(s2.evs[:len(s2.evs)-1], step2, completed())
	return newScripted(s1, s2)
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

// max_total_tokens: before call 2 the turn used 1000+50 tokens, and call
// 2 is counted at call 1's 1000 input tokens plus max_tokens 100: 2150.
// A budget of 2150 lets it run; 2149 ends the turn before it, and the
// provider never sees it.
func TestMaxTotalTokensStopsBeforeTheCallThatWouldPassIt(t *testing.T) {
	for _, tc := range []struct {
		budget int64
		calls  int
		status worker.Status
	}{
		{2150, 2, worker.StatusCompleted},
		{2149, 1, worker.StatusFailed},
	} {
		p := budgetSteps(usage(1000, 50), usage(1200, 30))
		rec := &recorder{}
		w := mustNew(t, worker.Config{Provider: p, Model: "test:m", MaxTokens: 100, MaxTotalTokens: tc.budget,
			Tools: []tool.Tool{weatherTool(t, nil)}, Observer: rec})
		res := mustRun(t, w, events.UserText("weather?"))
		if got := len(p.requests()); got != tc.calls || res.Status != tc.status {
			t.Fatalf("budget %d: %d calls, status %s (%s); want %d, %s", tc.budget, got, res.Status, res.Reason, tc.calls, tc.status)
		}
		if tc.status == worker.StatusCompleted {
			continue
		}
		if res.Code != "budget_exceeded" || !errors.Is(res.Err(), worker.ErrBudgetExceeded) || res.Steps != 1 {
			t.Fatalf("code %q err %v steps %d", res.Code, res.Err(), res.Steps)
		}
		for _, want := range []string{"max_total_tokens (2149)", "used 1050 tokens", "model call 2 is counted at 1100", "1000 input tokens", "max_tokens 100"} {
			if !strings.Contains(res.Reason, want) {
				t.Errorf("reason %q lacks %q", res.Reason, want)
			}
		}
		failed := rec.ofType(events.TypeTurnFailed)
		if len(failed) != 1 || failed[0].(events.TurnFailed).Code != "budget_exceeded" {
			t.Fatalf("failed events %v", failed)
		}
	}
}

// The first call has no input estimate: max_tokens alone is counted, so
// a budget below it ends the turn before any call.
func TestMaxTotalTokensBelowMaxTokensMakesNoCall(t *testing.T) {
	p := budgetSteps(usage(1000, 50), usage(1200, 30))
	w := mustNew(t, worker.Config{Provider: p, Model: "test:m", MaxTokens: 100, MaxTotalTokens: 99})
	res := mustRun(t, w, events.UserText("weather?"))
	if len(p.requests()) != 0 || res.Code != "budget_exceeded" || res.Steps != 0 {
		t.Fatalf("%d calls, code %q, steps %d", len(p.requests()), res.Code, res.Steps)
	}
}

// Call 1: 1000 input, 4000 cache reads, 2000 cache writes, 500 output:
// (1000·2 + 4000·0.5 + 2000·2.5 + 500·10)/1e6 = 0.014, of which input
// 0.009. Call 2 is counted at 0.009 + 100·10/1e6 = 0.010: 0.024 in all.
// Call 2: 1200 input, 7000 cache reads, 20 output: 0.0061; total 0.0201.
func TestMaxCostAndRunningCost(t *testing.T) {
	for _, tc := range []struct {
		budget float64
		calls  int
	}{{0.024, 2}, {0.0239, 1}} {
		p := budgetSteps(cacheUsage(1000, 4000, 2000, 500), cacheUsage(1200, 7000, 0, 20))
		rec := &recorder{}
		w := mustNew(t, worker.Config{Provider: p, Model: "test:m", MaxTokens: 100, MaxCost: tc.budget, Prices: budgetTable(t),
			Tools: []tool.Tool{weatherTool(t, nil)}, Observer: rec})
		res := mustRun(t, w, events.UserText("weather?"))
		if got := len(p.requests()); got != tc.calls {
			t.Fatalf("max_cost %v: %d calls (%s %s), want %d", tc.budget, got, res.Status, res.Reason, tc.calls)
		}
		reports := rec.ofType(events.TypeUsage)
		r1 := reports[0].(events.UsageReport)
		if r1.Cost == nil || r1.TotalCost == nil || !near(*r1.Cost, 0.014) || !near(*r1.TotalCost, 0.014) {
			t.Fatalf("step 1 report %s", jsonString(t, r1))
		}
		if tc.calls == 1 {
			if res.Code != "budget_exceeded" || res.Cost == nil || !near(*res.Cost, 0.014) {
				t.Fatalf("code %q cost %v reason %s", res.Code, res.Cost, res.Reason)
			}
			for _, want := range []string{"max_cost (0.0239)", "cost 0.014", "counted at 0.01"} {
				if !strings.Contains(res.Reason, want) {
					t.Errorf("reason %q lacks %q", res.Reason, want)
				}
			}
			continue
		}
		r2 := reports[1].(events.UsageReport)
		if !near(*r2.Cost, 0.0061) || !near(*r2.TotalCost, 0.0201) {
			t.Fatalf("step 2 report %s", jsonString(t, r2))
		}
		done := rec.ofType(events.TypeTurnCompleted)
		if len(done) != 1 || done[0].(events.TurnCompleted).Cost == nil || !near(*done[0].(events.TurnCompleted).Cost, 0.0201) {
			t.Fatalf("completed %s", jsonString(t, done))
		}
		if res.Status != worker.StatusCompleted || !near(*res.Cost, 0.0201) {
			t.Fatalf("status %s cost %v", res.Status, res.Cost)
		}
	}
}

// Without a price of the model there is no cost, and a max_cost is
// refused by New naming the field.
func TestMaxCostNeedsAPrice(t *testing.T) {
	_, err := worker.New(worker.Config{Provider: newScripted(), Model: "test:other", MaxCost: 1, Prices: budgetTable(t)})
	var fe *events.FieldError
	if !errors.Is(err, worker.ErrInvalidConfig) || !errors.As(err, &fe) || fe.Field != "max_cost" || !strings.Contains(err.Error(), `"test:other"`) {
		t.Fatalf("err %v", err)
	}
	_, err = worker.New(worker.Config{Provider: newScripted(), Model: "test:m", MaxCost: 1})
	if !errors.As(err, &fe) || fe.Field != "max_cost" || !strings.Contains(err.Error(), "no price table") {
		t.Fatalf("err %v", err)
	}
	_, err = worker.New(worker.Config{Provider: newScripted(), Model: "test:m", MaxTotalTokens: -1})
	if !errors.As(err, &fe) || fe.Field != "max_total_tokens" {
		t.Fatalf("err %v", err)
	}
	p := newScripted(textStep("hi"))
	w := mustNew(t, worker.Config{Provider: p, Model: "test:other", Prices: budgetTable(t)})
	if res := mustRun(t, w, events.UserText("hi")); res.Cost != nil {
		t.Fatalf("cost %v of an unpriced model", *res.Cost)
	}
}

// A turn continued from its checkpoint (as a replica that takes it over
// reads it from KV: JSON) keeps counting: its tokens and cost go on from
// the checkpoint's, and the budget check before its next call counts them.
func TestBudgetCountsFromTheCheckpoint(t *testing.T) {
	var stored []byte
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	p1 := budgetSteps(cacheUsage(1000, 4000, 2000, 500), cacheUsage(0, 0, 0, 0))
	w1 := mustNew(t, worker.Config{Provider: p1, Model: "test:m", MaxTokens: 100, Prices: budgetTable(t), TurnID: "t1",
		Tools: []tool.Tool{weatherTool(t, nil)},
		Checkpoint: func(_ context.Context, cp *worker.Checkpoint) error {
			if cp.Step == 1 && cp.Phase == worker.PhaseModel {
				b, err := json.Marshal(cp)
				if err != nil {
					return err
				}
				stored = b
				// The replica dies before call 2.
				return worker.ErrDetached
			}
			return nil
		}})
	res, err := w1.Run(ctx, []events.Message{events.UserText("weather?")})
	if err != nil || res.Code != worker.CodeDetached || stored == nil {
		t.Fatalf("first run: %v %q %s", err, res.Code, res.Reason)
	}
	load := func() *worker.Checkpoint {
		var cp worker.Checkpoint
		if err := json.Unmarshal(stored, &cp); err != nil {
			t.Fatal(err)
		}
		return &cp
	}
	// 7500 tokens used (1000+4000+2000 input, 500 output) plus 7000+100 for
	// call 2: 14600.
	for _, tc := range []struct {
		budget int64
		calls  int
	}{{14600, 1}, {14599, 0}} {
		p2 := newScripted(func() script {
			s := textStep("sunny")
			s.evs = append(s.evs[:len(s.evs)-1], cacheUsage(1200, 7000, 0, 20), completed())
			return s
		}())
		rec := &recorder{}
		w2 := mustNew(t, worker.Config{Provider: p2, Model: "test:m", MaxTokens: 100, MaxTotalTokens: tc.budget, Prices: budgetTable(t), TurnID: "t1",
			Tools: []tool.Tool{weatherTool(t, nil)}, Observer: rec})
		res, err := w2.RunFrom(context.Background(), load())
		if err != nil {
			t.Fatal(err)
		}
		if len(p2.requests()) != tc.calls {
			t.Fatalf("budget %d: %d calls (%s)", tc.budget, len(p2.requests()), res.Reason)
		}
		if tc.calls == 0 {
			if res.Code != "budget_exceeded" || !strings.Contains(res.Reason, "used 7500 tokens") {
				t.Fatalf("code %q reason %s", res.Code, res.Reason)
			}
			continue
		}
		rep := rec.ofType(events.TypeUsage)
		if len(rep) != 1 || !near(*rep[0].(events.UsageReport).TotalCost, 0.0201) || res.Cost == nil || !near(*res.Cost, 0.0201) {
			t.Fatalf("reports %s cost %v", jsonString(t, rep), res.Cost)
		}
	}
}

// A retry is a model call too: attempt 2 of call 1 is counted at attempt
// 1's 1000 input tokens plus max_tokens 100, after attempt 1 used 1010.
func TestBudgetChecksEveryAttempt(t *testing.T) {
	for _, tc := range []struct {
		budget int64
		calls  int
	}{{2110, 2}, {2109, 1}} {
		broken := script{evs: []events.Event{started(), usage(1000, 10),
			events.ErrorEvent{Code: "stream_error", Message: "connection reset"}, events.StatusEvent{Status: events.StatusFailed}}}
		p := newScripted(broken, textStep("hi"))
		w := mustNew(t, worker.Config{Provider: p, Model: "test:m", MaxTokens: 100, MaxTotalTokens: tc.budget, StepAttempts: 2})
		res := mustRun(t, w, events.UserText("hi"))
		if len(p.requests()) != tc.calls {
			t.Fatalf("budget %d: %d calls (%s %s)", tc.budget, len(p.requests()), res.Status, res.Reason)
		}
		if tc.calls == 1 && (res.Code != "budget_exceeded" || !strings.Contains(res.Reason, "model call 1 (attempt 2)") || !strings.Contains(res.Reason, "attempt 1 failed")) {
			t.Fatalf("code %q reason %s", res.Code, res.Reason)
		}
	}
}

// sharedBudget is a SharedBudget that allows the first n reservations
// and records what it is asked and told.
type sharedBudget struct {
	n        int
	reserved []worker.Spend // (own, next) pairs
	charged  []worker.Spend
}

func (b *sharedBudget) Reserve(_ context.Context, own, next worker.Spend) string {
	b.reserved = append(b.reserved, own, next)
	if len(b.reserved)/2 > b.n {
		return "the tree's budget would be passed"
	}
	return ""
}

func (b *sharedBudget) Charge(_ context.Context, own worker.Spend) {
	b.charged = append(b.charged, own)
}

// A shared budget is asked before each model call with the turn's spend
// and the call's estimate (as its own budgets count them), told the
// totals after each call, and a refusal ends the turn with
// budget_exceeded before the call.
func TestSharedBudgetIsAskedBeforeEachCall(t *testing.T) {
	p := budgetSteps(usage(1000, 50), usage(1200, 30))
	sb := &sharedBudget{n: 1}
	w := mustNew(t, worker.Config{Provider: p, Model: "test:m", MaxTokens: 100, SharedBudget: sb,
		Tools: []tool.Tool{weatherTool(t, nil)}})
	res := mustRun(t, w, events.UserText("weather?"))
	if got := len(p.requests()); got != 1 || res.Status != worker.StatusFailed || res.Code != "budget_exceeded" ||
		!strings.Contains(res.Reason, "model call 2: the tree's budget would be passed") {
		t.Fatalf("%d calls, status %s %s (%s); want 1 call, failed budget_exceeded naming call 2 and the shared budget's reason", got, res.Status, res.Code, res.Reason)
	}
	if len(sb.reserved) != 4 || sb.reserved[1].Tokens != 100 || sb.reserved[2].Tokens != 1050 || sb.reserved[3].Tokens != 1100 {
		t.Fatalf("reservations %+v; want call 1 at 0+100, call 2 with 1050 spent at 1000+100", sb.reserved)
	}
	if len(sb.charged) != 1 || sb.charged[0].Tokens != 1050 || *sb.charged[0].Usage.InputTokens != 1000 {
		t.Fatalf("charges %+v; want one of 1050 tokens after call 1", sb.charged)
	}
}
