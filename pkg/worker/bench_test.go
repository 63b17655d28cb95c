package worker_test

import (
	"context"
	"strconv"
	"testing"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// tenSteps is an instant model: nine steps with a tool call, then an
// answer (10 model calls).
var tenSteps = providerFunc(func(req *llm.Request) script {
	n := 0
	for _, m := range req.Messages {
		if m.Role == events.RoleTool {
			n++
		}
	}
	if n < 9 {
		return script{evs: stream(textBlock(0, "", "Checking."), toolBlock(1, "c"+itoa(n), "echo", `{"text":"hi"}`), []events.Event{usage(100, 10)})}
	}
	return script{evs: stream(textBlock(0, events.StopEndTurn, "Done", "."), []events.Event{usage(100, 10)})}
})

func benchTurn(b *testing.B, cfg worker.Config) {
	echo := tool.Must("echo", "echo", func(_ context.Context, a struct {
		Text string `json:"text"`
	}) (string, error) {
		return a.Text, nil
	})
	cfg.Provider = tenSteps
	cfg.Tools = []tool.Tool{echo}
	w, err := worker.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	runTenStepTurns(b, w)
}

// BenchmarkTurn10Steps is the in-process baseline of the orchestration
// overhead: a 10-step tool turn with an instant model and an instant tool.
func BenchmarkTurn10Steps(b *testing.B) { benchTurn(b, worker.Config{}) }

// With an observer and a checkpoint per step boundary (the work the turn
// service adds besides NATS).
func BenchmarkTurn10StepsObservedCheckpointed(b *testing.B) {
	benchTurn(b, worker.Config{
		Observer:   worker.ObserverFunc(func(worker.Event) {}),
		Checkpoint: func(context.Context, *worker.Checkpoint) error { return nil },
	})
}

// With tracing on: an SDK tracer provider sampling every span into a
// batcher whose exporter discards them (the cost of making the spans, not
// of sending them), and metrics into an SDK meter provider. Compare with
// BenchmarkTurn10Steps (tracing and metrics off: the global no-op
// providers).
func BenchmarkTurn10StepsTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	prevT, prevM := otel.GetTracerProvider(), otel.GetMeterProvider()
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	b.Cleanup(func() {
		otel.SetTracerProvider(prevT)
		otel.SetMeterProvider(prevM)
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	benchTurn(b, worker.Config{})
}

// peersModel is the scripted model of bench/peers' llmworker-inproc side:
// llm.SliceStream of normalized events, par calls of the echo tool at each
// of the first nine steps (input {"n":…}), then a text answer.
func peersModel(par int) llm.Provider {
	return llm.ProviderFunc(func(_ context.Context, req *llm.Request) (llm.Stream, error) {
		results := 0
		for _, m := range req.Messages {
			for _, p := range m.Content {
				if p.Type == events.PartToolResult {
					results++
				}
			}
		}
		step := results / par
		if step >= 9 {
			return llm.SliceStream(llmtest.TextStep("done").Events...), nil
		}
		calls := make([]llmtest.ToolCallSpec, par)
		for i := range calls {
			n := step*par + i
			calls[i] = llmtest.ToolCallSpec{ID: "call_" + strconv.Itoa(n), Name: "echo", Input: `{"n":` + strconv.Itoa(n) + `}`}
		}
		return llm.SliceStream(llmtest.ToolStep(calls...).Events...), nil
	})
}

func benchPeersTurn(b *testing.B, par int) {
	type echoArgs struct {
		N int `json:"n"`
	}
	echo := tool.Must("echo", "echoes n", func(_ context.Context, a echoArgs) (string, error) {
		return strconv.Itoa(a.N), nil
	})
	w, err := worker.New(worker.Config{Provider: peersModel(par), Tools: []tool.Tool{echo}})
	if err != nil {
		b.Fatal(err)
	}
	runTenStepTurns(b, w)
}

// BenchmarkTurn10StepsPeers1 and BenchmarkTurn10StepsPeers4 are the turn
// of bench/peers' llmworker-inproc side (1 and 4 parallel calls of a typed
// tool per step, the model's stream an llm.SliceStream), for
// allocation-exact comparisons without building that module.
func BenchmarkTurn10StepsPeers1(b *testing.B) { benchPeersTurn(b, 1) }
func BenchmarkTurn10StepsPeers4(b *testing.B) { benchPeersTurn(b, 4) }

// runTenStepTurns runs w's turn once per iteration, each of which must
// complete in 10 steps.
func runTenStepTurns(b *testing.B, w *worker.Worker) {
	msgs := []events.Message{events.UserText("go")}
	b.ReportAllocs()
	for b.Loop() {
		res, err := w.Run(context.Background(), msgs)
		if err != nil || res.Status != worker.StatusCompleted || res.Steps != 10 {
			b.Fatalf("res %+v err %v", res, err)
		}
	}
}
