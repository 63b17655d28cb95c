package worker_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// stepAllocs is the allocation ceiling of one step of
// BenchmarkTurn10StepsPeers1 and …Peers4 (the peers' ten-step turn, no
// observer, no hooks, no checkpoints), per parallel tool calls of the
// step: the measured value (36.9 and 77.8, docs/benchmarks.md, Core
// library) and less than one allocation of room, so that one more
// allocation per step or per call fails. The scripted model's own
// allocations are counted too: they do not change unless its script
// does. raceAllocs is what the race detector's runtime adds (measured
// 0.4–0.6 and 1.7–1.9 per step; the ceilings above are 0.6 and 0.7 past the measured values).
var (
	stepAllocs = map[int]float64{1: 37.5, 4: 78.5}
	raceAllocs = map[int]float64{1: 0.8, 4: 2.0}
)

// TestStepAllocations keeps the in-process step's allocations where the
// benchmarks measured them, so that a change that adds allocations to
// every step fails here, in the ordinary test run (with or without the
// race detector), before any benchmark is run. It counts allocations,
// never time: a turn's count does not depend on the machine's load or
// GOMAXPROCS.
func TestStepAllocations(t *testing.T) {
	for _, par := range []int{1, 4} {
		t.Run(strconv.Itoa(par)+"-tools", func(t *testing.T) {
			type echoArgs struct {
				N int `json:"n"`
			}
			echo := tool.Must("echo", "echoes n", func(_ context.Context, a echoArgs) (string, error) {
				return strconv.Itoa(a.N), nil
			})
			w, err := worker.New(worker.Config{Provider: peersModel(par), Tools: []tool.Tool{echo}})
			if err != nil {
				t.Fatal(err)
			}
			msgs := []events.Message{events.UserText("go")}
			turn := func() {
				res, err := w.Run(context.Background(), msgs)
				if err != nil || res.Status != worker.StatusCompleted || res.Steps != 10 {
					t.Fatalf("res %+v err %v", res, err)
				}
			}
			turn() // the tool goroutines' stacks, the typed tool's decoder
			perStep := testing.AllocsPerRun(20, turn) / 10
			ceiling := stepAllocs[par]
			if raceEnabled {
				ceiling += raceAllocs[par]
			}
			t.Logf("%.1f allocations per step with %d tool calls (ceiling %.1f)", perStep, par, ceiling)
			if perStep > ceiling {
				t.Errorf("a step with %d tool calls allocates %.1f times, more than its ceiling of %.1f: "+
					"something allocates on every step (BenchmarkTurn10StepsPeers%d -memprofile shows what)", par, perStep, ceiling, par)
			}
		})
	}
}
