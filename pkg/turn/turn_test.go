package turn_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

type capitalArgs struct {
	Country string `json:"country" jsonschema:"description=the country"`
}

// capitalTool answers get_capital and counts its executions.
func capitalTool(runs *atomic.Int64) tool.Tool {
	return tool.Must("get_capital", "The capital of a country.", func(ctx context.Context, a capitalArgs) (string, error) {
		runs.Add(1)
		switch a.Country {
		case "France":
			return "Paris", nil
		case "UK":
			return "London", nil
		}
		return "unknown", nil
	})
}

func TestScriptedToolTurnThroughNATS(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "get_capital", Input: `{"country":"France"}`}),
		llmtest.TextStep("The capital ", "is Paris."),
	)
	e.scripted(p)
	var runs atomic.Int64
	e.startToolexec(toolexec.Config{}, capitalTool(&runs))
	e.startTurn(turn.Config{})

	id := newID("basic")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("Capital of France?")}, Tools: []string{"get_capital"}})
	done := w.completed()

	uses, results := toolUses(done.Messages)
	if len(uses) != 1 || uses[0].Name != "get_capital" || results[uses[0].ID].Content != "Paris" {
		t.Fatalf("transcript: %+v", done.Messages)
	}
	if got := done.Messages[len(done.Messages)-1].Text(); got != "The capital is Paris." {
		t.Fatalf("final text %q", got)
	}
	if runs.Load() != 1 {
		t.Fatalf("tool ran %d times", runs.Load())
	}
	checkSeq(t, w.events())
	// The model saw the tool definition and, in step 2, the result.
	reqs := p.Requests()
	if len(reqs) != 2 || len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Name != "get_capital" {
		t.Fatalf("requests: %+v", reqs)
	}
	if !strings.Contains(mustJSON(t, reqs[1].Messages), `"content":"Paris"`) {
		t.Fatalf("step 2 did not see the tool result: %s", mustJSON(t, reqs[1].Messages))
	}
}
