package hook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooktest"
)

// TimestampHook puts the current time in front of the context
// (docs/architecture.md#hooks, on_message_send). Now is injected so that the example
// is deterministic.
type TimestampHook struct{ Now func() time.Time }

func (h TimestampHook) Call(_ context.Context, in *hook.MessageSendInput) (hook.MessageSendResult, error) {
	ts := events.UserText("[" + h.Now().Format(time.RFC3339) + "]")
	in.Messages = append([]events.Message{ts}, in.Messages...)
	return hook.MessageSendResult{}, nil
}

func ExampleChain_OnMessageSend() {
	var c hook.Chain
	clock := func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }
	if err := c.OnMessageSend(TimestampHook{Now: clock}, hook.Options{Name: "timestamp"}); err != nil {
		panic(err)
	}
	in := &hook.MessageSendInput{Turn: &hook.Turn{ID: "t1"}, Messages: []events.Message{events.UserText("hello")}}
	out := c.RunMessageSend(context.Background(), in)
	fmt.Println(out.Kind)
	for _, m := range in.Messages {
		fmt.Println(m.Role, m.Text())
	}
	// Output:
	// continue
	// user [2025-01-02T03:04:05Z]
	// user hello
}

// ToolBlocker skips the tools it blocks (docs/architecture.md#hooks, before_tool_call).
type ToolBlocker struct{ Blocked map[string]bool }

func (b ToolBlocker) Call(_ context.Context, in *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
	if b.Blocked[in.Call.Name] {
		fmt.Println("Blocked tool:", in.Call.Name)
		return hook.BeforeToolCallResult{Action: hook.ToolSkip, Reason: "blocked by policy"}, nil
	}
	return hook.BeforeToolCallResult{Action: hook.ToolContinue}, nil
}

func ExampleChain_BeforeToolCall() {
	var c hook.Chain
	_ = c.BeforeToolCall(ToolBlocker{Blocked: map[string]bool{"delete_all": true}}, hook.Options{Name: "blocker"})
	rec := &hooktest.Recorder{}
	turn := &hook.Turn{ID: "t1", Observer: rec}
	for _, call := range []events.ToolCall{
		{ID: "c1", Name: "read_file", Input: json.RawMessage(`{"path":"a.txt"}`)},
		{ID: "c2", Name: "delete_all", Input: json.RawMessage(`{}`)},
	} {
		out := c.RunBeforeToolCall(context.Background(), &hook.ToolCallInput{Turn: turn, Call: call})
		fmt.Printf("%s: %s hook=%q reason=%q\n", call.Name, out.Kind, out.Hook, out.Result.Reason)
	}
	for _, d := range rec.Decisions() {
		fmt.Println(d.Hook, d.Event, d.Result, d.CallID)
	}
	// Output:
	// read_file: continue hook="" reason=""
	// Blocked tool: delete_all
	// delete_all: skip hook="blocker" reason="blocked by policy"
	// blocker before_tool_call continue c1
	// blocker before_tool_call skip c2
}

// ResultFormatter prefixes successful results (docs/architecture.md#hooks,
// after_tool_call).
type ResultFormatter struct{}

func (ResultFormatter) Call(_ context.Context, in *hook.ToolResultInput) (hook.AfterToolCallResult, error) {
	if !in.Result.IsError {
		in.Result.Content = "[OK] " + in.Result.Content
	}
	return hook.AfterToolCallResult{}, nil
}

func ExampleChain_AfterToolCall() {
	var c hook.Chain
	_ = c.AfterToolCall(ResultFormatter{}, hook.Options{Name: "formatter"})
	ok := &hook.ToolResultInput{Result: events.ToolResult{ToolUseID: "c1", Content: "42"}}
	bad := &hook.ToolResultInput{Result: events.ToolResult{ToolUseID: "c2", Content: "no such file", IsError: true}}
	c.RunAfterToolCall(context.Background(), ok)
	c.RunAfterToolCall(context.Background(), bad)
	fmt.Println(ok.Result.Content)
	fmt.Println(bad.Result.Content)
	// Output:
	// [OK] 42
	// no such file
}

