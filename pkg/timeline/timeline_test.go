package timeline_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/timeline"
)

// log records what handlers saw, as compact strings, plus which scope
// instance each event went to (scopes are numbered the first time a handler
// sees them, so a fresh scope gets a new number).
type log struct {
	lines  []string
	scopes int
}

type recScope struct {
	id     int
	events int
}

func (l *log) scope(s *recScope) int {
	if s.id == 0 {
		l.scopes++
		s.id = l.scopes
	}
	s.events++
	return s.id
}

func (l *log) text(name string) func(*recScope, timeline.TextBlockEvent) {
	return func(s *recScope, ev timeline.TextBlockEvent) {
		id := l.scope(s)
		line := fmt.Sprintf("%s#%d %s %d %s", name, id, ev.Phase, ev.Index, ev.BlockType)
		switch ev.Phase {
		case timeline.PhaseDelta:
			line += " " + ev.Text
		case timeline.PhaseStop:
			line += fmt.Sprintf(" reason=%s sig=%s", ev.StopReason, ev.Signature)
		case timeline.PhaseAbort:
			line += " why=" + ev.Reason
		}
		if ev.ToolUseID != "" {
			line += " tool_use_id=" + ev.ToolUseID
		}
		l.lines = append(l.lines, line)
	}
}

func (l *log) thinking(name string) func(*recScope, timeline.ThinkingBlockEvent) {
	return func(s *recScope, ev timeline.ThinkingBlockEvent) {
		id := l.scope(s)
		l.lines = append(l.lines, fmt.Sprintf("%s#%d %s %d %q sig=%s why=%s", name, id, ev.Phase, ev.Index, ev.Thinking, ev.Signature, ev.Reason))
	}
}

func (l *log) tool(name string) func(*recScope, timeline.ToolUseBlockEvent) {
	return func(s *recScope, ev timeline.ToolUseBlockEvent) {
		id := l.scope(s)
		l.lines = append(l.lines, fmt.Sprintf("%s#%d %s %d %s/%s server=%t %q reason=%s sig=%s why=%s", name, id, ev.Phase, ev.Index,
			ev.ID, ev.Name, ev.Server, ev.InputJSON, ev.StopReason, ev.Signature, ev.Reason))
	}
}

func dispatchAll(tl *timeline.Timeline, evs ...events.Event) {
	for _, ev := range evs {
		tl.Dispatch(ev)
	}
}

func wantLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(want) == 0 {
		want = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestMetaKindsDispatchedAtOnceInRegistrationOrder(t *testing.T) {
	tl := timeline.New()
	var got []string
	// The meta scope is started at registration and kept: the counter
	// counts across events.
	timeline.OnFunc(tl, timeline.Usage, func(n *int, u events.UsageEvent) {
		*n++
		got = append(got, fmt.Sprintf("usage1 #%d in=%d", *n, *u.InputTokens))
	})
	timeline.OnFunc(tl, timeline.Usage, func(_ *struct{}, u events.UsageEvent) {
		got = append(got, "usage2")
	})
	timeline.OnFunc(tl, timeline.Ping, func(_ *struct{}, p events.PingEvent) {
		got = append(got, fmt.Sprintf("ping %d", p.Timestamp))
	})
	timeline.OnFunc(tl, timeline.Status, func(_ *struct{}, s events.StatusEvent) {
		got = append(got, "status "+string(s.Status))
	})
	timeline.OnFunc(tl, timeline.Error, func(_ *struct{}, e events.ErrorEvent) {
		got = append(got, "error "+e.Code+": "+e.Message)
	})
	timeline.OnFunc(tl, timeline.TextBlock, func(_ *struct{}, ev timeline.TextBlockEvent) {
		got = append(got, "text "+ev.Phase.String()+" "+ev.Text)
	})

	dispatchAll(tl,
		events.StatusEvent{Status: events.StatusStarted},
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "a"),
		events.PingEvent{Timestamp: 42},
		events.UsageEvent{InputTokens: events.Int64(7)},
		events.TextDelta(0, "b"),
		events.BlockStop{Index: 0, BlockType: events.BlockText},
		events.ErrorEvent{Code: "refusal", Message: "no"},
		events.UsageEvent{InputTokens: events.Int64(9)},
		events.StatusEvent{Status: events.StatusCompleted},
	)
	wantLines(t, got,
		"status started",
		"text start ",
		"text delta a",
		"ping 42",
		"usage1 #1 in=7",
		"usage2",
		"text delta b",
		"text stop ",
		"error refusal: no",
		"usage1 #2 in=9",
		"usage2",
		"status completed",
	)
}

