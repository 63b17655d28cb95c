package providertest

import (
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// WellFormed checks the stream invariants of docs/protocol.md §3 on a collected
// event sequence and names the first violation: the first event is status
// started; every block has one start, then deltas of its kind, then one
// stop or abort; indexes are unique; tool_use blocks have an id and a name;
// nothing follows the single terminal status, which is last, and a failed
// status follows an error event. (llm.CheckWellFormed is the library's
// checker; this one keeps provider tests independent of it.)
func WellFormed(evs []events.Event) error {
	if len(evs) == 0 {
		return fmt.Errorf("empty stream")
	}
	if st, ok := evs[0].(events.StatusEvent); !ok || st.Status != events.StatusStarted {
		return fmt.Errorf("event 0: want status started, got %#v", evs[0])
	}
	type blk struct {
		typ    events.BlockType
		closed bool
	}
	blocks := map[int]*blk{}
	sawError := false
	for i, ev := range evs {
		if i > 0 {
			if st, ok := evs[i-1].(events.StatusEvent); ok && st.Status.Terminal() {
				return fmt.Errorf("event %d: %T after terminal status %s", i, ev, st.Status)
			}
		}
		switch e := ev.(type) {
		case events.StatusEvent:
			if !e.Status.Valid() {
				return fmt.Errorf("event %d: invalid status %q", i, e.Status)
			}
			if i > 0 && e.Status == events.StatusStarted {
				return fmt.Errorf("event %d: second status started", i)
			}
			if e.Status == events.StatusFailed && !sawError {
				return fmt.Errorf("event %d: status failed without an error event before it", i)
			}
		case events.ErrorEvent:
			if e.Message == "" {
				return fmt.Errorf("event %d: error event without message", i)
			}
			sawError = true
		case events.BlockStart:
			if err := e.Validate(); err != nil {
				return fmt.Errorf("event %d: block start: %v", i, err)
			}
			if _, dup := blocks[e.Index]; dup {
				return fmt.Errorf("event %d: index %d reused", i, e.Index)
			}
			blocks[e.Index] = &blk{typ: e.BlockType}
		case events.BlockDelta:
			b := blocks[e.Index]
			if b == nil || b.closed {
				return fmt.Errorf("event %d: delta for index %d that is not open", i, e.Index)
			}
			want := events.DeltaText
			switch b.typ {
			case events.BlockThinking:
				want = events.DeltaThinking
			case events.BlockToolUse:
				want = events.DeltaInputJSON
			}
			if e.Kind != want {
				return fmt.Errorf("event %d: %v delta in a %s block", i, e.Kind, b.typ)
			}
		case events.BlockStop:
			if err := e.Validate(); err != nil {
				return fmt.Errorf("event %d: block stop: %v", i, err)
			}
			b := blocks[e.Index]
			if b == nil || b.closed || b.typ != e.BlockType {
				return fmt.Errorf("event %d: stop of index %d (%s) that is not open with that type", i, e.Index, e.BlockType)
			}
			b.closed = true
		case events.BlockAbort:
			b := blocks[e.Index]
			if b == nil || b.closed || b.typ != e.BlockType {
				return fmt.Errorf("event %d: abort of index %d (%s) that is not open with that type", i, e.Index, e.BlockType)
			}
			b.closed = true
		case events.UsageEvent, events.PingEvent:
		default:
			return fmt.Errorf("event %d: unknown event %T", i, ev)
		}
	}
	last, ok := evs[len(evs)-1].(events.StatusEvent)
	if !ok || !last.Status.Terminal() {
		return fmt.Errorf("last event is %#v, want a terminal status", evs[len(evs)-1])
	}
	for idx, b := range blocks {
		if !b.closed {
			return fmt.Errorf("block %d (%s) never stopped or aborted", idx, b.typ)
		}
	}
	return nil
}

// Collect reads s to its end and closes it.
func Collect(s llm.Stream) ([]events.Event, error) {
	defer s.Close()
	var out []events.Event
	for s.Next() {
		out = append(out, s.Current())
	}
	return out, s.Err()
}
