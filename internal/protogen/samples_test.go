package protogen

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/transcript"
	"github.com/llmworker/llmworker/pkg/turn"
	"github.com/llmworker/llmworker/pkg/worker"
)

func compile(t *testing.T, v any) *jsonschema.Schema {
	t.Helper()
	s, err := Schema(v)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://s.json")
	if err != nil {
		t.Fatalf("%T: %v", v, err)
	}
	return sch
}

func validate(t *testing.T, sch *jsonschema.Schema, v any) error {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(inst)
}

// What the encoder writes is valid against the published schema, for a
// filled-in sample of every payload.
func TestSamplesMatchSchemas(t *testing.T) {
	msgs := []events.Message{
		events.UserText("hi"),
		{Role: events.RoleAssistant, Content: []events.Part{
			events.ThinkingPart("t", "sig"), events.TextPart("x"),
			events.ToolUsePart("c1", "get_weather", json.RawMessage(`{"city":"Paris"}`)),
		}},
		{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("c1", "sunny", false)}},
	}
	temp := 0.2
	retries := 2
	tools := []events.ToolDefinition{{Name: "get_weather", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	usage := events.UsageEvent{InputTokens: events.Int64(1), OutputTokens: events.Int64(2)}
	call := events.ToolCall{ID: "c1", Name: "get_weather", Input: json.RawMessage(`{}`)}
	samples := []any{
		events.PingEvent{Timestamp: 1}, usage, events.StatusEvent{Status: events.StatusFailed},
		events.ErrorEvent{Code: "x", Message: "y"},
		events.BlockStart{Index: 1, BlockType: events.BlockToolUse, ID: "c1", Name: "n"},
		events.TextDelta(0, "a"), events.InputJSONDelta(1, "{"),
		events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn},
		events.BlockStop{Index: 0, BlockType: events.BlockText},
		events.BlockAbort{Index: 0, BlockType: events.BlockText, Reason: "r"},
		events.CompletionRequest{RequestID: "r1", Model: "openai:gpt", System: "s", Messages: msgs, Tools: tools, MaxTokens: 10, Temperature: &temp, Thinking: &events.ThinkingConfig{BudgetTokens: 1024}},
		events.CompletionReply{RequestID: "r1", StreamSubject: "llmw.llm.stream.r1"},
		msgs[1], tools[0],
		events.TurnRequest{TurnID: "t1", SessionID: "s1", Model: "anthropic:c", Messages: msgs, Tools: []string{"*"}, MaxSteps: 3, MaxTurnEndRetries: &retries, Metadata: map[string]any{"k": "v"}},
		events.ResumeRequest{TurnID: "t1", Decisions: map[string]events.Decision{"a": {Kind: events.DecisionApprove}, "b": {Kind: events.DecisionEdit, Input: json.RawMessage(`{}`)}, "c": {Kind: events.DecisionDeny, Reason: "no"}}},
		events.TurnStarted{TurnID: "t1"}, events.TurnStep{Step: 1},
		events.TurnPaused{Reason: "approval", Pending: []events.ToolCall{call}},
		events.TurnResumed{Decisions: map[string]events.Decision{"a": {Kind: events.DecisionDeny}}},
		events.TurnCompleted{Messages: msgs, StopReason: events.StopEndTurn, Usage: usage},
		events.TurnEnded{Reason: "r", Code: "max_steps"},
		events.TurnRejected{TurnID: "t-01", Request: events.TypeTurnSubmit, Code: events.RejectTurnExists, Reason: "r", Status: "completed"},
		events.TurnWarning{Step: 1, Model: "openai:gpt", Warnings: []events.Warning{{Setting: "top_k", Message: "openai has no top_k"}}},
		events.TurnQueued{Step: 2, Attempt: 1, Model: "anthropic:claude-sonnet-4-5", Position: 3},
		events.TurnCompacted{ID: "t-01.c1", To: 12, Policy: "offload,clear,summary", Model: "anthropic:claude-haiku-4-5", TokensBefore: 180000, TokensAfter: 60000, Usage: &usage, Step: 7},
		events.TurnCompleted{Messages: msgs, StopReason: events.StopEndTurn, Usage: usage, Output: json.RawMessage(`{"city":"Oslo"}`)},
		events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 0, BlockType: events.BlockText}, Step: 1},
		events.WorkerBlockDelta{BlockDelta: events.ThinkingDelta(0, "x"), Step: 2},
		events.WorkerBlockStop{BlockStop: events.BlockStop{Index: 0, BlockType: events.BlockText}, Step: 1},
		events.WorkerBlockAbort{BlockAbort: events.BlockAbort{Index: 0, BlockType: events.BlockText, Reason: "x"}, Step: 1},
		events.TextComplete{Step: 1, Text: "x"},
		events.ToolCallComplete{Step: 1, ID: "c1", Name: "n", Input: json.RawMessage(`{}`)},
		events.ToolStarted{CallID: "c1", Name: "n"},
		events.ToolProgress{CallID: "c1", Name: "n", Progress: 3, Total: 10, Message: "page 3 of 10"},
		events.ToolSkipped{CallID: "c1", Name: "n", Hook: "h", Reason: "r"},
		events.ToolCancelled{CallID: "c1", Name: "n", Step: 1, Reason: "the model call was made again without it"},
		events.ToolChild{CallID: "c1", Name: "billing", ChildTurnID: "t1-c1", ChildSessionID: "_", Agent: "billing@4", Depth: 1, Status: events.ChildPaused, Pending: []events.ToolCall{call}},
		events.TurnStarted{TurnID: "t1-c1", ParentTurnID: "t1", ParentCallID: "c1", RootTurnID: "t1", Depth: 1},
		events.HookDecision{Hook: "h", Event: events.HookBeforeToolCall, Result: events.HookSkip, MS: 1.5},
		events.HookMessage{Hook: "h", Event: events.HookOnTurnEnd, Messages: msgs[:1]},
		events.UsageReport{Step: 1, Usage: usage, Total: usage},
		events.ToolCatalogEntry{Name: "n", InputSchema: json.RawMessage(`{"type":"object"}`), TimeoutMS: 1000},
		events.ToolCallRequest{CallID: "c1", TurnID: "t1", Name: "n", Input: json.RawMessage(`{}`), Deadline: time.Now()},
		events.ToolCallResult{CallID: "c1", TurnID: "t1", Name: "n", Content: "ok"},
		events.ToolCallResult{CallID: "c1", TurnID: "t1", Name: "n", Content: "ok", Parts: []events.Part{events.TextPart("ok"), events.ImageURLPart("image/png", "https://example.com/a.png")}},
		events.HookRegistration{Name: "h", Event: events.HookBeforeToolCall, Subject: "llmw.hook.h", Failure: events.FailOpen},
		events.AgentDefinition{Name: "support", Description: "answers", Model: "a:b", FallbackModels: []string{"a:c"}, System: "s",
			Tools: []string{"*"}, Agents: []string{"billing"}, MaxSteps: 4, MaxTotalTokens: 1000, OnParentCancel: events.OnParentCancelAbandon,
			InputSchema: json.RawMessage(`{"type":"object"}`), ModelOptions: events.ModelOptions{ReasoningEffort: events.ReasoningEffort("low")}},
		events.AgentDefinition{Name: "remote", A2AURL: "https://agents.example.com/a2a"},
		events.TurnRequest{TurnID: "t2", Agent: "support@3", Messages: []events.Message{events.UserText("hi")}},
		events.HookRequest{Event: events.HookBeforeToolCall, TurnID: "t1", ToolCall: &call, Tool: &tools[0], Variables: map[string]string{"a": "b"}},
		events.HookResponse{Result: events.HookContinue, ToolCall: &call, Emit: msgs[:1]},
		turn.SessionRecord{SessionID: "s1", Messages: msgs, LastTurn: "t1", Updated: time.Now()},
		turn.SessionRecord{SessionID: "s1", Transcript: &transcript.Ref{Len: 12, Seq: 40}, LastTurn: "t1", Updated: time.Now()},
		turn.State{Version: turn.StateVersion, Status: turn.StatusRunning, Owner: "a", Seq: 7,
			Request: &events.TurnRequest{TurnID: "t1", Model: "a:b", Messages: []events.Message{}},
			Checkpoint: &worker.Checkpoint{Version: worker.CheckpointVersion, TurnID: "t1", Phase: worker.PhaseTools, Step: 1, Messages: msgs,
				Pending: []worker.PendingCall{{Call: call, State: worker.CallDone, Output: &worker.ToolOutput{Content: "ok", Parts: []events.Part{events.TextPart("ok"), events.ImageURLPart("image/png", "https://example.com/a.png")}}}}, OutputRepairs: 1},
			Updated: time.Now()},
		turn.State{Version: turn.StateVersion, Status: turn.StatusRunning, Owner: "a", Seq: 7,
			Request:    &events.TurnRequest{TurnID: "t1", Model: "a:b", Messages: []events.Message{}},
			Checkpoint: &worker.Checkpoint{Version: worker.CheckpointVersion, TurnID: "t1", Phase: worker.PhaseModel, Step: 1, Messages: []events.Message{}},
			Transcript: &turn.StateTranscript{Session: transcript.Ref{Len: 4, Seq: 9}, Turn: transcript.Ref{Len: 3, Seq: 12}},
			Updated:    time.Now()},
	}
	byType := map[reflect.Type]*jsonschema.Schema{}
	for _, e := range Entries() {
		byType[reflect.TypeOf(e.Value)] = compile(t, e.Value)
	}
	seen := map[reflect.Type]bool{}
	for _, s := range samples {
		sch := byType[reflect.TypeOf(s)]
		if sch == nil {
			t.Fatalf("no schema for %T", s)
		}
		seen[reflect.TypeOf(s)] = true
		if err := validate(t, sch, s); err != nil {
			t.Errorf("%T does not match its schema: %v", s, err)
		}
	}
	for ty := range byType {
		if !seen[ty] {
			t.Errorf("no sample for %v", ty)
		}
	}
	// And the schemas reject what the decoders reject.
	if err := validate(t, byType[reflect.TypeOf(events.BlockDelta{})], map[string]any{"index": 0, "text": "a", "thinking": "b"}); err == nil {
		t.Error("delta schema accepts two kinds")
	}
	if err := validate(t, byType[reflect.TypeOf(events.CompletionRequest{})], map[string]any{"model": "a:b", "messages": []any{}}); err == nil {
		t.Error("request schema accepts a missing request_id")
	}
}
