package compact_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/llmworker/llmworker/pkg/compact"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// A model of 10,000 tokens (room 10,000 − 1,024 reserve = 8,976) reads a
// transcript of two large tool results: 7,562 tokens (5 + 14 + 5,012 +
// 14 + 2,512 + 5 by llm.EstimateMessages' rules), above the
// threshold (0.8 × 8,976). The newest 2,244 tokens (a quarter of the
// room) stay: the span ends at the second call, position 3. Offloading
// the first result to a preview is enough to get below the target (0.5 ×
// 8,976), so no summary is asked for.
func Example() {
	msgs := []events.Message{
		events.UserText("go"),
		{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("c0", "fetch", json.RawMessage(`{}`))}},
		{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("c0", strings.Repeat("a", 20_000), false)}},
		{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("c1", "fetch", json.RawMessage(`{}`))}},
		{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("c1", strings.Repeat("b", 10_000), false)}},
		events.UserText("next"),
	}
	var p compact.Policy // the defaults, llm.EstimateMessages, no summarizer
	res, err := p.Plan(context.Background(), compact.Input{
		Messages: msgs, Model: "openai:small", Limits: llm.ModelLimits{ContextWindow: 10_000},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := res.Compaction
	fmt.Println("policy:", c.Policy, "to:", c.To, "before:", c.TokensBefore)
	fmt.Println("below target:", c.TokensAfter <= res.Room/2)
	projection := compact.Project(c, msgs, 0, "openai")
	fmt.Println("messages:", len(projection), "originals kept:", len(msgs))
	// Output:
	// policy: offload to: 3 before: 7562
	// below target: true
	// messages: 6 originals kept: 6
}
