//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/turn"
)

// checkHistory reads the whole history of each turn after a run — its
// events in LLMW_EVENTS, its results in LLMW_TOOLRESULTS, its state in
// LLMW_TURN_STATE — and checks what users rely on, whatever faults the run
// had:
//
//   - seq runs 1, 2, 3, … in stream order: no gap, no repeat;
//   - exactly one terminal event, the last one, and it is
//     llmw.turn.completed; the state says completed;
//   - every tool call of the transcript has exactly one result in the
//     transcript, in LLMW_TOOLRESULTS and among the llmw.tool.result
//     events, and no other call has one;
//   - the assistant messages of the transcript are what a UI rebuilds from
//     the events: per step, from the last attempt, the text deltas of the
//     blocks that stopped and the tool calls that completed;
//   - a sub-agent call (one llmw.tool.child names) ran one child turn,
//     started once (one llmw.turn.started that is not resumed), whose
//     history holds as the parent's does, and the call's one result is
//     the child's answer: no parent result lost. Its result is the
//     turn service's, not a tool host's: LLMW_TOOLRESULTS has none.
//
// It returns a description of every violation (empty: the history holds).
func (c *cluster) checkHistory(turnIDs []string) []string {
	c.t.Helper()
	var bad []string
	for _, id := range turnIDs {
		for _, p := range c.checkTurnHistory(id) {
			bad = append(bad, "turn "+id+": "+p)
		}
	}
	return bad
}

func (c *cluster) checkTurnHistory(id string) (bad []string) {
	evs := c.readAll(id)
	if len(evs) == 0 {
		return []string{"no events"}
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			bad = append(bad, fmt.Sprintf("event %d in the stream (%s from %s) has seq %d", i+1, e.Type, e.Source, e.Seq))
			break
		}
	}
	var ends []int
	for i, e := range evs {
		switch e.Type {
		case events.TypeTurnCompleted, events.TypeTurnFailed, events.TypeTurnAborted:
			ends = append(ends, i)
		}
	}
	switch {
	case len(ends) != 1:
		bad = append(bad, fmt.Sprintf("%d terminal events (at %v), want 1", len(ends), ends))
	case ends[0] != len(evs)-1:
		bad = append(bad, fmt.Sprintf("terminal event at %d of %d: events after the end", ends[0]+1, len(evs)))
	}
	if len(ends) == 0 {
		return bad
	}
	end := evs[ends[0]]
	if end.Type != events.TypeTurnCompleted {
		ended, _ := events.DecodeData[events.TurnEnded](end)
		return append(bad, fmt.Sprintf("ended %s: %s (%s)", end.Type, ended.Reason, ended.Code))
	}
	// The end is published before the state records it (the replica that
	// published it writes the state next, over a claim that came too
	// late: turnRun.recordEnd), and when that replica is cut off between
	// the two the request's next delivery records it, up to an AckWait
	// later: the state must get there, not be there at once.
	if st := c.finalState(id, stateSettles); st.Status != turn.StatusCompleted {
		bad = append(bad, fmt.Sprintf("state %q %s after the end was published, want completed", st.Status, stateSettles))
	}
	done, err := events.DecodeData[events.TurnCompleted](end)
	if err != nil {
		return append(bad, "completed data: "+err.Error())
	}

	// Tool calls and their results.
	var calls []string
	inTranscript := map[string]int{}
	said := map[string]string{} // what the transcript's result of a call says
	for _, m := range done.Messages {
		for _, p := range m.Content {
			switch p.Type {
			case events.PartToolUse:
				calls = append(calls, p.ID)
			case events.PartToolResult:
				inTranscript[p.ToolUseID]++
				said[p.ToolUseID] = fmt.Sprintf("is_error %v, %q", p.IsError, clip(p.Content))
			}
		}
	}
	resultEvents := map[string]int{}
	from := map[string][]string{} // the sources and seqs of a call's llmw.tool.result events
	// Calls a run stopped (llmw.tool.cancelled): an early call that the
	// model call made again by a continuing run did not ask for again. Its
	// host may have stored its result before the cancel reached it; the
	// turn drops that result (docs/architecture.md, "Calls that start
	// while the model streams").
	cancelled := map[string]bool{}
	children := map[string]string{} // sub-agent call → child turn id
	for _, e := range evs {
		if e.Type == events.TypeToolChild {
			if ch, err := events.DecodeData[events.ToolChild](e); err == nil {
				if prev, ok := children[ch.CallID]; ok && prev != ch.ChildTurnID {
					bad = append(bad, fmt.Sprintf("call %s names two child turns, %s and %s", ch.CallID, prev, ch.ChildTurnID))
				}
				children[ch.CallID] = ch.ChildTurnID
			}
		}
		if e.Type == events.TypeToolCancelled {
			if c, err := events.DecodeData[events.ToolCancelled](e); err == nil {
				cancelled[c.CallID] = true
			}
		}
		if e.Type == events.TypeToolResult {
			r, err := events.DecodeData[events.ToolCallResult](e)
			if err != nil {
				bad = append(bad, "tool result event: "+err.Error())
				continue
			}
			resultEvents[r.CallID]++
			from[r.CallID] = append(from[r.CallID], fmt.Sprintf("seq %d from %s", e.Seq, instance(e)))
		}
	}
	// A sub-agent call's result is its child's answer: nothing is stored
	// for it in LLMW_TOOLRESULTS, and the count need not settle for it.
	tools := slices.DeleteFunc(slices.Clone(calls), func(call string) bool { _, ok := children[call]; return ok })
	stored := c.storedResults(id, tools, storedSettles)
	for _, call := range calls {
		if child, ok := children[call]; ok {
			if inTranscript[call] != 1 || resultEvents[call] != 1 {
				bad = append(bad, fmt.Sprintf("sub-agent call %s: %d results in the transcript, %d llmw.tool.result events; want 1 each", call, inTranscript[call], resultEvents[call]))
			}
			bad = append(bad, c.checkChild(call, child, said[call])...)
			continue
		}
		if inTranscript[call] != 1 || stored[call] != 1 || resultEvents[call] != 1 {
			bad = append(bad, fmt.Sprintf("call %s: %d results in the transcript, %d in LLMW_TOOLRESULTS, %d llmw.tool.result events; want 1 each (the transcript's result: %s; the events: %v; the stream's leader has: %s; a direct get finds: %s)",
				call, inTranscript[call], stored[call], resultEvents[call], said[call], from[call], c.leaderGet(id, call), c.directGet(id, call)))
		}
	}
	for call, n := range stored {
		if !slices.Contains(calls, call) && !(cancelled[call] && n == 1 && resultEvents[call] == 0) {
			bad = append(bad, fmt.Sprintf("LLMW_TOOLRESULTS has %d results for %s, a call the transcript does not have", n, call))
		}
	}

	// The transcript's assistant messages against what the events rebuild.
	var want []string
	for _, m := range done.Messages {
		if m.Role == events.RoleAssistant {
			want = append(want, describeParts(m.Content))
		}
	}
	if got := rebuild(evs); !slices.Equal(got, want) {
		bad = append(bad, fmt.Sprintf("assistant messages rebuilt from the events\n\t%q\nbut the transcript has\n\t%q", got, want))
	}
	return bad
}

