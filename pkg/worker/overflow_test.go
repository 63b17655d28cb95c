package worker_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/worker"
)

// A call whose context does not fit the model's window fails the turn
// with context_overflow after that one call: the same request is not
// made again and no fallback model is asked, even with policies that
// would take any failure.
func TestContextOverflowFailsTheTurn(t *testing.T) {
	refused := script{err: &llm.APIError{Status: 400, ErrKind: llm.KindContextOverflow, Err: errors.New("prompt is too long: 208310 tokens > 200000 maximum")}}
	inStream := script{evs: []events.Event{started(),
		events.ErrorEvent{Code: "context_overflow", Message: "Your input exceeds the context window of this model."},
		events.StatusEvent{Status: events.StatusFailed}}}
	for name, sc := range map[string]script{"refused": refused, "in the stream": inStream} {
		t.Run(name, func(t *testing.T) {
			p := &byModel{scripts: map[string][]script{
				primary: {sc, textStep("never")},
				second:  {textStep("never")},
			}}
			w := mustNew(t, worker.Config{Provider: p, Model: primary, FallbackModels: []string{second}, StepAttempts: 3,
				RetryStep: func(worker.StepFailure) (time.Duration, bool) { return 0, true },
				Fallback:  func(worker.StepFailure) bool { return true }})
			res := mustRun(t, w, events.UserText("go"))
			if res.Status != worker.StatusFailed || res.Code != worker.CodeContextOverflow {
				t.Fatalf("result %s %q (%s), want failed context_overflow", res.Status, res.Code, res.Reason)
			}
			if got := p.calls(); !slices.Equal(got, []string{primary}) {
				t.Fatalf("calls %v, want one on %s", got, primary)
			}
		})
	}
}

func TestDefaultFallbackSkipsOverflow(t *testing.T) {
	for _, f := range []worker.StepFailure{
		{Code: "context_overflow"},
		{Err: &llm.APIError{Status: 400, ErrKind: llm.KindContextOverflow, Err: errors.New("too long")}},
	} {
		if !f.ContextOverflow() || worker.DefaultFallback(f) {
			t.Errorf("%+v: overflow %v, fallback %v", f, f.ContextOverflow(), worker.DefaultFallback(f))
		}
	}
}
