package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
)

// The rows of docs/protocol.md §11's mapping table that the recorded
// turns do not reach: each event sequence gives the parts the table
// says, each valid under the protocol's schema.
func TestMapperTable(t *testing.T) {
	step := events.TurnStep{Step: 1}
	for _, tc := range []struct {
		name string
		evs  []events.WorkerEvent
		want []string // the parts, JSON; data parts by type only
	}{
		{"failed", []events.WorkerEvent{step, events.TurnFailed{Code: "max_steps", Reason: "too many steps"}},
			[]string{`{"type":"start-step"}`, `{"type":"finish-step"}`, `{"type":"error","errorText":"max_steps: too many steps"}`, `{"type":"finish","finishReason":"error"}`}},
		{"aborted", []events.WorkerEvent{step, events.TurnAborted{Code: "cancelled", Reason: "cancelled by a client"}},
			[]string{`{"type":"start-step"}`, `{"type":"finish-step"}`, `{"type":"abort","reason":"cancelled: cancelled by a client"}`}},
		{"length", []events.WorkerEvent{events.TurnCompleted{StopReason: events.StopMaxTokens}},
			[]string{`{"type":"finish","finishReason":"length"}`}},
		{"refusal", []events.WorkerEvent{events.TurnCompleted{StopReason: events.StopRefusal}},
			[]string{`{"type":"finish","finishReason":"content-filter"}`}},
		{"invalid input", []events.WorkerEvent{events.ToolCallComplete{Step: 1, ID: "c1", Name: "calc", Input: json.RawMessage(`{"a":`), Error: "unexpected end of JSON input"}},
			[]string{`{"type":"tool-input-error","toolCallId":"c1","toolName":"calc","input":"{\"a\":","errorText":"unexpected end of JSON input"}`}},
		{"tool error", []events.WorkerEvent{events.ToolCallResult{CallID: "c1", Name: "calc", Content: "division by zero", IsError: true}},
			[]string{`{"type":"tool-output-error","toolCallId":"c1","errorText":"division by zero"}`}},
		{"text output", []events.WorkerEvent{events.ToolCallResult{CallID: "c1", Name: "calc", Content: "four"}},
			[]string{`{"type":"tool-output-available","toolCallId":"c1","output":"four"}`}},
		{"JSON output", []events.WorkerEvent{events.ToolCallResult{CallID: "c1", Name: "calc", Content: `{"n":4}`}},
			[]string{`{"type":"tool-output-available","toolCallId":"c1","output":{"n":4}}`}},
		{"image output", []events.WorkerEvent{events.ToolCallResult{CallID: "c1", Name: "shot", Content: "the screen:",
			Parts: []events.Part{events.TextPart("the screen:"), events.ImageURLPart("image/png", "https://example.com/s.png")}}},
			[]string{`{"type":"tool-output-available","toolCallId":"c1","output":[{"type":"text","text":"the screen:"},{"type":"image","media_type":"image/png","url":"https://example.com/s.png"}]}`}},
		{"structured output", []events.WorkerEvent{step, events.TurnCompleted{StopReason: events.StopEndTurn, Output: json.RawMessage(`{"city":"Oslo"}`)}},
			[]string{`{"type":"start-step"}`, `{"type":"data-llmw-output","id":"output","data":{"city":"Oslo"}}`, `{"type":"finish-step"}`, `{"type":"finish","finishReason":"stop"}`}},
		{"warning", []events.WorkerEvent{events.TurnWarning{Step: 1, Model: "openai:gpt", Warnings: []events.Warning{{Setting: "top_k", Message: "openai has no top_k"}}}},
			[]string{`{"type":"data-llmw-warning","data":{"step":1,"model":"openai:gpt","warnings":[{"setting":"top_k","message":"openai has no top_k"}]}}`}},
		{"compacted", []events.WorkerEvent{events.TurnCompacted{ID: "t1.c1", To: 12, Policy: "offload,clear,summary", Model: "openai:gpt", TokensBefore: 30000, TokensAfter: 9000, Step: 3}},
			[]string{`{"type":"data-llmw-compacted","id":"compacted-t1.c1","data":{"id":"t1.c1","to":12,"policy":"offload,clear,summary","model":"openai:gpt","tokens_before":30000,"tokens_after":9000,"step":3}}`}},
		{"denied by a person", []events.WorkerEvent{events.ToolSkipped{CallID: "c1", Name: "rm", Reason: "the user denied"}},
			[]string{`{"type":"tool-output-denied","toolCallId":"c1"}`}},
		{"skipped by a hook", []events.WorkerEvent{events.ToolSkipped{CallID: "c1", Name: "rm", Hook: "no-rm", Reason: "skipped by no-rm"}},
			[]string{`{"type":"tool-output-error","toolCallId":"c1","errorText":"skipped by no-rm"}`}},
		{"started", []events.WorkerEvent{events.ToolStarted{CallID: "c1", Name: "slow", Input: json.RawMessage(`{"n":1}`)}},
			[]string{`{"type":"data-llmw-tool-started","id":"started-c1","data":{"call_id":"c1","name":"slow","input":{"n":1}}}`}},
		{"cancelled while the model streamed", []events.WorkerEvent{events.ToolCancelled{CallID: "c1", Name: "look", Step: 1, Reason: "the model call failed"}},
			[]string{`{"type":"tool-output-error","toolCallId":"c1","errorText":"cancelled: the model call failed"}`}},
		{"progress", []events.WorkerEvent{events.ToolProgress{CallID: "c1", Name: "slow", Progress: 1, Total: 4}, events.ToolProgress{CallID: "c1", Name: "slow", Progress: 2, Total: 4}},
			[]string{`{"type":"data-llmw-tool-progress","id":"progress-c1","data":{"call_id":"c1","name":"slow","progress":1,"total":4}}`, `{"type":"data-llmw-tool-progress","id":"progress-c1","data":{"call_id":"c1","name":"slow","progress":2,"total":4}}`}},
		{"hooks", []events.WorkerEvent{events.HookDecision{Hook: "h", Event: events.HookBeforeToolCall, Result: "deny", CallID: "c1"}, events.HookMessage{Hook: "h", Event: events.HookOnTurnEnd, Messages: []events.Message{events.AssistantText("note")}}},
			[]string{"data-llmw-hook-decision", "data-llmw-hook-message"}},
		{"server tool", []events.WorkerEvent{step,
			events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 0, BlockType: events.BlockToolUse, ID: "s1", Name: "web_search", Server: true}, Step: 1},
			events.WorkerBlockStop{BlockStop: events.BlockStop{Index: 0}, Step: 1},
			events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 1, BlockType: events.BlockToolResult, ToolUseID: "s1"}, Step: 1},
			events.WorkerBlockDelta{BlockDelta: events.TextDelta(1, "results"), Step: 1},
			events.WorkerBlockStop{BlockStop: events.BlockStop{Index: 1}, Step: 1}},
			[]string{`{"type":"start-step"}`, `{"type":"tool-input-start","toolCallId":"s1","toolName":"web_search","providerExecuted":true}`,
				`{"type":"tool-output-available","toolCallId":"s1","output":"results","providerExecuted":true}`}},
		{"aborted block", []events.WorkerEvent{step,
			events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 0, BlockType: events.BlockText}, Step: 1},
			events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "hal"), Step: 1},
			events.WorkerBlockAbort{BlockAbort: events.BlockAbort{Index: 0}, Step: 1}},
			[]string{`{"type":"start-step"}`, `{"type":"text-start","id":"text-1"}`, `{"type":"text-delta","id":"text-1","delta":"hal"}`, `{"type":"text-end","id":"text-1"}`, "data-llmw-block-abort"}},
		{"pause", []events.WorkerEvent{step, events.TurnPaused{Reason: "needs a person", Hook: "approve", Pending: []events.ToolCall{{ID: "c1", Name: "rm", Input: json.RawMessage(`{}`)}, {ID: "c2", Name: "rm", Input: json.RawMessage(`{}`)}}}},
			[]string{`{"type":"start-step"}`, `{"type":"tool-approval-request","approvalId":"approval-c1","toolCallId":"c1"}`, `{"type":"tool-approval-request","approvalId":"approval-c2","toolCallId":"c2"}`, "data-llmw-paused", `{"type":"finish-step"}`}},
		{"stopped while paused", []events.WorkerEvent{step, events.TurnPaused{Reason: "r", Pending: []events.ToolCall{{ID: "c1", Name: "rm"}}}, events.TurnAborted{Code: "cancelled", Reason: "stop"}},
			[]string{`{"type":"start-step"}`, `{"type":"tool-approval-request","approvalId":"approval-c1","toolCallId":"c1"}`, "data-llmw-paused", `{"type":"finish-step"}`,
				`{"type":"tool-output-error","toolCallId":"c1","errorText":"not run: the turn ended (cancelled: stop)"}`, `{"type":"abort","reason":"cancelled: stop"}`}},
		{"resumed calls are settled by their results", []events.WorkerEvent{events.TurnPaused{Reason: "r", Pending: []events.ToolCall{{ID: "c1", Name: "rm"}}}, events.TurnResumed{}, events.TurnFailed{Code: "internal", Reason: "x"}},
			[]string{`{"type":"tool-approval-request","approvalId":"approval-c1","toolCallId":"c1"}`, "data-llmw-paused", "data-llmw-resumed", `{"type":"error","errorText":"internal: x"}`, `{"type":"finish","finishReason":"error"}`}},
		{"open parts end with the turn", []events.WorkerEvent{step,
			events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 0, BlockType: events.BlockThinking}, Step: 1},
			events.TurnCompleted{StopReason: events.StopEndTurn}},
			[]string{`{"type":"start-step"}`, `{"type":"reasoning-start","id":"reasoning-1"}`, `{"type":"reasoning-end","id":"reasoning-1"}`, `{"type":"finish-step"}`, `{"type":"finish","finishReason":"stop"}`}},
		{"open parts end in the order they started", []events.WorkerEvent{step,
			events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 0, BlockType: events.BlockThinking}, Step: 1},
			events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 1, BlockType: events.BlockText}, Step: 1},
			events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 2, BlockType: events.BlockThinking}, Step: 1},
			events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 3, BlockType: events.BlockText}, Step: 1},
			events.TurnAborted{Code: "cancelled", Reason: "stop"}},
			[]string{`{"type":"start-step"}`, `{"type":"reasoning-start","id":"reasoning-1"}`, `{"type":"text-start","id":"text-2"}`,
				`{"type":"reasoning-start","id":"reasoning-3"}`, `{"type":"text-start","id":"text-4"}`,
				`{"type":"reasoning-end","id":"reasoning-1"}`, `{"type":"text-end","id":"text-2"}`,
				`{"type":"reasoning-end","id":"reasoning-3"}`, `{"type":"text-end","id":"text-4"}`,
				`{"type":"finish-step"}`, `{"type":"abort","reason":"cancelled: stop"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := gateway.NewMapper()
			var got []gateway.Chunk
			for _, ev := range tc.evs {
				got = m.Map(got, ev)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d parts, want %d: %v", len(got), len(tc.want), got)
			}
			for i, c := range got {
				b := c.AppendJSON(nil)
				if err := checkPart(b); err != nil {
					t.Errorf("part %d %s: %v", i, b, err)
				}
				want := tc.want[i]
				if !strings.HasPrefix(want, "{") {
					if c.Type != want {
						t.Errorf("part %d: %s, want a %s", i, b, want)
					}
					continue
				}
				if !jsonEq(string(b), want) {
					t.Errorf("part %d:\n got %s\nwant %s", i, b, want)
				}
			}
		})
	}
}

// A tree waits for a person only when nothing of it runs: a paused turn
// with a running child, or a child paused beside a running sibling, or
// a child that ended before its parent took its result, does not.
func TestMapperWaiting(t *testing.T) {
	child := func(call, id string, st events.ChildStatus) events.ToolChild {
		return events.ToolChild{CallID: call, Name: "a", ChildTurnID: id, Depth: 1, Status: st}
	}
	paused := events.TurnPaused{Reason: "r", Pending: []events.ToolCall{{ID: "x", Name: "t", Input: json.RawMessage(`{}`)}}}
	type ev struct {
		turn string
		e    events.WorkerEvent
	}
	for _, tc := range []struct {
		name string
		evs  []ev
		want bool
	}{
		{"root paused", []ev{{"r", paused}}, true},
		{"root paused, then resumed", []ev{{"r", paused}, {"r", events.TurnResumed{}}}, false},
		{"child paused", []ev{{"r", child("c1", "a", events.ChildStarted)}, {"a", paused}}, true},
		{"child paused, sibling runs", []ev{{"r", child("c1", "a", events.ChildStarted)}, {"r", child("c2", "b", events.ChildStarted)}, {"a", paused}}, false},
		{"child paused, sibling ended, not taken", []ev{{"r", child("c1", "a", events.ChildStarted)}, {"r", child("c2", "b", events.ChildStarted)}, {"a", paused}, {"b", events.TurnCompleted{}}}, false},
		{"child paused, sibling taken", []ev{{"r", child("c1", "a", events.ChildStarted)}, {"r", child("c2", "b", events.ChildStarted)}, {"a", paused}, {"b", events.TurnCompleted{}}, {"r", child("c2", "b", events.ChildCompleted)}}, true},
		{"child paused, another tool runs", []ev{{"r", child("c1", "a", events.ChildStarted)}, {"r", events.ToolStarted{CallID: "c3", Name: "slow"}}, {"a", paused}}, false},
		{"root paused, child runs", []ev{{"r", child("c1", "a", events.ChildStarted)}, {"r", paused}}, false},
		{"grandchild paused", []ev{{"r", child("c1", "a", events.ChildStarted)}, {"a", child("c5", "g", events.ChildStarted)}, {"g", paused}}, true},
		{"child paused, then aborted", []ev{{"r", child("c1", "a", events.ChildStarted)}, {"a", paused}, {"a", events.TurnAborted{Code: "cancelled"}}}, false},
	} {
		m := gateway.NewTreeMapper("r")
		for _, e := range tc.evs {
			m.MapOf(nil, e.turn, e.e)
			m.Found()
		}
		if got := m.Waiting(); got != tc.want {
			t.Errorf("%s: Waiting() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
