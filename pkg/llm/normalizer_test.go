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
