package llm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

var (
	started   = events.StatusEvent{Status: events.StatusStarted}
	completed = events.StatusEvent{Status: events.StatusCompleted}
	failed    = events.StatusEvent{Status: events.StatusFailed}
	cancelled = events.StatusEvent{Status: events.StatusCancelled}
)

func seq(evs ...events.Event) []events.Event { return evs }

func TestCheckWellFormedAcceptsWellFormedStreams(t *testing.T) {
	ok := map[string][]events.Event{
		"empty answer": seq(started, completed),
		"text": seq(started,
			events.BlockStart{Index: 0, BlockType: events.BlockText}, events.TextDelta(0, "hi"),
			events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn},
			events.UsageEvent{}, events.PingEvent{}, completed),
		"interleaved blocks": seq(started,
			events.BlockStart{Index: 0, BlockType: events.BlockToolUse, ID: "a", Name: "f"},
			events.BlockStart{Index: 1, BlockType: events.BlockToolResult, ToolUseID: "a"},
			events.InputJSONDelta(0, "{}"), events.TextDelta(1, "r"),
			events.BlockAbort{Index: 1, BlockType: events.BlockToolResult, Reason: "x"},
			events.BlockStop{Index: 0, BlockType: events.BlockToolUse}, completed),
		"failed after error": seq(started, events.ErrorEvent{Message: "boom"}, events.PingEvent{}, failed),
		"cancelled":          seq(started, cancelled),
	}
	for name, evs := range ok {
		if err := llm.CheckWellFormed(evs); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestCheckWellFormedNamesTheViolation(t *testing.T) {
	text0 := events.BlockStart{Index: 0, BlockType: events.BlockText}
	stop0 := events.BlockStop{Index: 0, BlockType: events.BlockText}
	cases := []struct {
		name string
		evs  []events.Event
		want string
	}{
		{"no events", nil, "no events"},
		{"not started first", seq(completed), "event 0 (llmw.llm.status): first event is status completed"},
		{"meta first", seq(events.PingEvent{}, started, completed), "event 0 (llmw.llm.ping): first event is not status started"},
		{"nil event", seq(started, nil, completed), "event 1: nil event"},
		{"started twice", seq(started, started, completed), "event 1 (llmw.llm.status): status started again"},
		{"terminal not last", seq(started, completed, events.PingEvent{}), "terminal status completed is not the last event"},
		{"no terminal", seq(started, events.PingEvent{}), "end of stream: no terminal status"},
		{"failed without error", seq(started, failed), "status failed without an error event"},
		{"open block at end", seq(started, text0, completed), "terminal status with open blocks [0]"},
		{"invalid event", seq(started, events.ErrorEvent{}, failed), `invalid: field "message" is required`},
		{"tool without name", seq(started, events.BlockStart{Index: 0, BlockType: events.BlockToolUse, ID: "x"}), `field "name" is required`},
		{"tool without id", seq(started, events.BlockStart{Index: 0, BlockType: events.BlockToolUse, Name: "x"}), `field "id" is required`},
		{"index reused", seq(started, text0, stop0, text0, stop0, completed), "event 3 (llmw.llm.block.start): block index 0 used again"},
		{"delta without start", seq(started, events.TextDelta(0, "x"), completed), "delta for block 0, which is not open"},
		{"delta of wrong kind", seq(started, text0, events.ThinkingDelta(0, "x"), stop0, completed), "thinking delta in text block 0"},
		{"stop without start", seq(started, stop0, completed), "end of block 0, which is not open"},
		{"stop twice", seq(started, text0, stop0, stop0, completed), "event 3 (llmw.llm.block.stop): end of block 0, which is not open"},
		{"abort of wrong type", seq(started, text0, events.BlockAbort{Index: 0, BlockType: events.BlockThinking}, completed), "end of text block 0 says block type thinking"},
		{"negative index", seq(started, events.BlockStart{Index: -1, BlockType: events.BlockText}), `field "index" must not be negative`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := llm.CheckWellFormed(tc.evs)
			if !errors.Is(err, llm.ErrMalformedStream) {
				t.Fatalf("err = %v, want ErrMalformedStream", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}