func TestBlockScopesFreshPerBlockAndHandler(t *testing.T) {
	tl := timeline.New()
	l := &log{}
	timeline.OnFunc(tl, timeline.TextBlock, l.text("a"))
	timeline.OnFunc(tl, timeline.TextBlock, l.text("b"))
	dispatchAll(tl,
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "x"),
		events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn, Signature: "s"},
		events.BlockStart{Index: 1, BlockType: events.BlockText},
		events.TextDelta(1, "y"),
		events.BlockAbort{Index: 1, BlockType: events.BlockText, Reason: "cut"},
	)
	wantLines(t, l.lines,
		"a#1 start 0 text",
		"b#2 start 0 text",
		"a#1 delta 0 text x",
		"b#2 delta 0 text x",
		"a#1 stop 0 text reason=end_turn sig=s",
		"b#2 stop 0 text reason=end_turn sig=s",
		"a#3 start 1 text",
		"b#4 start 1 text",
		"a#3 delta 1 text y",
		"b#4 delta 1 text y",
		"a#3 abort 1 text why=cut",
		"b#4 abort 1 text why=cut",
	)
	if got := tl.OpenBlocks(); len(got) != 0 {
		t.Fatalf("open blocks after stop/abort: %v", got)
	}
}

func TestImplicitScopeStartOnDeltaWithoutStart(t *testing.T) {
	tl := timeline.New()
	l := &log{}
	timeline.OnFunc(tl, timeline.TextBlock, l.text("t"))
	timeline.OnFunc(tl, timeline.ThinkingBlock, l.thinking("k"))
	timeline.OnFunc(tl, timeline.ToolUseBlock, l.tool("u"))
	dispatchAll(tl,
		events.ThinkingDelta(0, "hm"),
		events.TextDelta(1, "hi"),
		events.TextDelta(1, "!"),
		events.InputJSONDelta(2, "{}"),
		events.BlockStop{Index: 0, BlockType: events.BlockThinking},
		events.BlockStop{Index: 1, BlockType: events.BlockText},
		events.BlockStop{Index: 2, BlockType: events.BlockToolUse},
	)
	// No start events: the scopes start implicitly with the first delta.
	wantLines(t, l.lines,
		`k#1 delta 0 "hm" sig= why=`,
		"t#2 delta 1 text hi",
		"t#2 delta 1 text !",
		`u#3 delta 2 / server=false "{}" reason= sig= why=`,
		`k#1 stop 0 "" sig= why=`,
		"t#2 stop 1 text reason= sig=",
		`u#3 stop 2 / server=false "" reason= sig= why=`,
	)
}

func TestToolResultBlocksGoToTextHandlers(t *testing.T) {
	tl := timeline.New()
	l := &log{}
	timeline.OnFunc(tl, timeline.TextBlock, l.text("t"))
	timeline.OnFunc(tl, timeline.ToolUseBlock, l.tool("u"))
	dispatchAll(tl,
		events.BlockStart{Index: 0, BlockType: events.BlockToolUse, ID: "srv_1", Name: "web_search", Server: true},
		events.InputJSONDelta(0, `{"q":"go"}`),
		events.BlockStop{Index: 0, BlockType: events.BlockToolUse},
		events.BlockStart{Index: 1, BlockType: events.BlockToolResult, ToolUseID: "srv_1"},
		events.TextDelta(1, "results"),
		events.BlockStop{Index: 1, BlockType: events.BlockToolResult},
	)
	wantLines(t, l.lines,
		`u#1 start 0 srv_1/web_search server=true "" reason= sig= why=`,
		`u#1 delta 0 srv_1/web_search server=true "{\"q\":\"go\"}" reason= sig= why=`,
		`u#1 stop 0 srv_1/web_search server=true "" reason= sig= why=`,
		"t#2 start 1 tool_result tool_use_id=srv_1",
		"t#2 delta 1 tool_result results tool_use_id=srv_1",
		"t#2 stop 1 tool_result reason= sig= tool_use_id=srv_1",
	)
}

func TestToolUseEventsCarryIDAndNameOnEveryPhase(t *testing.T) {
	tl := timeline.New()
	l := &log{}
	timeline.OnFunc(tl, timeline.ToolUseBlock, l.tool("u"))
	dispatchAll(tl,
		events.BlockStart{Index: 3, BlockType: events.BlockToolUse, ID: "c1", Name: "f"},
		events.InputJSONDelta(3, `{"a"`),
		events.InputJSONDelta(3, `:1}`),
		events.BlockStop{Index: 3, BlockType: events.BlockToolUse, StopReason: events.StopToolUse, Signature: "g"},
		events.BlockStart{Index: 4, BlockType: events.BlockToolUse, ID: "c2", Name: "h"},
	)
	tl.AbortCurrentBlock("cancelled")
	wantLines(t, l.lines,
		`u#1 start 3 c1/f server=false "" reason= sig= why=`,
		`u#1 delta 3 c1/f server=false "{\"a\"" reason= sig= why=`,
		`u#1 delta 3 c1/f server=false ":1}" reason= sig= why=`,
		`u#1 stop 3 c1/f server=false "" reason=tool_use sig=g why=`,
		`u#2 start 4 c2/h server=false "" reason= sig= why=`,
		`u#2 abort 4 c2/h server=false "" reason= sig= why=cancelled`,
	)
}

