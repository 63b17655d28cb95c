package worker_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// Message content goes on the spans only when the operator opts in
// (telemetry.EnvCaptureContent), in the GenAI conventions' message
// format: the system prompt and the request's messages on each chat span,
// the answer with its finish reason, and each tool call's arguments and
// result on its execute_tool span. Off (the default), no span carries any
// of them.
func TestSpansRecordContentOnlyWhenOptedIn(t *testing.T) {
	contentKeys := []attribute.Key{telemetry.GenAISystemInstructions, telemetry.GenAIInputMessages, telemetry.GenAIOutputMessages,
		telemetry.GenAIToolCallArguments, telemetry.GenAIToolCallResult}
	turn := func(t *testing.T, capture bool) []sdktrace.ReadOnlySpan {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		prev := otel.GetTracerProvider()
		otel.SetTracerProvider(tp)
		telemetry.SetCaptureContent(capture)
		t.Cleanup(func() {
			otel.SetTracerProvider(prev)
			telemetry.SetCaptureContent(false)
			_ = tp.Shutdown(context.Background())
		})
		echo := tool.Must("echo", "echo", func(_ context.Context, a struct {
			Text string `json:"text"`
		}) (string, error) {
			return "echo: " + a.Text, nil
		})
		w := mustNew(t, worker.Config{
			Provider: newScripted(toolStep(call{"c1", "echo", `{"text":"hi"}`}), textStep("Done.")),
			Tools:    []tool.Tool{echo}, System: "Be brief.",
		})
		if res := mustRun(t, w, events.UserText("Say hi.")); res.Status != worker.StatusCompleted {
			t.Fatalf("turn %+v", res)
		}
		return rec.Ended()
	}

	t.Run("off", func(t *testing.T) {
		for _, s := range turn(t, false) {
			for _, k := range contentKeys {
				if v, ok := attrValue(s, k); ok {
					t.Errorf("span %q records %s = %s without the opt-in", s.Name(), k, v)
				}
			}
		}
	})

	t.Run("on", func(t *testing.T) {
		spans := turn(t, true)
		var chats []sdktrace.ReadOnlySpan
		var exec sdktrace.ReadOnlySpan
		for _, s := range spans {
			switch s.Name() {
			case "chat":
				chats = append(chats, s)
			case "execute_tool echo":
				exec = s
			}
		}
		if len(chats) != 2 || exec == nil {
			t.Fatalf("spans %d chat, execute_tool %v", len(chats), exec != nil)
		}
		// Written out from the conventions' message schema
		// (gen_ai.input.messages, gen_ai.output.messages).
		want := []map[attribute.Key]string{{
			telemetry.GenAISystemInstructions: `[{"type":"text","content":"Be brief."}]`,
			telemetry.GenAIInputMessages:      `[{"role":"user","parts":[{"type":"text","content":"Say hi."}]}]`,
			telemetry.GenAIOutputMessages:     `[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"echo","arguments":{"text":"hi"}}],"finish_reason":"tool_use"}]`,
		}, {
			telemetry.GenAIInputMessages: `[{"role":"user","parts":[{"type":"text","content":"Say hi."}]},
				{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"echo","arguments":{"text":"hi"}}]},
				{"role":"tool","parts":[{"type":"tool_call_response","id":"c1","response":"echo: hi"}]}]`,
			telemetry.GenAIOutputMessages: `[{"role":"assistant","parts":[{"type":"text","content":"Done."}],"finish_reason":"end_turn"}]`,
		}}
		for i, c := range chats {
			for k, w := range want[i] {
				got, _ := attrValue(c, k)
				if !sameJSON(t, got, w) {
					t.Errorf("chat %d %s:\n got %s\nwant %s", i+1, k, got, w)
				}
			}
		}
		if got, _ := attrValue(exec, telemetry.GenAIToolCallArguments); !sameJSON(t, got, `{"text":"hi"}`) {
			t.Errorf("tool arguments %s", got)
		}
		if got, _ := attrValue(exec, telemetry.GenAIToolCallResult); got != "echo: hi" {
			t.Errorf("tool result %q", got)
		}
	})
}

func attrValue(s sdktrace.ReadOnlySpan, k attribute.Key) (string, bool) {
	for _, a := range s.Attributes() {
		if a.Key == k {
			return a.Value.Emit(), true
		}
	}
	return "", false
}

func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("want %s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// With no tracer provider installed (tracing off, the default) a turn
// makes no spans, but the trace context it was started in still travels:
// each model call's context carries it (ingest and the provider's HTTP
// call continue it) and the checkpoint keeps it, so that a replica with
// tracing on that continues the turn joins the caller's trace.
func TestTraceContextPassesThroughWhenTracingOff(t *testing.T) {
	if telemetry.Tracing() {
		t.Fatal("a tracer provider is installed; the test needs none")
	}
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var seen []string
	checkpoints := 0
	p := providerFunc(func(req *llm.Request) script { return textStep("ok") })
	w := mustNew(t, worker.Config{
		Provider: streamCtx(p, func(ctx context.Context) {
			tp, _ := telemetry.Parent(ctx)
			seen = append(seen, tp)
		}),
		Checkpoint: func(_ context.Context, cp *worker.Checkpoint) error {
			checkpoints++
			if cp.TraceParent != traceparent {
				t.Errorf("checkpoint traceparent %q, want the caller's %q", cp.TraceParent, traceparent)
			}
			return nil
		},
	})
	ctx := telemetry.Remote(context.Background(), traceparent, "")
	if res, err := w.Run(ctx, []events.Message{events.UserText("hi")}); err != nil || res.Status != worker.StatusCompleted {
		t.Fatalf("turn %+v %v", res, err)
	}
	if checkpoints == 0 {
		t.Error("no checkpoint was written")
	}
	if len(seen) != 1 || seen[0] != traceparent {
		t.Errorf("model calls saw trace context %q, want the caller's %q", seen, traceparent)
	}
}

// streamCtx calls look with the context of each model call.
func streamCtx(p llm.Provider, look func(context.Context)) llm.Provider {
	return llm.ProviderFunc(func(ctx context.Context, req *llm.Request) (llm.Stream, error) {
		look(ctx)
		return p.Stream(ctx, req)
	})
}
