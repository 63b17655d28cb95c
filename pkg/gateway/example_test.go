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
