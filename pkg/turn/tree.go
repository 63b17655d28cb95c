package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/worker"
)

// A tree of sub-agent turns shares one budget, the root turn's
// max_total_tokens and max_cost, and one bill. Its ledger is a key of
// LLMW_TURN_STATE, "<root key>.tree" (kvKey never makes a dot), that
// every turn of the tree writes with the expected revision: what each
// turn spent so far, and the estimate reserved for the model call it is
// about to make. A call whose estimate would take the tree past the
// root's budget is not made (the turn fails with budget_exceeded), and
// two calls of parallel children cannot both take the last of it: each
// reserves with a write that the other's makes conflict. A parent's
// usage events and its completed event add its children's shares
// (events.ChildUsage), read from the ledger.

// treeKey is the KV key of the ledger of the tree rooted at root.
func treeKey(root string) string { return kvKey(root) + ".tree" }

// treeLedger is the value of treeKey: every turn of the tree by id.
type treeLedger struct {
	Turns map[string]*treeEntry `json:"turns"`
}

// treeEntry is one turn's account.
type treeEntry struct {
	Parent string            `json:"parent,omitempty"`
	CallID string            `json:"call_id,omitempty"`
	Agent  string            `json:"agent,omitempty"`
	Usage  events.UsageEvent `json:"usage"`
	Tokens int64             `json:"tokens,omitempty"`
	Cost   *float64          `json:"cost,omitempty"`
	// ReservedTokens and ReservedCost are the estimate of the model call
	// the turn makes now (0 once it reported its usage).
	ReservedTokens int64   `json:"reserved_tokens,omitempty"`
	ReservedCost   float64 `json:"reserved_cost,omitempty"`
}

// treeAttempts bounds how often a ledger write starts over after
// another turn of the tree wrote first.
const treeAttempts = 50

// treeBudget is a turn's worker.SharedBudget: its account in its tree's
// ledger.
type treeBudget struct {
	t                *turnRun
	root             string
	maxTokens        int64
	maxCost          float64
	parent, call, ag string
	// reserved: a reservation of the run may be in the ledger.
	reserved atomic.Bool
}

var _ worker.SharedBudget = (*treeBudget)(nil)

// newTreeBudget is the shared budget of a turn of a tree (a child, or a
// turn that offers sub-agents); nil for any other turn.
func (t *turnRun) newTreeBudget() *treeBudget {
	req := t.base.Request
	if req == nil || (req.Parent == nil && len(t.base.SubAgents) == 0) {
		return nil
	}
	_, root, maxTokens, maxCost := t.treeOf()
	b := &treeBudget{t: t, root: root, maxTokens: maxTokens, maxCost: maxCost, ag: req.Agent}
	if p := req.Parent; p != nil {
		b.parent, b.call = p.TurnID, p.CallID
	}
	return b
}

// readLedger reads a tree's ledger from the bucket's leader; rev 0 when
// there is none yet.
func (s *Service) readLedger(ctx context.Context, root string) (*treeLedger, uint64, error) {
	b, rev, err := jsread.KVLast(ctx, s.nc, s.pub.APIPrefix(), events.BucketTurnState, treeKey(root))
	l := &treeLedger{Turns: map[string]*treeEntry{}}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return l, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, l); err != nil {
			return nil, 0, fmt.Errorf("turn: the ledger of tree %s: %w", root, err)
		}
	}
	if l.Turns == nil {
		l.Turns = map[string]*treeEntry{}
	}
	return l, rev, nil
}

// update applies f to the ledger and writes it at the revision it read,
// starting over after a conflict. f returns false to write nothing.
func (b *treeBudget) update(ctx context.Context, f func(l *treeLedger, self *treeEntry) bool) error {
	s := b.t.s
	for attempt := 0; ; attempt++ {
		l, rev, err := s.readLedger(ctx, b.root)
		if err != nil {
			return err
		}
		self := l.Turns[b.t.id]
		if self == nil {
			self = &treeEntry{Parent: b.parent, CallID: b.call, Agent: b.ag}
			l.Turns[b.t.id] = self
		}
		if !f(l, self) {
			return nil
		}
		v, err := json.Marshal(l)
		if err != nil {
			return err
		}
		_, err = s.casKey(ctx, treeKey(b.root), v, rev, s.cfg.FinishedTTL)
		if err == nil || !isConflict(err) || attempt >= treeAttempts {
			return err
		}
	}
}

// Reserve reserves next for the turn's model call, or says why the
// tree's budget would be passed.
func (b *treeBudget) Reserve(ctx context.Context, own, next worker.Spend) string {
	if b.maxTokens <= 0 && b.maxCost <= 0 {
		return ""
	}
	var why string
	err := b.update(ctx, func(l *treeLedger, self *treeEntry) bool {
		var tokens int64
		var cost float64
		for id, e := range l.Turns {
			if id == b.t.id {
				continue
			}
			tokens += e.Tokens + e.ReservedTokens
			cost += costOf(e.Cost) + e.ReservedCost
		}
		tokens += own.Tokens
		cost += costOf(own.Cost)
		switch {
		case b.maxTokens > 0 && tokens+next.Tokens > b.maxTokens:
			why = fmt.Sprintf("the max_total_tokens (%d) of turn %s, which its sub-agents share, would be passed: its tree used %d tokens (calls under way counted at their estimate), and the call is counted at %d more",
				b.maxTokens, b.root, tokens, next.Tokens)
		case b.maxCost > 0 && cost+costOf(next.Cost) > b.maxCost*(1+1e-9):
			why = fmt.Sprintf("the max_cost (%s) of turn %s, which its sub-agents share, would be passed: its tree's model calls cost %s (calls under way counted at their estimate), and the call is counted at %s more",
				money(b.maxCost), b.root, money(cost), money(costOf(next.Cost)))
		}
		if why != "" {
			return false
		}
		self.Tokens, self.Cost, self.Usage = own.Tokens, own.Cost, own.Usage
		self.ReservedTokens, self.ReservedCost = next.Tokens, costOf(next.Cost)
		b.reserved.Store(true)
		return true
	})
	if err != nil {
		// The ledger cannot be read or written: the turn's own budgets
		// still hold; the tree's is not checked for this call.
		b.t.s.log.Warn("turn: the tree's budget could not be reserved", "turn_id", b.t.id, "root", b.root, "err", err)
	}
	return why
}

