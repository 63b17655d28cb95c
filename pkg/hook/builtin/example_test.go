package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/builtin"
)

// Built-in hooks in an in-process chain, as a library user's worker would
// run them: shell calls are denied, secrets masked in every result.
func Example() {
	chain := &hook.Chain{}
	if err := builtin.AddTo(chain, builtin.DenyTools{Pattern: "^shell$", Reason: "no shells here"}, hook.Options{Name: "deny"}); err != nil {
		fmt.Println(err)
		return
	}
	if err := builtin.AddTo(chain, builtin.MaskResult{Presets: []string{"secrets"}}, hook.Options{Name: "mask"}); err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	turn := &hook.Turn{ID: "t1"}

	call := &hook.ToolCallInput{Turn: turn, Call: events.ToolCall{ID: "c1", Name: "shell", Input: json.RawMessage(`{}`)}}
	out := chain.RunBeforeToolCall(ctx, call)
	fmt.Println(out.Hook, out.Result.Action, out.Result.Reason)

	res := &hook.ToolResultInput{Turn: turn, Call: events.ToolCall{ID: "c2", Name: "env"},
		Result: events.ToolResult{ToolUseID: "c2", Content: "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz"}}
	chain.RunAfterToolCall(ctx, res)
	fmt.Println(res.Result.Content)
	// Output:
	// deny skip no shells here
	// OPENAI_API_KEY=[REDACTED]
}

// A config that does not validate names its field.
func ExampleFieldError() {
	err := builtin.InjectMessage{Text: "now {{time}}", Role: "system"}.Validate()
	fmt.Println(err)
	// Output: builtin: role: must be user or assistant, got "system"
}
