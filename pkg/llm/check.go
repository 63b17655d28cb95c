package llm

import (
	"fmt"
	"maps"
	"slices"

	"github.com/llmworker/llmworker/pkg/events"
)

// CheckWellFormed checks the invariants of a provider stream of docs/protocol.md
// §3, which Normalize guarantees:
//
//   - the first event is status started and no other status is started;
//   - the last event is a terminal status (completed, cancelled or failed),
//     and it is the only one;
//   - a failed status comes after an error event;
//   - every event is valid by its own Validate (error events have a
//     message, tool_use starts an id and a name, ...);
//   - every block starts once, on an index no earlier block used, then has
//     deltas of its kind (text for text and tool_result, thinking,
//     input_json for tool_use), then exactly one stop or abort of its type;
//   - no block is open at the terminal status.
//
// The error matches ErrMalformedStream and names the event by position.
func CheckWellFormed(evs []events.Event) error {
	bad := func(i int, format string, args ...any) error {
		what := "end of stream"
		if i < len(evs) {
			what = "event " + fmt.Sprint(i)
			if evs[i] != nil {
				what += " (" + evs[i].EventType() + ")"
			}
		}
		return fmt.Errorf("%w: %s: %s", ErrMalformedStream, what, fmt.Sprintf(format, args...))
	}
	if len(evs) == 0 {
		return bad(0, "no events; want status started first")
	}
	open := map[int]events.BlockType{}
	used := map[int]bool{}
	sawError := false
	for i, ev := range evs {
		if ev == nil {
			return bad(i, "nil event")
		}
		if v, ok := ev.(events.Validator); ok {
			if err := v.Validate(); err != nil {
				return bad(i, "invalid: %v", err)
			}
		}
		if st, ok := ev.(events.StatusEvent); ok {
			switch {
			case i == 0 && st.Status != events.StatusStarted:
				return bad(i, "first event is status %s, want started", st.Status)
			case i == 0:
				continue
			case st.Status == events.StatusStarted:
				return bad(i, "status started again")
			case i != len(evs)-1:
				return bad(i, "terminal status %s is not the last event", st.Status)
			}
			if len(open) > 0 {
				return bad(i, "terminal status with open blocks %v", keys(open))
			}
			if st.Status == events.StatusFailed && !sawError {
				return bad(i, "status failed without an error event before it")
			}
			return nil
		}
		if i == 0 {
			return bad(i, "first event is not status started")
		}
		switch e := ev.(type) {
		case events.ErrorEvent:
			sawError = true
		case events.BlockStart:
			if used[e.Index] {
				return bad(i, "block index %d used again", e.Index)
			}
			used[e.Index] = true
			open[e.Index] = e.BlockType
		case events.BlockDelta:
			t, ok := open[e.Index]
			if !ok {
				return bad(i, "delta for block %d, which is not open", e.Index)
			}
			if !deltaFits(e.Kind, t) {
				return bad(i, "%s delta in %s block %d", e.Kind, t, e.Index)
			}
		case events.BlockStop:
			if err := checkEnd(open, e.Index, e.BlockType); err != "" {
				return bad(i, "%s", err)
			}
		case events.BlockAbort:
			if err := checkEnd(open, e.Index, e.BlockType); err != "" {
				return bad(i, "%s", err)
			}
		}
	}
	return bad(len(evs), "no terminal status (completed, cancelled or failed) at the end")
}

func checkEnd(open map[int]events.BlockType, index int, typ events.BlockType) string {
	t, ok := open[index]
	if !ok {
		return fmt.Sprintf("end of block %d, which is not open", index)
	}
	if t != typ {
		return fmt.Sprintf("end of %s block %d says block type %s", t, index, typ)
	}
	delete(open, index)
	return ""
}

func keys(m map[int]events.BlockType) []int { return slices.Sorted(maps.Keys(m)) }