// Charge records what the turn spent so far.
func (b *treeBudget) Charge(ctx context.Context, own worker.Spend) {
	err := b.update(ctx, func(_ *treeLedger, self *treeEntry) bool {
		self.Tokens, self.Cost, self.Usage = own.Tokens, own.Cost, own.Usage
		self.ReservedTokens, self.ReservedCost = 0, 0
		return true
	})
	if err != nil {
		b.t.s.log.Warn("turn: the tree's ledger could not be written", "turn_id", b.t.id, "root", b.root, "err", err)
	}
}

// release clears the run's reservation when the run ends (a call that
// was cancelled or failed before it reported anything leaves one), so
// that it does not hold the tree's budget; nothing when there is none.
func (b *treeBudget) release() {
	if b == nil || b.t.life.load().silenced() || !b.reserved.Swap(false) {
		return // a run handed off leaves the account to the run that continues it
	}
	ctx, cancel := kvContext(b.t.s.root)
	defer cancel()
	err := b.update(ctx, func(_ *treeLedger, self *treeEntry) bool {
		if self.ReservedTokens == 0 && self.ReservedCost == 0 {
			return false
		}
		self.ReservedTokens, self.ReservedCost = 0, 0
		return true
	})
	if err != nil {
		b.t.s.log.Warn("turn: release the reservation in the tree's ledger", "turn_id", b.t.id, "root", b.root, "err", err)
	}
}

func costOf(c *float64) float64 {
	if c == nil {
		return 0
	}
	return *c
}

func money(v float64) string {
	return strconv.FormatFloat(math.Round(v*1e10)/1e10, 'f', -1, 64)
}

// childShares returns each child of the turn with what its subtree used,
// from the tree's ledger, and their sum.
func (t *turnRun) childShares() (shares []events.ChildUsage, sum events.UsageEvent, cost *float64) {
	if t.base.Request == nil || len(t.base.SubAgents) == 0 {
		return nil, sum, nil
	}
	_, root, _, _ := t.treeOf()
	ctx, cancel := kvContext(t.s.root)
	l, _, err := t.s.readLedger(ctx, root)
	cancel()
	if err != nil {
		t.s.log.Warn("turn: read the tree's ledger for the children's usage", "turn_id", t.id, "err", err)
		return nil, sum, nil
	}
	kids := map[string][]string{}
	for id, e := range l.Turns {
		kids[e.Parent] = append(kids[e.Parent], id)
	}
	var subtree func(id string) (events.UsageEvent, *float64)
	subtree = func(id string) (events.UsageEvent, *float64) {
		e := l.Turns[id]
		u, c := e.Usage, e.Cost
		for _, k := range kids[id] {
			ku, kc := subtree(k)
			u = u.Add(ku)
			c = addCosts(c, kc)
		}
		return u, c
	}
	for _, id := range kids[t.id] {
		u, c := subtree(id)
		e := l.Turns[id]
		shares = append(shares, events.ChildUsage{CallID: e.CallID, ChildTurnID: id, Agent: e.Agent, Usage: u, Cost: c})
		sum = sum.Add(u)
		cost = addCosts(cost, c)
	}
	sort.Slice(shares, func(i, j int) bool { return shares[i].CallID < shares[j].CallID })
	return shares, sum, cost
}

// addCosts is a + b, nil when both are.
func addCosts(a, b *float64) *float64 {
	if a == nil && b == nil {
		return nil
	}
	v := math.Round((costOf(a)+costOf(b))*1e10) / 1e10
	return &v
}

// withChildUsage adds the children's shares to a usage report of a turn
// that offers sub-agents.
func (t *turnRun) withChildUsage(d events.UsageReport) events.UsageReport {
	shares, sum, cost := t.childShares()
	if len(shares) == 0 {
		return d
	}
	d.Children = shares
	d.Total = d.Total.Add(sum)
	d.TotalCost = addCosts(d.TotalCost, cost)
	return d
}

// withChildren adds the children's shares to the completed event of a
// turn that offers sub-agents.
func (t *turnRun) withChildren(d events.TurnCompleted) events.TurnCompleted {
	shares, sum, cost := t.childShares()
	if len(shares) == 0 {
		return d
	}
	d.Children = shares
	d.Usage = d.Usage.Add(sum)
	d.Cost = addCosts(d.Cost, cost)
	return d
}

// treeOf is where a child of this run sits: its depth, the root turn
// and the tree's budgets (the root's).
func (t *turnRun) treeOf() (depth int, root string, maxTokens int64, maxCost float64) {
	req := t.base.Request
	if p := req.Parent; p != nil {
		return p.Depth + 1, p.RootTurnID, p.MaxTotalTokens, p.MaxCost
	}
	return 1, t.id, req.MaxTotalTokens, req.MaxCost
}
