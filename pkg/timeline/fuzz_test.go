package timeline_test

import (
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/timeline"
)

// eventsFromBytes turns fuzz bytes into an arbitrary provider event
// sequence: two bytes per event (what and which index), indexes in a small
// range so that starts, deltas and stops collide often.
func eventsFromBytes(data []byte) []events.Event {
	types := []events.BlockType{events.BlockText, events.BlockThinking, events.BlockToolUse, events.BlockToolResult, "bogus"}
	var evs []events.Event
	for i := 0; i+1 < len(data); i += 2 {
		op, idx := data[i], int(data[i+1]%5)-1 // -1..3
		bt := types[int(op>>4)%len(types)]
		switch op % 10 {
		case 0:
			evs = append(evs, events.BlockStart{Index: idx, BlockType: bt, ID: "id", Name: "n"})
		case 1:
			evs = append(evs, events.TextDelta(idx, "t"))
		case 2:
			evs = append(evs, events.ThinkingDelta(idx, "k"))
		case 3:
			evs = append(evs, events.InputJSONDelta(idx, string(data[i:i+2])))
		case 4:
			evs = append(evs, events.BlockStop{Index: idx, BlockType: bt})
		case 5:
			evs = append(evs, events.BlockAbort{Index: idx, BlockType: bt, Reason: "r"})
		case 6:
			evs = append(evs, events.UsageEvent{})
		case 7:
			evs = append(evs, events.StatusEvent{Status: events.StatusCompleted})
		case 8:
			evs = append(evs, events.BlockDelta{Index: idx, Kind: events.DeltaKind(op >> 5), Content: "?"})
		case 9:
			evs = append(evs, nil, events.PingEvent{}, events.ErrorEvent{Message: "e"})
		}
	}
	return evs
}

// scopeTracker checks the scope contract: every scope a handler sees starts
// fresh (zero), is closed by exactly one stop or abort, and sees nothing
// after that.
type scopeTracker struct {
	t      *testing.T
	next   int
	closed map[int]bool // scope id → closed
}

type trackedScope struct{ id int }

func (st *scopeTracker) see(s *trackedScope, ph timeline.Phase) {
	if s.id == 0 {
		st.next++
		s.id = st.next
		st.closed[s.id] = false
	}
	if st.closed[s.id] {
		st.t.Fatalf("scope %d got a %s event after it was closed", s.id, ph)
	}
	if ph == timeline.PhaseStop || ph == timeline.PhaseAbort {
		st.closed[s.id] = true
	}
}

func FuzzTimelineScopes(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 1, 1, 4, 1})                // start, delta, stop
	f.Add([]byte{1, 1, 1, 2, 4, 1, 4, 2})          // implicit starts, interleaved
	f.Add([]byte{0x20, 0, 3, 0, 0x20, 0, 5, 0})    // tool_use start, delta, restart, abort
	f.Add([]byte{0x30, 3, 1, 3, 0x14, 3, 7, 0})    // tool_result routed to text, stop
	f.Add([]byte{2, 4, 8, 4, 0x48, 4, 9, 0, 6, 0}) // thinking, odd delta kinds, meta
	f.Fuzz(func(t *testing.T, data []byte) {
		st := &scopeTracker{t: t, closed: map[int]bool{}}
		tl := timeline.New()
		timeline.OnFunc(tl, timeline.TextBlock, func(s *trackedScope, ev timeline.TextBlockEvent) { st.see(s, ev.Phase) })
		timeline.OnFunc(tl, timeline.TextBlock, func(s *trackedScope, ev timeline.TextBlockEvent) { st.see(s, ev.Phase) })
		timeline.OnFunc(tl, timeline.ThinkingBlock, func(s *trackedScope, ev timeline.ThinkingBlockEvent) { st.see(s, ev.Phase) })
		timeline.OnFunc(tl, timeline.ToolUseBlock, func(s *trackedScope, ev timeline.ToolUseBlockEvent) { st.see(s, ev.Phase) })
		calls := timeline.NewToolCallCollector()
		timeline.On(tl, timeline.ToolUseBlock, calls)
		text := timeline.NewTextBlockCollector()
		timeline.On(tl, timeline.TextBlock, text)

		evs := eventsFromBytes(data)
		for i, ev := range evs {
			tl.Dispatch(ev)
			// A handler registered mid-stream must not break the contract.
			if i == len(evs)/2 {
				timeline.OnFunc(tl, timeline.TextBlock, func(s *trackedScope, ev timeline.TextBlockEvent) { st.see(s, ev.Phase) })
			}
		}
		tl.AbortCurrentBlock("end of fuzz input")
		if open := tl.OpenBlocks(); len(open) != 0 {
			t.Fatalf("blocks open after AbortCurrentBlock: %v", open)
		}
		for id, closed := range st.closed {
			if !closed {
				t.Fatalf("scope %d was never closed", id)
			}
		}
		for _, c := range calls.Collected() {
			if c.Err == nil && (len(c.Input) == 0 || c.Input[0] != '{') {
				t.Fatalf("call without error has input %q", c.Input)
			}
		}
	})
}
