package llm_test

import (
	"context"
	"errors"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
)

// rawFromBytes turns fuzz bytes into an arbitrary raw provider stream: two
// bytes per event, small index range so blocks collide, every kind of
// malformation reachable.
func rawFromBytes(data []byte) []events.Event {
	types := []events.BlockType{events.BlockText, events.BlockThinking, events.BlockToolUse, events.BlockToolResult, "", "bogus"}
	statuses := []events.StreamStatus{events.StatusStarted, events.StatusCompleted, events.StatusCancelled, events.StatusFailed, "", "odd"}
	reasons := []events.StopReason{"", events.StopEndTurn, events.StopToolUse, "nope"}
	var evs []events.Event
	for i := 0; i+1 < len(data); i += 2 {
		op, arg := data[i], data[i+1]
		idx := int(arg%6) - 1 // -1..4
		bt := types[int(arg>>3)%len(types)]
		switch op % 12 {
		case 0:
			id, name := "", ""
			if arg&0x40 != 0 {
				id = "id" + string('a'+rune(arg%3))
			}
			if arg&0x80 != 0 {
				name = "tool"
			}
			evs = append(evs, events.BlockStart{Index: idx, BlockType: bt, ID: id, Name: name, Server: op&0x10 != 0})
		case 1:
			evs = append(evs, events.TextDelta(idx, "t"))
		case 2:
			evs = append(evs, events.ThinkingDelta(idx, "k"))
		case 3:
			evs = append(evs, events.InputJSONDelta(idx, `{"a":`))
		case 4:
			evs = append(evs, events.BlockStop{Index: idx, BlockType: bt, StopReason: reasons[int(op>>4)%len(reasons)], Signature: "s"})
		case 5:
			evs = append(evs, events.BlockAbort{Index: idx, BlockType: bt, Reason: string(data[i : i+1])})
		case 6:
			evs = append(evs, events.StatusEvent{Status: statuses[int(arg)%len(statuses)]})
		case 7:
			evs = append(evs, events.ErrorEvent{Code: "c", Message: string(data[i+1 : i+2])[:arg%2]})
		case 8:
			evs = append(evs, events.UsageEvent{}, events.PingEvent{})
		case 9:
			evs = append(evs, events.BlockDelta{Index: idx, Kind: events.DeltaKind(arg % 5), Content: "?"})
		case 10:
			evs = append(evs, nil)
		case 11:
			evs = append(evs, events.BlockStart{Index: int(arg) << 20, BlockType: bt, ID: "big", Name: "n"})
		}
	}
	return evs
}

func FuzzNormalize(f *testing.F) {
	f.Add([]byte{}, false)
	f.Add([]byte{1, 1, 1, 1, 0}, false)                     // deltas without start (goroutine path)
	f.Add([]byte{0, 0x90, 3, 0x91, 4, 0x91, 6, 1}, false)   // tool use, stop, completed
	f.Add([]byte{0, 0x10, 0, 0x10, 1, 0, 4, 0}, true)       // restart, source error
	f.Add([]byte{6, 0, 6, 3, 7, 1, 6, 1, 1, 2}, false)      // started, failed, error, late events
	f.Add([]byte{0, 0x11, 11, 3, 9, 4, 10, 0, 5, 0}, false) // nameless tool, big index, odd delta, nil, abort
	f.Fuzz(func(t *testing.T, data []byte, fail bool) {
		raw := rawFromBytes(data)
		var src llm.Stream = llm.SliceStream(raw...)
		if fail {
			src = llmtest.NewScripted(llmtest.Script{Events: raw, StreamErr: errors.New("broken")}).MustStream(t)
		}
		// Odd lengths take the goroutine path (cancellable ctx).
		ctx := context.Background()
		if len(data)%2 == 1 {
			ctx = t.Context()
		}
		evs, err := llm.Collect(llm.Normalize(ctx, src, llm.NormalizeOptions{}))
		if err != nil {
			t.Fatalf("Collect: %v", err)
		}
		if err := llm.CheckWellFormed(evs); err != nil {
			t.Fatalf("%v\nraw: %#v\nout: %#v", err, raw, evs)
		}
		// Tool ids are unique within the stream.
		seen := map[string]bool{}
		for _, ev := range evs {
			if s, ok := ev.(events.BlockStart); ok && s.BlockType == events.BlockToolUse {
				if seen[s.ID] {
					t.Fatalf("tool id %q given twice", s.ID)
				}
				seen[s.ID] = true
			}
		}
	})
}
