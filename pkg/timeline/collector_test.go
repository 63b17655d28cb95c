package timeline_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/timeline"
)

func TestTextBlockCollector(t *testing.T) {
	tl := timeline.New()
	c := timeline.NewTextBlockCollector()
	timeline.On(tl, timeline.TextBlock, c)
	if c.HasContent() || c.Collected() != nil {
		t.Fatal("new collector is not empty")
	}
	dispatchAll(tl,
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "Hel"),
		events.TextDelta(0, "lo"),
		events.BlockStop{Index: 0, BlockType: events.BlockText, Signature: "gsig"},
		// aborted: dropped
		events.BlockStart{Index: 1, BlockType: events.BlockText},
		events.TextDelta(1, "partial"),
		events.BlockAbort{Index: 1, BlockType: events.BlockText, Reason: "x"},
		// empty: dropped
		events.BlockStart{Index: 2, BlockType: events.BlockText},
		events.BlockStop{Index: 2, BlockType: events.BlockText},
		// a provider-run tool's result: not the model's text
		events.BlockStart{Index: 3, BlockType: events.BlockToolResult, ToolUseID: "s1"},
		events.TextDelta(3, "search results"),
		events.BlockStop{Index: 3, BlockType: events.BlockToolResult},
		// implicit start
		events.TextDelta(4, "world"),
		events.BlockStop{Index: 4, BlockType: events.BlockText},
	)
	if !c.HasContent() {
		t.Fatal("HasContent = false")
	}
	if got, want := c.Collected(), []string{"Hello", "world"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Collected = %q, want %q", got, want)
	}
	wantBlocks := []timeline.CollectedText{{Index: 0, Text: "Hello", Signature: "gsig"}, {Index: 4, Text: "world"}}
	if got := c.Blocks(); !reflect.DeepEqual(got, wantBlocks) {
		t.Fatalf("Blocks = %+v, want %+v", got, wantBlocks)
	}
	if got := c.TakeCollected(); !reflect.DeepEqual(got, []string{"Hello", "world"}) {
		t.Fatalf("TakeCollected = %q", got)
	}
	if c.HasContent() || c.TakeBlocks() != nil {
		t.Fatal("collector not empty after take")
	}
	dispatchAll(tl, events.TextDelta(5, "again"), events.BlockStop{Index: 5, BlockType: events.BlockText})
	if got := c.TakeBlocks(); !reflect.DeepEqual(got, []timeline.CollectedText{{Index: 5, Text: "again"}}) {
		t.Fatalf("TakeBlocks = %+v", got)
	}
	dispatchAll(tl, events.TextDelta(6, "x"), events.BlockStop{Index: 6, BlockType: events.BlockText})
	c.Clear()
	if c.HasContent() {
		t.Fatal("HasContent after Clear")
	}
}

func TestTextCollectorStateText(t *testing.T) {
	tl := timeline.New()
	var seen string
	c := timeline.NewTextBlockCollector()
	timeline.OnFunc(tl, timeline.TextBlock, func(s *timeline.TextCollectorState, ev timeline.TextBlockEvent) {
		c.OnEvent(s, ev)
		seen = s.Text()
	})
	dispatchAll(tl, events.TextDelta(0, "a"), events.TextDelta(0, "b"))
	if seen != "ab" {
		t.Fatalf("scope text = %q, want ab", seen)
	}
}

func TestThinkingBlockCollector(t *testing.T) {
	tl := timeline.New()
	c := timeline.NewThinkingBlockCollector()
	timeline.On(tl, timeline.ThinkingBlock, c)
	dispatchAll(tl,
		events.BlockStart{Index: 0, BlockType: events.BlockThinking},
		events.ThinkingDelta(0, "step 1"),
		events.ThinkingDelta(0, ", step 2"),
		events.BlockStop{Index: 0, BlockType: events.BlockThinking, Signature: "sig0"},
		// redacted thinking: only a signature
		events.BlockStart{Index: 1, BlockType: events.BlockThinking},
		events.BlockStop{Index: 1, BlockType: events.BlockThinking, Signature: "enc"},
		// nothing at all: dropped
		events.BlockStart{Index: 2, BlockType: events.BlockThinking},
		events.BlockStop{Index: 2, BlockType: events.BlockThinking},
		events.ThinkingDelta(3, "cut"),
		events.BlockAbort{Index: 3, BlockType: events.BlockThinking},
	)
	want := []timeline.CollectedThinking{{Index: 0, Thinking: "step 1, step 2", Signature: "sig0"}, {Index: 1, Signature: "enc"}}
	if !c.HasContent() {
		t.Fatal("HasContent = false")
	}
	if got := c.Collected(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Collected = %+v, want %+v", got, want)
	}
	if got := c.TakeCollected(); !reflect.DeepEqual(got, want) {
		t.Fatalf("TakeCollected = %+v", got)
	}
	if c.HasContent() {
		t.Fatal("not empty after take")
	}
	dispatchAll(tl, events.ThinkingDelta(4, "x"), events.BlockStop{Index: 4, BlockType: events.BlockThinking})
	c.Clear()
	if c.Collected() != nil {
		t.Fatal("not empty after Clear")
	}
}