// checkChild checks the child turn of sub-agent call: started once, its
// own history sound, and its answer the call's result in the parent's
// transcript (said, as checkTurnHistory renders it).
func (c *cluster) checkChild(call, child, said string) (bad []string) {
	starts := 0
	for _, e := range c.readAll(child) {
		if e.Type == events.TypeTurnStarted {
			if st, err := events.DecodeData[events.TurnStarted](e); err == nil && !st.Resumed {
				starts++
			}
		}
	}
	if starts != 1 {
		bad = append(bad, fmt.Sprintf("sub-agent call %s: child turn %s started %d times, want once (the parent's result: %s)", call, child, starts, said))
	}
	for _, p := range c.checkTurnHistory(child) {
		bad = append(bad, fmt.Sprintf("sub-agent call %s: child turn %s: %s", call, child, p))
	}
	evs := c.readAll(child)
	if len(evs) == 0 || evs[len(evs)-1].Type != events.TypeTurnCompleted {
		return bad
	}
	done, err := events.DecodeData[events.TurnCompleted](evs[len(evs)-1])
	if err != nil {
		return bad
	}
	answer := string(done.Output)
	for i := len(done.Messages) - 1; answer == "" && i >= 0; i-- {
		if done.Messages[i].Role == events.RoleAssistant {
			answer = done.Messages[i].Text()
		}
	}
	if want := fmt.Sprintf("is_error %v, %q", false, clip(answer)); said != want {
		bad = append(bad, fmt.Sprintf("sub-agent call %s: the parent's result is %s, the child's answer %s: the child's result was lost", call, said, want))
	}
	return bad
}

// clip shortens a result's content for a failure message.
func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// describeParts renders the text and tool_use parts of a message, the
// parts a UI shows; thinking and other parts are left out.
func describeParts(parts []events.Part) string {
	var b strings.Builder
	for _, p := range parts {
		switch p.Type {
		case events.PartText:
			if p.Text != "" {
				fmt.Fprintf(&b, "[text %q]", p.Text)
			}
		case events.PartToolUse:
			fmt.Fprintf(&b, "[tool_use %s %s]", p.ID, p.Name)
		}
	}
	return b.String()
}

