package hook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooktest"
)

// In-process overhead of a chain of five hooks per tool call (the remote
// equivalent is in pkg/hook/hooknats).
func BenchmarkBeforeToolCall5Hooks(b *testing.B) {
	var c hook.Chain
	for i := range 5 {
		_ = c.BeforeToolCall(hooktest.Always[hook.ToolCallInput](hook.BeforeToolCallResult{}), hook.Options{Name: fmt.Sprint("h", i)})
	}
	turn := &hook.Turn{ID: "t", Observer: &discard{}}
	call := events.ToolCall{ID: "c1", Name: "read_file", Input: json.RawMessage(`{"path":"a.txt"}`)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		in := hook.ToolCallInput{Turn: turn, Call: call}
		if out := c.RunBeforeToolCall(ctx, &in); out.Stopped() {
			b.Fatal(out)
		}
	}
}

// on_message_send with a 20-message context: the cost of the per-hook copy.
func BenchmarkMessageSend3Hooks20Messages(b *testing.B) {
	var c hook.Chain
	for i := range 3 {
		_ = c.OnMessageSend(hooktest.Always[hook.MessageSendInput](hook.MessageSendResult{}), hook.Options{Name: fmt.Sprint("h", i)})
	}
	msgs := make([]events.Message, 20)
	for i := range msgs {
		msgs[i] = events.UserText(fmt.Sprint("message ", i))
	}
	turn := &hook.Turn{ID: "t", Observer: &discard{}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		in := hook.MessageSendInput{Turn: turn, Messages: msgs}
		c.RunMessageSend(ctx, &in)
	}
}

func BenchmarkEmptyChain(b *testing.B) {
	var c hook.Chain
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c.RunBeforeToolCall(ctx, &hook.ToolCallInput{})
	}
}

type discard struct{}

func (discard) HookDecision(events.HookDecision) {}
func (discard) HookMessage(events.HookMessage)   {}
