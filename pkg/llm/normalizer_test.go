package llm_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

func normalizeSlice(t *testing.T, raw []events.Event) []events.Event {
	t.Helper()
	evs, err := llm.Collect(llm.Normalize(t.Context(), llm.SliceStream(raw...), llm.NormalizeOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := llm.CheckWellFormed(evs); err != nil {
		t.Fatalf("not well-formed: %v", err)
	}
	return evs
}

// A source that reuses indexes past the first 64 blocks gets them
// renumbered, each to the lowest index not used yet.
func TestNormalizeRenumbersPastSixtyFourBlocks(t *testing.T) {
	var raw []events.Event
	for i := range 70 {
		raw = append(raw, events.BlockStart{Index: i, BlockType: events.BlockText}, events.BlockStop{Index: i})
	}
	// 3 and 65 again, then 100 and 64 again.
	for _, i := range []int{3, 65, 100, 64} {
		raw = append(raw, events.BlockStart{Index: i, BlockType: events.BlockText}, events.BlockStop{Index: i})
	}
	raw = append(raw, events.StatusEvent{Status: events.StatusCompleted})
	var got []int
	for _, ev := range normalizeSlice(t, raw) {
		if st, ok := ev.(events.BlockStart); ok {
			got = append(got, st.Index)
		}
	}
	want := []int{70, 71, 100, 72}
	if len(got) != 74 || fmt.Sprint(got[70:]) != fmt.Sprint(want) {
		t.Fatalf("%d starts, the last four at %v, want 74 and %v", len(got), got[min(70, len(got)):], want)
	}
	for i := range 70 {
		if got[i] != i {
			t.Fatalf("start %d at index %d, want %d", i, got[i], i)
		}
	}
}

// Tool ids stay as the source sent them unless one was given out before in
// the stream, however many calls came between.
func TestNormalizeReplacesRepeatedToolIDs(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e", "f", "a", "f", "e", "g"}
	var raw []events.Event
	for i, id := range ids {
		raw = append(raw, events.BlockStart{Index: i, BlockType: events.BlockToolUse, ID: id, Name: "t"}, events.BlockStop{Index: i})
	}
	raw = append(raw, events.StatusEvent{Status: events.StatusCompleted})
	var got []string
	for _, ev := range normalizeSlice(t, raw) {
		if st, ok := ev.(events.BlockStart); ok {
			got = append(got, st.ID)
		}
	}
	if len(got) != len(ids) {
		t.Fatalf("ids %q, want %d", got, len(ids))
	}
	seen := map[string]bool{}
	for i, id := range got {
		repeated := i == 6 || i == 7 || i == 8
		switch {
		case seen[id]:
			t.Errorf("call %d: id %q given out twice", i, id)
		case repeated && !strings.HasPrefix(id, "call_"):
			t.Errorf("call %d: id %q, want a new call_ id for the repeated %q", i, id, ids[i])
		case !repeated && id != ids[i]:
			t.Errorf("call %d: id %q, want the source's %q", i, id, ids[i])
		}
		seen[id] = true
	}
}

// A stream that is well-formed already costs the normalizer no boxing:
// what normalizing it allocates beyond reading it does not grow with its
// blocks. The source is rebuilt for each run (its events boxed the same
// way every time), so the difference between the two counts is the
// normalizer's own.
func TestNormalizePassesWellFormedEventsThrough(t *testing.T) {
	source := func(blocks int) []events.Event {
		evs := []events.Event{events.StatusEvent{Status: events.StatusStarted}}
		for i := range blocks {
			evs = append(evs,
				events.BlockStart{Index: i, BlockType: events.BlockToolUse, ID: fmt.Sprintf("call_%d", i), Name: "echo"},
				events.InputJSONDelta(i, `{"n":1}`),
				events.BlockStop{Index: i, BlockType: events.BlockToolUse, StopReason: events.StopToolUse})
		}
		return append(evs, events.StatusEvent{Status: events.StatusCompleted, Model: "m", ResponseID: "r"})
	}
	read := func(s llm.Stream) {
		for s.Next() {
		}
		_ = s.Close()
	}
	ctx := t.Context()
	extra := func(blocks int) float64 {
		plain := testing.AllocsPerRun(50, func() { read(llm.SliceStream(source(blocks)...)) })
		normalized := testing.AllocsPerRun(50, func() { read(llm.Normalize(ctx, llm.SliceStream(source(blocks)...), llm.NormalizeOptions{})) })
		return normalized - plain
	}
	// Three blocks more, each a start and a stop that boxing again would
	// allocate: less than one allocation more in all (the race detector's
	// runtime adds one now and then; up to 4 tool ids the normalizer keeps
	// them in an array).
	if few, many := extra(1), extra(4); many-few >= 3 {
		t.Errorf("normalizing a well-formed stream allocates %.0f more than reading it with 1 block, %.0f with 4: events are boxed again", few, many)
	}
	got := normalizeSlice(t, source(3))
	if want := source(3); len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	} else {
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("event %d = %#v, want %#v", i, got[i], want[i])
			}
		}
	}
}
