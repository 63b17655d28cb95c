package turn

import (
	"encoding/json"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/worker"
)

// A run that continues a turn numbers its sub-agent calls from the
// state it continues (State.SubAgentCalls): calls that a compaction
// took out of the checkpoint's transcript still count against
// Config.MaxChildren, and the numbering goes on in the next checkpoint.
func TestSubAgentCallsCountedFromTheState(t *testing.T) {
	run := &turnRun{
		base:     State{SubAgents: []string{"echo@1"}, SubAgentCalls: map[string]int{"a": 1, "b": 2}},
		children: runChildren{subAgents: map[string]*subAgentTool{"echo": {name: "echo", ref: "echo@1"}}},
	}
	// The compacted transcript holds the summary and the third call only.
	cp := &worker.Checkpoint{Messages: []events.Message{
		events.UserText("summary of the calls a and b"),
		{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("c", "echo", json.RawMessage(`{"prompt":"3"}`))}},
	}}
	run.noteChildren(cp)
	if n := run.childOrdinal("c"); n != 3 {
		t.Fatalf("the third sub-agent call is number %d; want 3 (a and b counted from the state)", n)
	}
	if n := run.childOrdinal("d"); n != 4 {
		t.Fatalf("the next call is number %d; want 4", n)
	}
	if got := run.subAgentCalls(); len(got) != 4 || got["a"] != 1 || got["d"] != 4 {
		t.Fatalf("the next checkpoint's numbering %v; want a..d as 1..4", got)
	}
	if run.base.SubAgentCalls["c"] != 0 {
		t.Fatal("the run's numbering wrote into the state it continues")
	}
}