func toolBlock(index int, id, name string, chunks ...string) []events.Event {
	evs := []events.Event{events.BlockStart{Index: index, BlockType: events.BlockToolUse, ID: id, Name: name}}
	for _, c := range chunks {
		evs = append(evs, events.InputJSONDelta(index, c))
	}
	return append(evs, events.BlockStop{Index: index, BlockType: events.BlockToolUse, StopReason: events.StopToolUse})
}

func TestToolCallCollectorParsesInputAtStop(t *testing.T) {
	tl := timeline.New()
	c := timeline.NewToolCallCollector()
	timeline.On(tl, timeline.ToolUseBlock, c)

	var evs []events.Event
	evs = append(evs, toolBlock(0, "c0", "weather", `{"city"`, `: "Tokyo",`, ` "days": 3}`)...)
	evs = append(evs, toolBlock(1, "c1", "now")...)                         // no input: {}
	evs = append(evs, toolBlock(2, "c2", "now", "  \n ")...)                // blank input: {}
	evs = append(evs, toolBlock(3, "c3", "weather", " {\"a\":[1,2]}\n")...) // trimmed
	dispatchAll(tl, evs...)
	dispatchAll(tl,
		events.BlockStart{Index: 4, BlockType: events.BlockToolUse, ID: "c4", Name: "x"},
		events.InputJSONDelta(4, `{"half":`),
		events.BlockAbort{Index: 4, BlockType: events.BlockToolUse, Reason: "cancelled"}, // not kept
		events.BlockStart{Index: 5, BlockType: events.BlockToolUse, ID: "srv", Name: "web_search", Server: true},
		events.BlockStop{Index: 5, BlockType: events.BlockToolUse, Signature: "s5"},
	)
	if !c.HasPendingCalls() {
		t.Fatal("HasPendingCalls = false")
	}
	want := []timeline.CollectedCall{
		{Index: 0, ID: "c0", Name: "weather", Input: json.RawMessage(`{"city": "Tokyo", "days": 3}`), RawInput: `{"city": "Tokyo", "days": 3}`},
		{Index: 1, ID: "c1", Name: "now", Input: json.RawMessage(`{}`)},
		{Index: 2, ID: "c2", Name: "now", Input: json.RawMessage(`{}`), RawInput: "  \n "},
		{Index: 3, ID: "c3", Name: "weather", Input: json.RawMessage(`{"a":[1,2]}`), RawInput: " {\"a\":[1,2]}\n"},
		{Index: 5, ID: "srv", Name: "web_search", Input: json.RawMessage(`{}`), Server: true, Signature: "s5"},
	}
	got := c.Collected()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Collected =\n%+v\nwant\n%+v", got, want)
	}
	if tc := got[0].ToolCall(); tc.ID != "c0" || tc.Name != "weather" || string(tc.Input) != `{"city": "Tokyo", "days": 3}` {
		t.Fatalf("ToolCall() = %+v", tc)
	}
	if taken := c.TakeCollected(); len(taken) != 5 || c.HasPendingCalls() {
		t.Fatalf("TakeCollected took %d, pending after = %t", len(taken), c.HasPendingCalls())
	}
	dispatchAll(tl, toolBlock(6, "c6", "now")...)
	c.Clear()
	if c.HasPendingCalls() {
		t.Fatal("pending after Clear")
	}
}

func TestToolCallCollectorReportsInvalidInputOnTheCall(t *testing.T) {
	cases := []struct {
		raw, msg string
	}{
		{`{"city":`, "unexpected end of JSON input"},
		{`{"a":1}}`, "invalid character '}' after top-level value"},
		{`not json`, "invalid character 'o' in literal null"},
		{`[1,2]`, "must be a JSON object, got an array"},
		{`"s"`, "must be a JSON object, got a string"},
		{`42`, "must be a JSON object, got a number"},
		{`true`, "must be a JSON object, got a boolean"},
		{`null`, "must be a JSON object, got null"},
		{"\xff", "invalid character"},
	}
	for _, tc := range cases {
		t.Run(tc.raw, func(t *testing.T) {
			tl := timeline.New()
			c := timeline.NewToolCallCollector()
			timeline.On(tl, timeline.ToolUseBlock, c)
			dispatchAll(tl, toolBlock(0, "call_9", "weather", tc.raw)...)
			calls := c.TakeCollected()
			if len(calls) != 1 {
				t.Fatalf("collected %d calls, want 1", len(calls))
			}
			call := calls[0]
			if !errors.Is(call.Err, timeline.ErrInvalidToolInput) {
				t.Fatalf("Err = %v, want ErrInvalidToolInput", call.Err)
			}
			msg := call.Err.Error()
			for _, part := range []string{tc.msg, `"call_9"`, `"weather"`} {
				if !strings.Contains(msg, part) {
					t.Errorf("Err = %q, want it to contain %q", msg, part)
				}
			}
			if string(call.Input) != "{}" || call.RawInput != tc.raw {
				t.Errorf("Input = %s RawInput = %q, want {} and the raw input", call.Input, call.RawInput)
			}
		})
	}
}

