package timeline_test

import (
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/timeline"
)

// PrintHandler is docs/architecture.md#the-timeline's first example: it prints deltas as they
// arrive and needs no scope.
type PrintHandler struct{}

func (PrintHandler) OnEvent(_ *struct{}, ev timeline.TextBlockEvent) {
	if ev.Phase == timeline.PhaseDelta {
		fmt.Print(ev.Text)
	}
}

// TextCollector is docs/architecture.md#the-timeline's second example: a string scope buffers the
// block, the stop moves it into results.
type TextCollector struct{ results []string }

func (c *TextCollector) OnEvent(buffer *string, ev timeline.TextBlockEvent) {
	switch ev.Phase {
	case timeline.PhaseDelta:
		*buffer += ev.Text
	case timeline.PhaseStop:
		c.results = append(c.results, *buffer)
		*buffer = ""
	}
}

func Example_printHandler() {
	tl := timeline.New()
	timeline.On(tl, timeline.TextBlock, PrintHandler{})

	for _, ev := range []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "Hello, "),
		events.TextDelta(0, "world!"),
		events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn},
		events.StatusEvent{Status: events.StatusCompleted},
	} {
		tl.Dispatch(ev)
	}
	fmt.Println()
	// Output: Hello, world!
}

func Example_textCollector() {
	tl := timeline.New()
	c := &TextCollector{}
	timeline.On(tl, timeline.TextBlock, c)

	for _, ev := range []events.Event{
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "first "),
		events.TextDelta(0, "block"),
		events.BlockStop{Index: 0, BlockType: events.BlockText},
		// No start: the scope starts implicitly (OpenAI-style stream).
		events.TextDelta(1, "second block"),
		events.BlockStop{Index: 1, BlockType: events.BlockText},
	} {
		tl.Dispatch(ev)
	}
	fmt.Printf("%q\n", c.results)
	// Output: ["first block" "second block"]
}

func ExampleToolCallCollector() {
	tl := timeline.New()
	calls := timeline.NewToolCallCollector()
	timeline.On(tl, timeline.ToolUseBlock, calls)

	for _, ev := range []events.Event{
		events.BlockStart{Index: 0, BlockType: events.BlockToolUse, ID: "call_1", Name: "get_weather"},
		events.InputJSONDelta(0, `{"city":`),
		events.InputJSONDelta(0, `"Tokyo"}`),
		events.BlockStop{Index: 0, BlockType: events.BlockToolUse, StopReason: events.StopToolUse},
		events.BlockStart{Index: 1, BlockType: events.BlockToolUse, ID: "call_2", Name: "get_time"},
		events.BlockStop{Index: 1, BlockType: events.BlockToolUse},
		events.BlockStart{Index: 2, BlockType: events.BlockToolUse, ID: "call_3", Name: "get_weather"},
		events.InputJSONDelta(2, `{"city":`),
		events.BlockStop{Index: 2, BlockType: events.BlockToolUse},
	} {
		tl.Dispatch(ev)
	}
	for _, c := range calls.TakeCollected() {
		fmt.Printf("%s %s %s err=%v\n", c.ID, c.Name, c.Input, c.Err != nil)
	}
	// Output:
	// call_1 get_weather {"city":"Tokyo"} err=false
	// call_2 get_time {} err=false
	// call_3 get_weather {} err=true
}

func ExampleOnFunc() {
	tl := timeline.New()
	// The scope type (*int) is inferred from the function: a delta counter
	// per block.
	timeline.OnFunc(tl, timeline.ThinkingBlock, func(deltas *int, ev timeline.ThinkingBlockEvent) {
		switch ev.Phase {
		case timeline.PhaseDelta:
			*deltas++
		case timeline.PhaseStop:
			fmt.Printf("block %d: %d deltas, signature %q\n", ev.Index, *deltas, ev.Signature)
		}
	})
	timeline.OnFunc(tl, timeline.Usage, func(_ *struct{}, u events.UsageEvent) {
		fmt.Println("output tokens:", *u.OutputTokens)
	})

	tl.Dispatch(events.BlockStart{Index: 0, BlockType: events.BlockThinking})
	tl.Dispatch(events.ThinkingDelta(0, "Let me "))
	tl.Dispatch(events.ThinkingDelta(0, "think."))
	tl.Dispatch(events.BlockStop{Index: 0, BlockType: events.BlockThinking, Signature: "sig"})
	tl.Dispatch(events.UsageEvent{OutputTokens: events.Int64(12)})
	// Output:
	// block 0: 2 deltas, signature "sig"
	// output tokens: 12
}

func ExampleTimeline_AbortCurrentBlock() {
	tl := timeline.New()
	text := timeline.NewTextBlockCollector()
	timeline.On(tl, timeline.TextBlock, text)
	timeline.OnFunc(tl, timeline.TextBlock, func(_ *struct{}, ev timeline.TextBlockEvent) {
		if ev.Phase == timeline.PhaseAbort {
			fmt.Println("aborted block", ev.Index, "because", ev.Reason)
		}
	})

	tl.Dispatch(events.BlockStart{Index: 0, BlockType: events.BlockText})
	tl.Dispatch(events.TextDelta(0, "half an ans"))
	tl.AbortCurrentBlock("cancelled")
	fmt.Println("collected:", text.Collected())
	// Output:
	// aborted block 0 because cancelled
	// collected: []
}
