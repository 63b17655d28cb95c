package worker

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/price"
)

// costSlack is the relative slack of the max_cost comparison: decimal
// prices are not exact in binary, and a turn whose projected cost equals
// its budget to within a billionth of it does not pass it.
const costSlack = 1e-9

// charge counts the usage u of one model call of model against the
// turn's budgets: the tokens (price.Tokens.Total), the input of the last
// call (the estimate of the next one's, see overBudget) and, when the
// table has a price of model, the cost. It returns the call's cost, nil
// when unpriced.
func (r *run) charge(model string, u events.UsageEvent) *float64 {
	tk := r.cfg.Prices.Split(model, u)
	r.st.Tokens += tk.Total()
	p, priced := r.cfg.Prices.Lookup(model)
	if in := tk.AllInput(); in > 0 {
		r.st.LastInput = in
		r.st.LastInputCost = 0
		if priced {
			r.st.LastInputCost = p.Cost(price.Tokens{Input: tk.Input, CacheRead: tk.CacheRead, CacheCreation: tk.CacheCreation})
		}
	}
	if !priced {
		return nil
	}
	c := roundCost(p.Cost(tk))
	total := c
	if r.st.Cost != nil {
		total = roundCost(total + *r.st.Cost)
	}
	r.st.Cost = &total
	return &c
}

// cost is what usage u of model costs, nil when unpriced; it charges
// nothing.
func (r *run) cost(model string, u events.UsageEvent) *float64 {
	p, priced := r.cfg.Prices.Lookup(model)
	if !priced {
		return nil
	}
	c := roundCost(p.Cost(r.cfg.Prices.Split(model, u)))
	return &c
}

// roundCost rounds to 10 decimal places: a binary float's sum of decimal
// prices reads as the decimal amount (0.0061, not 0.006100000000000001).
func roundCost(v float64) float64 { return math.Round(v*1e10) / 1e10 }

// overBudget returns why model call step (its attempt) would pass a
// budget, "" when it would not; the turn then ends with budget_exceeded.
// A call passes a budget when the turn's tokens (cost) so far
// plus the call's estimate are more than max_total_tokens (max_cost). The
// estimate is the input of the turn's last model call that reported
// usage, cached or not (the next request repeats it and adds to it; 0
// before the first call), plus max_tokens of output when the turn sets
// it; its cost is that input at the last call's prices and max_tokens at
// the output price (docs/protocol.md §5 "Budgets").
func (r *run) overBudget(step, attempt int, model string) string {
	maxOut := int64(max(r.cfg.MaxTokens, 0))
	if b := r.cfg.MaxTotalTokens; b > 0 {
		next := r.st.LastInput + maxOut
		if r.st.Tokens+next > b {
			return fmt.Sprintf("max_total_tokens (%d) would be passed: the turn used %d tokens, and %s is counted at %d more (%s)",
				b, r.st.Tokens, callName(step, attempt), next, estimateParts("the last call's "+strconv.FormatInt(r.st.LastInput, 10)+" input tokens", maxOut, ""))
		}
	}
	if b := r.cfg.MaxCost; b > 0 {
		p, _ := r.cfg.Prices.Lookup(model) // resolve made sure of it
		outCost := p.Cost(price.Tokens{Output: maxOut})
		next := r.st.LastInputCost + outCost
		var used float64
		if r.st.Cost != nil {
			used = *r.st.Cost
		}
		if used+next > b*(1+costSlack) {
			return fmt.Sprintf("max_cost (%s) would be passed: the turn's model calls cost %s, and %s is counted at %s more (%s)",
				money(b), money(used), callName(step, attempt), money(next),
				estimateParts("the last call's input at "+money(r.st.LastInputCost), maxOut, " at "+money(outCost)))
		}
	}
	return ""
}

// callName names model call step (attempt) in overBudget's reasons,
// made only for a reason given: a step within its budgets allocates
// nothing for it.
func callName(step, attempt int) string {
	call := "model call " + strconv.Itoa(step)
	if attempt > 1 {
		call += " (attempt " + strconv.Itoa(attempt) + ")"
	}
	return call
}

// budgetExceeded ends the turn for overBudget's reason.
func (r *run) budgetExceeded(ctx context.Context, reason string) *Result {
	return r.end(ctx, StatusFailed, CodeBudgetExceeded, ErrBudgetExceeded, reason, "", nil)
}

// addCost is a + b, nil when both are.
func addCost(a, b *float64) *float64 {
	if b == nil {
		return a
	}
	s := *b
	if a != nil {
		s = roundCost(s + *a)
	}
	return &s
}

func estimateParts(input string, maxOut int64, outCost string) string {
	if maxOut == 0 {
		return input + "; max_tokens is not set"
	}
	return input + " and max_tokens " + strconv.FormatInt(maxOut, 10) + outCost
}

// money formats an amount of the price table's currency.
func money(v float64) string { return strconv.FormatFloat(roundCost(v), 'f', -1, 64) }

// Spend is an amount of a budget: tokens as max_total_tokens counts them
// (price.Tokens.Total) and cost (nil while no call was priced).
type Spend struct {
	Tokens int64
	Cost   *float64
	// Usage is the usage behind Tokens.
	Usage events.UsageEvent
}

// SharedBudget is a budget a turn shares with other turns (Config.SharedBudget).
type SharedBudget interface {
	// Reserve is asked before a model call: own is what the turn spent
	// so far, next the call's estimate (as its own budgets count it). It
	// returns why the call would pass the shared budget, "" when the
	// estimate is reserved for the call.
	Reserve(ctx context.Context, own, next Spend) string
	// Charge records what the turn spent so far, after each model call
	// (it replaces the call's reservation).
	Charge(ctx context.Context, own Spend)
}

// sharedOver asks Config.SharedBudget whether model call step may be
// made, with the estimate overBudget counts; "" when it may.
func (r *run) sharedOver(ctx context.Context, step, attempt int, model string) string {
	sb := r.cfg.SharedBudget
	if sb == nil {
		return ""
	}
	maxOut := int64(max(r.cfg.MaxTokens, 0))
	next := Spend{Tokens: r.st.LastInput + maxOut}
	if p, ok := r.cfg.Prices.Lookup(model); ok {
		c := r.st.LastInputCost + p.Cost(price.Tokens{Output: maxOut})
		next.Cost = &c
	}
	why := sb.Reserve(ctx, Spend{Tokens: r.st.Tokens, Cost: r.st.Cost, Usage: r.st.Usage}, next)
	if why != "" {
		call := "model call " + strconv.Itoa(step)
		if attempt > 1 {
			call += " (attempt " + strconv.Itoa(attempt) + ")"
		}
		why = call + ": " + why
	}
	return why
}

// chargeShared tells Config.SharedBudget the turn's totals after a
// step's model calls.
func (r *run) chargeShared(ctx context.Context) {
	if sb := r.cfg.SharedBudget; sb != nil {
		sb.Charge(ctx, Spend{Tokens: r.st.Tokens, Cost: r.st.Cost, Usage: r.st.Usage})
	}
}
