package providertest_test

import (
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

func TestWellFormed(t *testing.T) {
	started := events.StatusEvent{Status: events.StatusStarted}
	completed := events.StatusEvent{Status: events.StatusCompleted}
	failed := events.StatusEvent{Status: events.StatusFailed}
	text := events.BlockStart{Index: 0, BlockType: events.BlockText}
	stop := events.BlockStop{Index: 0, BlockType: events.BlockText}
	ok := []events.Event{started, text, events.TextDelta(0, "a"), stop,
		events.BlockStart{Index: 1, BlockType: events.BlockToolUse, ID: "c", Name: "n"},
		events.InputJSONDelta(1, "{}"), events.BlockAbort{Index: 1, BlockType: events.BlockToolUse, Reason: "x"},
		events.UsageEvent{}, events.PingEvent{}, events.ErrorEvent{Code: "e", Message: "m"}, failed}
	if err := providertest.WellFormed(ok); err != nil {
		t.Fatalf("well-formed stream rejected: %v", err)
	}
	bad := map[string][]events.Event{
		"empty":            nil,
		"no started":       {completed},
		"no terminal":      {started},
		"two started":      {started, started, completed},
		"after terminal":   {started, completed, events.PingEvent{}},
		"failed no error":  {started, failed},
		"error no message": {started, events.ErrorEvent{Code: "x"}, failed},
		"reused index":     {started, text, stop, text, stop, completed},
		"delta not open":   {started, events.TextDelta(0, "a"), completed},
		"wrong delta kind": {started, text, events.ThinkingDelta(0, "a"), stop, completed},
		"tool without id":  {started, events.BlockStart{Index: 0, BlockType: events.BlockToolUse, Name: "n"}, completed},
		"stop not open":    {started, stop, completed},
		"abort not open":   {started, events.BlockAbort{Index: 0, BlockType: events.BlockText}, completed},
		"never stopped":    {started, text, completed},
		"bad status":       {started, events.StatusEvent{Status: "weird"}, completed},
	}
	for name, evs := range bad {
		if err := providertest.WellFormed(evs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCollect(t *testing.T) {
	evs, err := providertest.Collect(llm.SliceStream(events.StatusEvent{Status: events.StatusStarted}, events.StatusEvent{Status: events.StatusCompleted}))
	if err != nil || len(evs) != 2 {
		t.Fatalf("%v %v", evs, err)
	}
	if _, err := providertest.FixturesDir(); err != nil && !strings.Contains(err.Error(), "fixture") {
		t.Fatal(err)
	}
}
