// Package fence carries, in a context, the check a runtime makes before a
// side effect of a turn that leaves the turn's own stores: a remote tool
// call (pkg/toolexec) or a remote hook request (pkg/hook/hooknats).
//
// The turn service sets a check that waits until the turn's worker events
// are stored in LLMW_EVENTS (all but the llmw.tool.started of calls about
// to go out, which a stored checkpoint lists already). Every event is fenced on the turn's last
// stored event (docs/architecture.md#fencing), so a nil check proves that
// no other replica took the turn over before this point; a replica that
// lost its turn gets an error instead and publishes the call or request
// not at all.
//
//	ctx = fence.With(ctx, func(ctx context.Context) error { return ep.Flush(ctx) })
//	...
//	if err := fence.Check(ctx); err != nil {
//		return err // the turn is not ours
//	}
//	publish(call)
package fence

import "context"

// Func proves that the caller still owns the turn; an error says it does
// not (or that this could not be established).
type Func func(ctx context.Context) error

type key struct{}

// With returns ctx carrying f; a nil f removes the check.
func With(ctx context.Context, f Func) context.Context {
	return context.WithValue(ctx, key{}, f)
}

// Check runs ctx's check and returns its error; without a check it returns
// nil at once (a worker embedded without the turn service has no one to
// be fenced against).
func Check(ctx context.Context) error {
	if f, ok := ctx.Value(key{}).(Func); ok && f != nil {
		return f(ctx)
	}
	return nil
}