// TestCollectorsReadConcurrently runs with -race: collectors are read from
// another goroutine while the Timeline dispatches.
func TestCollectorsReadConcurrently(t *testing.T) {
	tl := timeline.New()
	text := timeline.NewTextBlockCollector()
	calls := timeline.NewToolCallCollector()
	think := timeline.NewThinkingBlockCollector()
	timeline.On(tl, timeline.TextBlock, text)
	timeline.On(tl, timeline.ToolUseBlock, calls)
	timeline.On(tl, timeline.ThinkingBlock, think)

	const n = 200
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				_ = text.Collected()
				_ = text.HasContent()
				_ = calls.Collected()
				_ = calls.HasPendingCalls()
				_ = think.Collected()
			}
		}
	}()
	for i := 0; i < n; i++ {
		dispatchAll(tl, events.TextDelta(3*i, "t"), events.BlockStop{Index: 3 * i, BlockType: events.BlockText})
		dispatchAll(tl, toolBlock(3*i+1, "c", "f", "{}")...)
		dispatchAll(tl, events.ThinkingDelta(3*i+2, "k"), events.BlockStop{Index: 3*i + 2, BlockType: events.BlockThinking})
	}
	close(stop)
	wg.Wait()
	if got := len(text.TakeCollected()); got != n {
		t.Fatalf("texts = %d, want %d", got, n)
	}
	if got := len(calls.TakeCollected()); got != n {
		t.Fatalf("calls = %d, want %d", got, n)
	}
	if got := len(think.TakeCollected()); got != n {
		t.Fatalf("thinking = %d, want %d", got, n)
	}
}

func TestZeroValueCollectors(t *testing.T) {
	tl := timeline.New()
	var text timeline.TextBlockCollector
	var calls timeline.ToolCallCollector
	timeline.On(tl, timeline.TextBlock, &text)
	timeline.On(tl, timeline.ToolUseBlock, &calls)
	dispatchAll(tl, events.TextDelta(0, "x"), events.BlockStop{Index: 0, BlockType: events.BlockText})
	dispatchAll(tl, toolBlock(1, "id", "n", `{"k":"v"}`)...)
	if !text.HasContent() || !calls.HasPendingCalls() {
		t.Fatal("zero-value collectors collected nothing")
	}
}

func TestToolCallScopeInputJSON(t *testing.T) {
	tl := timeline.New()
	var seen string
	c := timeline.NewToolCallCollector()
	timeline.OnFunc(tl, timeline.ToolUseBlock, func(s *timeline.ToolCallScope, ev timeline.ToolUseBlockEvent) {
		c.OnEvent(s, ev)
		seen = s.InputJSON()
	})
	dispatchAll(tl, events.BlockStart{Index: 0, BlockType: events.BlockToolUse, ID: "a", Name: "b"}, events.InputJSONDelta(0, `{"x"`), events.InputJSONDelta(0, `:1`))
	if seen != `{"x":1` {
		t.Fatalf("scope input = %q", seen)
	}
	// Empty deltas anywhere, the input whole in one delta, in three: the
	// scope holds the concatenation so far, and the call the whole of it.
	for _, deltas := range [][]string{
		{"", `{"y":2}`},
		{`{"y":2}`},
		{`{"y":2}`, ""},
		{`{`, "", `"y":`, `2}`},
		{"", "", `{"y"`, `:2}`},
	} {
		evs := []events.Event{events.BlockStart{Index: 1, BlockType: events.BlockToolUse, ID: "c", Name: "d"}}
		want := ""
		for _, d := range deltas {
			evs = append(evs, events.InputJSONDelta(1, d))
		}
		for _, ev := range evs {
			tl.Dispatch(ev)
			if d, ok := ev.(events.BlockDelta); ok {
				want += d.Content
				if seen != want {
					t.Fatalf("deltas %q: scope input %q, want %q", deltas, seen, want)
				}
			}
		}
		tl.Dispatch(events.BlockStop{Index: 1, BlockType: events.BlockToolUse})
		calls := c.TakeCollected()
		if len(calls) != 1 || calls[0].RawInput != `{"y":2}` || string(calls[0].Input) != `{"y":2}` || calls[0].Err != nil {
			t.Fatalf("deltas %q: collected %+v", deltas, calls)
		}
	}
}
