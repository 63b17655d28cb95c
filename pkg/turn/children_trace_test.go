package turn_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/turn"
)

// The child turn's spans are children of its parent's execute_tool span
// of the sub-agent call: one trace for the tree.
func TestChildSpansAreChildrenOfTheCallSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	f := newFamily(t)
	f.parent.Add(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "researcher", Input: `{"prompt":"capital of France?"}`}),
		llmtest.TextStep("Paris."),
	)
	f.child.Add(llmtest.TextStep("Paris"))
	f.startTurn(turn.Config{})
	putAgent(t, f.env, events.AgentDefinition{Name: "researcher", Model: "child:m"})
	putAgent(t, f.env, events.AgentDefinition{Name: "lead", Model: "parent:m", Agents: []string{"researcher"}})
	id := newID("traced")
	w := f.watch(id)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("capital of France?")}})
	w.completed()

	var call sdktrace.ReadOnlySpan
	natstest.Eventually(t, "the call's execute_tool span", func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == telemetry.OpExecuteTool+" researcher" {
				call = s
				return true
			}
		}
		return false
	})
	var found []string
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), telemetry.OpInvokeAgent) && s.Parent().SpanID() == call.SpanContext().SpanID() {
			found = append(found, s.Name())
			if s.SpanContext().TraceID() != call.SpanContext().TraceID() {
				t.Fatalf("the child's span is in trace %s, the call's in %s", s.SpanContext().TraceID(), call.SpanContext().TraceID())
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d invoke_agent spans under the call's execute_tool span (%v); want the child turn's one", len(found), found)
	}
}
