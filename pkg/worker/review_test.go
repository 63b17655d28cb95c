package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// A continue_with_messages early in the turn must not be blamed for a
// max_steps reached later by the tool loop: the step past the bound is
// asked for by tool results, and the reason says so (docs/protocol.md §7: the
// reason names the bound, and the hook only when a hook asked for it).
func TestMaxStepsReasonAfterEarlierTurnEndRetry(t *testing.T) {
	retried := false
	chain := chainWith(t, func(c *chainT) {
		c.end("once", func(context.Context, *endIn) (endOut, error) {
			if retried {
				return endOut{}, nil
			}
			retried = true
			return endOut{Action: hook.TurnContinueWithMessages, Messages: []events.Message{events.UserText("use the tool")}}, nil
		})
	})
	p := newScripted(
		textStep("no"), // step 1: on_turn_end "once" asks again
		toolStep(call{"c1", "get_weather", `{"city":"A"}`}), // step 2
		toolStep(call{"c2", "get_weather", `{"city":"B"}`}), // step 3: the tool loop wants step 4
	)
	w := mustNew(t, worker.Config{Provider: p, Hooks: chain, MaxSteps: 3, Tools: []tool.Tool{weatherTool(t, nil)}})
	res := mustRun(t, w, events.UserText("go"))
	if res.Code != worker.CodeMaxSteps || !strings.Contains(res.Reason, "max_steps (3)") {
		t.Fatalf("result %+v", res)
	}
	if strings.Contains(res.Reason, `"once"`) || res.Hook != "" {
		t.Fatalf("reason %q (hook %q) blames the on_turn_end hook of step 1 for the tool loop", res.Reason, res.Hook)
	}
	if !strings.Contains(res.Reason, "calling tools") {
		t.Fatalf("reason %q does not say the model kept calling tools", res.Reason)
	}
}

// nilStreamProvider is a broken Provider: no stream and no error.
type nilStreamProvider struct{}

func (nilStreamProvider) Stream(context.Context, *llm.Request) (llm.Stream, error) { return nil, nil }

// A provider returning (nil, nil) fails the turn with a provider error
// instead of crashing the process.
func TestNilStreamFailsTheTurn(t *testing.T) {
	var aborts abortLog
	w := mustNew(t, worker.Config{Provider: nilStreamProvider{}, Hooks: chainWith(t, func(c *chainT) { c.abort("log", aborts.hook) })})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusFailed || res.Code != worker.CodeProviderError || !errors.Is(res.Err(), worker.ErrProvider) {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(res.Reason, llm.ErrNilStream.Error()) || len(aborts.get()) != 1 {
		t.Fatalf("reason %q, on_abort %v", res.Reason, aborts.get())
	}
}
