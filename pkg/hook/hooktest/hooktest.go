// Package hooktest is the test kit of package hook: stub hooks (Always,
// Fail) and an Observer that records decisions and messages (Recorder), for
// tests of code that runs hooks (the testability item of the hook design,
// docs/architecture.md "Hooks").
package hooktest

import (
	"context"
	"fmt"
	"sync"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// Always returns a hook that always answers out, e.g.
//
//	hooktest.Always[hook.ToolCallInput](hook.BeforeToolCallResult{Action: hook.ToolSkip})
func Always[In, Out any](out Out) hook.Func[In, Out] {
	return func(context.Context, *In) (Out, error) { return out, nil }
}

// Fail returns a hook that always fails with err (a hook failure: the
// failure policy applies).
func Fail[In, Out any](err error) hook.Func[In, Out] {
	return func(context.Context, *In) (o Out, _ error) { return o, err }
}

// Recorder is an Observer that records what it is told; safe for
// concurrent use. The zero value is ready.
type Recorder struct {
	mu        sync.Mutex
	decisions []events.HookDecision
	messages  []events.HookMessage
}

var _ hook.Observer = (*Recorder)(nil)

// HookDecision implements Observer.
func (r *Recorder) HookDecision(d events.HookDecision) {
	r.mu.Lock()
	r.decisions = append(r.decisions, d)
	r.mu.Unlock()
}

// HookMessage implements Observer.
func (r *Recorder) HookMessage(m events.HookMessage) {
	r.mu.Lock()
	r.messages = append(r.messages, m)
	r.mu.Unlock()
}

// Decisions returns the decisions so far, in order.
func (r *Recorder) Decisions() []events.HookDecision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]events.HookDecision(nil), r.decisions...)
}

// Messages returns the emitted messages so far, in order.
func (r *Recorder) Messages() []events.HookMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]events.HookMessage(nil), r.messages...)
}

// Trace returns the decisions as "hook event result" lines, with
// " (failed)" on failures: compact to compare in tests and examples
// (durations and reasons left out, as they vary).
func (r *Recorder) Trace() []string {
	ds := r.Decisions()
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%s %s %s", d.Hook, d.Event, d.Result)
		if d.Failed {
			out[i] += " (failed)"
		}
	}
	return out
}

// Reset forgets everything recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.decisions, r.messages = nil, nil
	r.mu.Unlock()
}
