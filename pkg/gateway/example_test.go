package gateway_test

import (
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
)

// A Mapper turns a turn's worker events into the protocol's parts; each
// part is written as one server-sent event.
func ExampleMapper() {
	m := gateway.NewMapper()
	var parts []gateway.Chunk
	for _, ev := range []events.WorkerEvent{
		events.TurnStep{Step: 1},
		events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 0, BlockType: events.BlockText}, Step: 1},
		events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "Hello"), Step: 1},
		events.WorkerBlockStop{BlockStop: events.BlockStop{Index: 0}, Step: 1},
		events.TurnCompleted{StopReason: events.StopEndTurn},
	} {
		parts = m.Map(parts, ev)
	}
	for _, p := range parts {
		fmt.Print(string(p.AppendSSE(nil)))
	}
	fmt.Print(gateway.Done)
	// Output:
	// data: {"type":"start-step"}
	//
	// data: {"type":"text-start","id":"text-1"}
	//
	// data: {"type":"text-delta","id":"text-1","delta":"Hello"}
	//
	// data: {"type":"text-end","id":"text-1"}
	//
	// data: {"type":"finish-step"}
	//
	// data: {"type":"finish","finishReason":"stop"}
	//
	// data: [DONE]
}

// A tree mapper follows a turn's sub-agents: the parent's llmw.tool.child
// names the child turn (Found: the subjects to read next), and the
// child's parts go into the parent's stream under the child's turn id,
// naming the call they run under.
func ExampleMapper_childTurn() {
	m := gateway.NewTreeMapper("tR")
	var parts []gateway.Chunk
	parts = m.MapOf(parts, "tR", events.ToolChild{CallID: "c1", Name: "geo", ChildTurnID: "tC", ChildSessionID: "_", Depth: 1, Status: events.ChildStarted})
	fmt.Println(m.Found())
	for _, ev := range []events.WorkerEvent{
		events.TurnStep{Step: 1},
		events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 0, BlockType: events.BlockText}, Step: 1},
		events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "Paris"), Step: 1},
		events.WorkerBlockStop{BlockStop: events.BlockStop{Index: 0}, Step: 1},
		events.TurnCompleted{StopReason: events.StopEndTurn},
	} {
		parts = m.MapOf(parts, "tC", ev)
	}
	for _, p := range parts {
		fmt.Println(string(p.AppendJSON(nil)))
	}
	// Output:
	// [{tC _}]
	// {"type":"data-llmw-child","id":"child-c1","data":{"call_id":"c1","name":"geo","child_turn_id":"tC","child_session_id":"_","depth":1,"status":"started"}}
	// {"type":"text-start","id":"tC.text-1","providerMetadata":{"llmw":{"turnId":"tC","toolCallId":"c1","depth":1}}}
	// {"type":"text-delta","id":"tC.text-1","delta":"Paris"}
	// {"type":"text-end","id":"tC.text-1"}
}