// rebuild is a UI: it rebuilds the assistant message of every step from
// the events — blocks started after the step's last llmw.turn.step, text
// from their deltas, kept when they stopped, dropped when they were
// aborted; tool calls from llmw.toolcall.complete of that attempt.
func rebuild(evs []*events.Envelope) []string {
	type block struct {
		typ     events.BlockType
		id      string
		name    string
		text    strings.Builder
		stopped bool
	}
	type attempt struct {
		blocks map[int]*block
		order  []int
	}
	steps := map[int]*attempt{}
	var stepOrder []int
	for _, e := range evs {
		var d struct {
			Step      int              `json:"step"`
			Index     int              `json:"index"`
			BlockType events.BlockType `json:"block_type"`
			ID        string           `json:"id"`
			Name      string           `json:"name"`
			Text      string           `json:"text"`
		}
		_ = json.Unmarshal(e.Data, &d)
		switch e.Type {
		case events.TypeTurnStep:
			// A new attempt of the step: what the earlier one showed is
			// replaced.
			if _, seen := steps[d.Step]; !seen {
				stepOrder = append(stepOrder, d.Step)
			}
			steps[d.Step] = &attempt{blocks: map[int]*block{}}
		case events.TypeBlockStart:
			if a := steps[d.Step]; a != nil {
				if _, again := a.blocks[d.Index]; !again {
					a.order = append(a.order, d.Index)
				}
				a.blocks[d.Index] = &block{typ: d.BlockType, id: d.ID, name: d.Name}
			}
		case events.TypeBlockDelta:
			if a := steps[d.Step]; a != nil && a.blocks[d.Index] != nil {
				a.blocks[d.Index].text.WriteString(d.Text)
			}
		case events.TypeBlockStop:
			if a := steps[d.Step]; a != nil && a.blocks[d.Index] != nil {
				a.blocks[d.Index].stopped = true
			}
		case events.TypeBlockAbort:
			if a := steps[d.Step]; a != nil && a.blocks[d.Index] != nil {
				a.blocks[d.Index].stopped = false
			}
		}
	}
	var out []string
	for _, s := range stepOrder {
		a := steps[s]
		var parts []events.Part
		for _, i := range a.order {
			b := a.blocks[i]
			if b == nil || !b.stopped {
				continue
			}
			switch b.typ {
			case events.BlockText:
				parts = append(parts, events.Part{Type: events.PartText, Text: b.text.String()})
			case events.BlockToolUse:
				parts = append(parts, events.Part{Type: events.PartToolUse, ID: b.id, Name: b.name})
			}
		}
		if len(parts) > 0 {
			out = append(out, describeParts(parts))
		}
	}
	return out
}

// stateSettles bounds how long after a turn's end its state may still
// say running: a few turn AckWaits (3–5 s in these tests), for a request
// redelivered to a replica that then records the end.
const stateSettles = 30 * time.Second

// storedSettles bounds how long the count of a turn's stored results
// may differ from one per call. The count comes from the stream's
// information, which a replica that believes its group leaderless (one
// back from a partition, until it hears from the leader) answers with
// what it has: the leader's answer comes on a later request.
const storedSettles = 30 * time.Second

// storedResults counts a turn's stored results per call until there is
// one for each of calls and no other, or within passed, and returns the
// last count.
func (c *cluster) storedResults(id string, calls []string, within time.Duration) map[string]uint64 {
	c.t.Helper()
	var first map[string]uint64
	stored, took := settle(within, func() (map[string]uint64, bool) {
		stored := c.toolResults(id)
		if first == nil {
			first = stored
		}
		ok := len(stored) == len(calls)
		for _, call := range calls {
			ok = ok && stored[call] == 1
		}
		return stored, ok
	})
	if took > 0 {
		// Says which explanation held when a run needed the wait.
		c.t.Logf("turn %s: LLMW_TOOLRESULTS' count read for %v (first answer %v, last %v)", id, took.Round(time.Millisecond), first, stored)
	}
	return stored
}

// finalState reads a turn's state until it is neither running nor
// paused or within passed, and returns the last one read.
func (c *cluster) finalState(id string, within time.Duration) *turn.State {
	c.t.Helper()
	st, took := settle(within, func() (*turn.State, bool) {
		st := c.state(id)
		return st, st.Status != turn.StatusRunning
	})
	if took > time.Second {
		c.t.Logf("turn %s: state settled (%s by %s) %s after the end was seen", id, st.Status, st.Owner, took.Round(time.Millisecond))
	}
	return st
}

// settle calls read every 200 ms until it says done or within passed,
// and returns the last value read and how long the reads took when it
// needed more than one (0 when the first was done).
func settle[T any](within time.Duration, read func() (T, bool)) (T, time.Duration) {
	start := time.Now()
	for n := 1; ; n++ {
		v, done := read()
		if done && n == 1 {
			return v, 0
		}
		if done || time.Since(start) > within {
			return v, time.Since(start)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
