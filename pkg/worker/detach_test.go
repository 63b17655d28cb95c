package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/worker"
)

// A run detached from its turn (the turn goes on on another replica) ends
// without on_abort hooks and without a terminal event; an ordinary cancel
// still runs them.
func TestDetachedRunLeavesNoTrace(t *testing.T) {
	for _, detach := range []bool{true, false} {
		t.Run(fmt.Sprint("detach=", detach), func(t *testing.T) {
			var aborts atomic.Int32
			chain := &hook.Chain{}
			_ = chain.OnAbort(hook.Func[hook.AbortInput, hook.AbortResult](func(context.Context, *hook.AbortInput) (hook.AbortResult, error) {
				aborts.Add(1)
				return hook.AbortResult{}, nil
			}), hook.Options{Name: "count"})
			rec := &recorder{}
			w := mustNew(t, worker.Config{Provider: llmtest.NewScripted(llmtest.BlockingStep("partial")), Hooks: chain, Observer: rec})
			ctx, cancel := context.WithCancelCause(context.Background())
			done := make(chan *worker.Result, 1)
			go func() {
				res, _ := w.Run(ctx, []events.Message{events.UserText("hi")})
				done <- res
			}()
			waitFor(t, "the first delta", func() bool { return len(rec.ofType(events.TypeBlockDelta)) > 0 })
			if detach {
				cancel(fmt.Errorf("replica draining: %w", worker.ErrDetached))
			} else {
				cancel(errors.New("user pressed ctrl-c"))
			}
			res := <-done
			terminal := len(rec.ofType(events.TypeTurnAborted))
			if detach {
				if res.Code != worker.CodeDetached || !errors.Is(res.Err(), worker.ErrDetached) {
					t.Fatalf("result %s %q, err %v", res.Status, res.Code, res.Err())
				}
				if aborts.Load() != 0 || terminal != 0 {
					t.Fatalf("detached run ran %d on_abort hooks and sent %d turn.aborted", aborts.Load(), terminal)
				}
				return
			}
			if res.Code != worker.CodeCancelled || aborts.Load() != 1 || terminal != 1 {
				t.Fatalf("cancelled run: code %q, %d on_abort, %d turn.aborted", res.Code, aborts.Load(), terminal)
			}
		})
	}
}

// A checkpoint callback that learns the turn is owned elsewhere detaches
// the run the same way.
func TestCheckpointDetaches(t *testing.T) {
	var aborts atomic.Int32
	chain := &hook.Chain{}
	_ = chain.OnAbort(hook.Func[hook.AbortInput, hook.AbortResult](func(context.Context, *hook.AbortInput) (hook.AbortResult, error) {
		aborts.Add(1)
		return hook.AbortResult{}, nil
	}), hook.Options{Name: "count"})
	rec := &recorder{}
	w := mustNew(t, worker.Config{
		Provider: llmtest.NewScripted(llmtest.TextStep("hi")), Hooks: chain, Observer: rec,
		Checkpoint: func(context.Context, *worker.Checkpoint) error {
			return fmt.Errorf("revision conflict: %w", worker.ErrDetached)
		},
	})
	res, _ := w.Run(context.Background(), []events.Message{events.UserText("hi")})
	if res.Code != worker.CodeDetached || aborts.Load() != 0 || len(rec.ofType(events.TypeTurnFailed)) != 0 {
		t.Fatalf("code %q, %d on_abort, events %v", res.Code, aborts.Load(), rec.types())
	}
}