func TestInterleavedBlocksKeepTheirOwnScopes(t *testing.T) {
	tl := timeline.New()
	var got []string
	timeline.OnFunc(tl, timeline.TextBlock, func(buf *string, ev timeline.TextBlockEvent) {
		switch ev.Phase {
		case timeline.PhaseDelta:
			*buf += ev.Text
		case timeline.PhaseStop:
			got = append(got, fmt.Sprintf("%d=%s", ev.Index, *buf))
		}
	})
	dispatchAll(tl,
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.BlockStart{Index: 1, BlockType: events.BlockText},
		events.TextDelta(0, "a"),
		events.TextDelta(1, "x"),
		events.TextDelta(0, "b"),
		events.TextDelta(1, "y"),
	)
	if open := tl.OpenBlocks(); !reflect.DeepEqual(open, []int{0, 1}) {
		t.Fatalf("OpenBlocks = %v, want [0 1]", open)
	}
	dispatchAll(tl,
		events.BlockStop{Index: 1, BlockType: events.BlockText},
		events.BlockStop{Index: 0, BlockType: events.BlockText},
	)
	wantLines(t, got, "1=xy", "0=ab")
}

func TestMismatchedAndUnknownEventsAreIgnored(t *testing.T) {
	tl := timeline.New()
	l := &log{}
	timeline.OnFunc(tl, timeline.TextBlock, l.text("t"))
	timeline.OnFunc(tl, timeline.ThinkingBlock, l.thinking("k"))
	dispatchAll(tl,
		events.BlockStop{Index: 9, BlockType: events.BlockText},  // never started
		events.BlockAbort{Index: 9, BlockType: events.BlockText}, // never started
		events.BlockStart{Index: 0, BlockType: "image"},          // unknown type
		events.BlockStart{Index: 1, BlockType: events.BlockText},
		events.ThinkingDelta(1, "wrong kind"),
		events.InputJSONDelta(1, "wrong kind"),
		events.BlockDelta{Index: 1, Kind: 77, Content: "bad kind"},
		events.BlockDelta{Index: 5, Kind: 77, Content: "bad kind, no block"},
		events.TextDelta(1, "ok"),
		// The stop's block type is taken from the open block.
		events.BlockStop{Index: 1, BlockType: events.BlockThinking},
		events.BlockStop{Index: 1, BlockType: events.BlockText}, // duplicate
		nil,
	)
	wantLines(t, l.lines,
		"t#1 start 1 text",
		"t#1 delta 1 text ok",
		"t#1 stop 1 text reason= sig=",
	)
}

func TestRestartedIndexAbortsTheOpenBlock(t *testing.T) {
	tl := timeline.New()
	l := &log{}
	timeline.OnFunc(tl, timeline.TextBlock, l.text("t"))
	timeline.OnFunc(tl, timeline.ThinkingBlock, l.thinking("k"))
	dispatchAll(tl,
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "a"),
		events.BlockStart{Index: 0, BlockType: events.BlockThinking},
		events.ThinkingDelta(0, "b"),
		events.BlockStop{Index: 0, BlockType: events.BlockThinking, Signature: "s"},
	)
	wantLines(t, l.lines,
		"t#1 start 0 text",
		"t#1 delta 0 text a",
		"t#1 abort 0 text why=block restarted",
		`k#2 start 0 "" sig= why=`,
		`k#2 delta 0 "b" sig= why=`,
		`k#2 stop 0 "" sig=s why=`,
	)
}

func TestAbortCurrentBlockAbortsEveryOpenBlockInStartOrder(t *testing.T) {
	tl := timeline.New()
	l := &log{}
	timeline.OnFunc(tl, timeline.TextBlock, l.text("t"))
	timeline.OnFunc(tl, timeline.ThinkingBlock, l.thinking("k"))
	tl.AbortCurrentBlock("nothing open") // no-op
	dispatchAll(tl,
		events.BlockStart{Index: 1, BlockType: events.BlockThinking},
		events.TextDelta(0, "t"),
	)
	tl.AbortCurrentBlock("cancelled")
	tl.AbortCurrentBlock("again") // already aborted: nothing more
	// Events for the aborted indexes after the abort start new blocks
	// (implicitly) only for deltas; stops are ignored.
	tl.Dispatch(events.BlockStop{Index: 1, BlockType: events.BlockThinking})
	wantLines(t, l.lines,
		`k#1 start 1 "" sig= why=`,
		"t#2 delta 0 text t",
		`k#1 abort 1 "" sig= why=cancelled`,
		"t#2 abort 0 text why=cancelled",
	)
	if open := tl.OpenBlocks(); len(open) != 0 {
		t.Fatalf("OpenBlocks = %v", open)
	}
}