// JsonValidator asks the model to fix an answer that is not JSON
// (docs/architecture.md#hooks, on_turn_end).
type JsonValidator struct{}

func (JsonValidator) Call(_ context.Context, in *hook.TurnEndInput) (hook.TurnEndResult, error) {
	for i := len(in.Messages) - 1; i >= 0; i-- {
		if m := in.Messages[i]; m.Role == events.RoleAssistant {
			if !json.Valid([]byte(m.Text())) {
				return hook.TurnEndResult{
					Action:   hook.TurnContinueWithMessages,
					Messages: []events.Message{events.UserText("Invalid JSON. Please fix and try again.")},
				}, nil
			}
			break
		}
	}
	return hook.TurnEndResult{Action: hook.TurnFinish}, nil
}

func ExampleChain_OnTurnEnd() {
	var c hook.Chain
	_ = c.OnTurnEnd(JsonValidator{}, hook.Options{Name: "json"})
	for _, answer := range []string{`{"a": 1`, `{"a": 1}`} {
		in := &hook.TurnEndInput{Messages: []events.Message{events.UserText("give me JSON"), events.AssistantText(answer)}}
		out := c.RunTurnEnd(context.Background(), in)
		fmt.Printf("%s hook=%q", out.Kind, out.Hook)
		for _, m := range out.Result.Messages {
			fmt.Printf(" → %s: %s", m.Role, m.Text())
		}
		fmt.Println()
	}
	// Output:
	// continue_with_messages hook="json" → user: Invalid JSON. Please fix and try again.
	// finish hook=""
}

// CountingHook counts tool calls; state shared by concurrent turns lives in
// atomics (docs/architecture.md#hooks, Send + Sync).
type CountingHook struct{ Count *atomic.Int64 }

func (h CountingHook) Call(context.Context, *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
	h.Count.Add(1)
	return hook.BeforeToolCallResult{}, nil
}

func Example_countingHook() {
	var c hook.Chain
	var n atomic.Int64
	_ = c.BeforeToolCall(CountingHook{Count: &n}, hook.Options{Name: "counter"})
	for _, name := range []string{"a", "b", "c"} {
		c.RunBeforeToolCall(context.Background(), &hook.ToolCallInput{Call: events.ToolCall{ID: name, Name: name}})
	}
	fmt.Println(n.Load())
	// Output: 3
}

// Priorities, matchers, variables and emitted messages together.
func Example_chain() {
	var c hook.Chain
	_ = c.BeforeToolCall(hook.BeforeToolCallFunc(func(_ context.Context, in *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
		in.Turn.Vars["shell_calls"] += "x"
		in.Turn.Emit(events.AssistantText("about to run " + in.Call.Name))
		return hook.BeforeToolCallResult{}, nil
	}), hook.Options{Name: "audit", Matcher: "^(Execute|Shell)$"})
	_ = c.BeforeToolCall(hooktest.Always[hook.ToolCallInput](hook.BeforeToolCallResult{Action: hook.ToolPause, Reason: "needs approval"}),
		hook.Options{Name: "approval", Matcher: "^Shell$", Priority: 10})
	_ = c.BeforeToolCall(hooktest.Always[hook.ToolCallInput](hook.BeforeToolCallResult{}), hook.Options{Name: "first", Priority: -1})

	rec := &hooktest.Recorder{}
	turn := &hook.Turn{ID: "t1", Observer: rec}
	for _, name := range []string{"Read", "Shell"} {
		out := c.RunBeforeToolCall(context.Background(), &hook.ToolCallInput{Turn: turn, Call: events.ToolCall{ID: "id-" + name, Name: name}})
		fmt.Printf("%s: %s hook=%q\n", name, out.Kind, out.Hook)
	}
	fmt.Println(rec.Trace())
	fmt.Println("shell_calls:", turn.Vars["shell_calls"])
	for _, m := range rec.Messages() {
		fmt.Println(m.Hook, m.Event, m.Messages[0].Text())
	}
	// Output:
	// Read: continue hook=""
	// Shell: pause hook="approval"
	// [first before_tool_call continue first before_tool_call continue audit before_tool_call continue approval before_tool_call pause]
	// shell_calls: x
	// audit before_tool_call about to run Shell
}
