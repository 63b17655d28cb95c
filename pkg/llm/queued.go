package llm

import (
	"context"

	"github.com/llmworker/llmworker/pkg/events"
)

type queuedKey struct{}

// WithQueued returns ctx carrying f, for a Provider whose calls may wait
// for limits shared with other callers (ingest's Client, when ingest holds
// the call to its provider quotas): such a Provider calls f with the
// queued status (events.StatusQueued, the call's position) while the call
// waits, from any goroutine, and f has returned before Stream returns or
// the stream yields its first event. The status is then not part of the
// stream. The turn loop (pkg/worker) sets it to publish llmw.turn.queued.
func WithQueued(ctx context.Context, f func(events.StatusEvent)) context.Context {
	return context.WithValue(ctx, queuedKey{}, f)
}

// QueuedFunc returns the function WithQueued put in ctx, nil when none.
func QueuedFunc(ctx context.Context) func(events.StatusEvent) {
	f, _ := ctx.Value(queuedKey{}).(func(events.StatusEvent))
	return f
}