func TestHandlerRegisteredMidBlockStartsItsScopeOnTheNextDelta(t *testing.T) {
	tl := timeline.New()
	l := &log{}
	timeline.OnFunc(tl, timeline.TextBlock, l.text("a"))
	dispatchAll(tl,
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "1"),
		events.BlockStart{Index: 1, BlockType: events.BlockText},
	)
	timeline.OnFunc(tl, timeline.TextBlock, l.text("b"))
	dispatchAll(tl,
		events.TextDelta(0, "2"),
		events.BlockStop{Index: 0, BlockType: events.BlockText},
		// b has no scope for block 1: it is not told about its stop.
		events.BlockStop{Index: 1, BlockType: events.BlockText},
	)
	wantLines(t, l.lines,
		"a#1 start 0 text",
		"a#1 delta 0 text 1",
		"a#2 start 1 text",
		"a#1 delta 0 text 2",
		"b#3 delta 0 text 2",
		"a#1 stop 0 text reason= sig=",
		"b#3 stop 0 text reason= sig=",
		"a#2 stop 1 text reason= sig=",
	)
}

func TestBlocksWithoutHandlersAreStillTracked(t *testing.T) {
	var tl timeline.Timeline // the zero value works
	dispatchAll(&tl,
		events.BlockStart{Index: 0, BlockType: events.BlockToolUse, ID: "c", Name: "n"},
		events.InputJSONDelta(0, "{}"),
	)
	if open := tl.OpenBlocks(); !reflect.DeepEqual(open, []int{0}) {
		t.Fatalf("OpenBlocks = %v, want [0]", open)
	}
	tl.Dispatch(events.BlockStop{Index: 0, BlockType: events.BlockToolUse})
	if open := tl.OpenBlocks(); len(open) != 0 {
		t.Fatalf("OpenBlocks = %v, want none", open)
	}
}

func TestOnRejectsProgrammingErrors(t *testing.T) {
	tl := timeline.New()
	mustPanic := func(name, want string, f func()) {
		t.Helper()
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(fmt.Sprint(r), want) {
				t.Errorf("%s: panic %v, want one containing %q", name, r, want)
			}
		}()
		f()
	}
	mustPanic("zero kind", "zero Kind", func() {
		timeline.OnFunc(tl, timeline.Kind[events.UsageEvent]{}, func(*struct{}, events.UsageEvent) {})
	})
	mustPanic("nil handler", "nil handler", func() {
		timeline.On[timeline.TextBlockEvent, struct{}](tl, timeline.TextBlock, nil)
	})
	mustPanic("nil func", "nil func", func() {
		timeline.OnFunc[timeline.TextBlockEvent, struct{}](tl, timeline.TextBlock, nil)
	})
}

func TestStrings(t *testing.T) {
	kinds := map[string]string{
		timeline.Usage.String():                         "usage",
		timeline.Ping.String():                          "ping",
		timeline.Status.String():                        "status",
		timeline.Error.String():                         "error",
		timeline.TextBlock.String():                     "text_block",
		timeline.ThinkingBlock.String():                 "thinking_block",
		timeline.ToolUseBlock.String():                  "tool_use_block",
		timeline.Kind[int]{}.String():                   "invalid",
		timeline.PhaseStart.String():                    "start",
		timeline.PhaseDelta.String():                    "delta",
		timeline.PhaseStop.String():                     "stop",
		timeline.PhaseAbort.String():                    "abort",
		timeline.Phase(9).String():                      "phase(9)",
		fmt.Sprint(timeline.Phase(timeline.PhaseAbort)): "abort",
	}
	for got, want := range kinds {
		if got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

type countingHandler struct{ n *int }

func (h countingHandler) OnEvent(_ *struct{}, _ events.PingEvent) { *h.n++ }

func TestOnWithHandlerValueAndHandlerFunc(t *testing.T) {
	tl := timeline.New()
	n := 0
	timeline.On(tl, timeline.Ping, countingHandler{&n})
	timeline.On(tl, timeline.Ping, timeline.HandlerFunc[events.PingEvent, int](func(c *int, _ events.PingEvent) {
		*c++
		n += 10 * *c
	}))
	tl.Dispatch(events.PingEvent{})
	tl.Dispatch(events.PingEvent{})
	// 1 + 10*1 + 1 + 10*2
	if n != 32 {
		t.Fatalf("n = %d, want 32", n)
	}
}
