package turn

import (
	"context"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
)

// testHook is a function that a test installs (set, through
// export_test.go) for the package to call at one point of its work:
// none is installed outside tests, and load then reports none.
type testHook[F any] struct{ p atomic.Pointer[F] }

// set installs f until the test ends.
func (h *testHook[F]) set(t interface{ Cleanup(func()) }, f F) {
	h.p.Store(&f)
	t.Cleanup(func() { h.p.Store(nil) })
}

// load returns the installed function; ok is false when none is.
func (h *testHook[F]) load() (f F, ok bool) {
	if p := h.p.Load(); p != nil {
		return *p, true
	}
	return f, false
}

// The package's test hooks.
var (
	// beforeResolvePinned may fail a read of a pinned sub-agent
	// (resolvePinned) with the error it returns.
	beforeResolvePinned testHook[func(ref string) error]

	// beforeChildSubmit runs between a sub-agent call's llmw.tool.child
	// started and its child's submit (callChild).
	beforeChildSubmit testHook[func(ctx context.Context, parentID, childID string)]

	// afterChildWatch gets every watch of a child's state that
	// watchChild starts.
	afterChildWatch testHook[func(childID string, w jetstream.KeyWatcher)]

	// dispatchHook is called by process at each stage of a request
	// (dispatchArrived, dispatchRegistered, dispatchFoundRun) with the
	// request's turn id and whether it was delivered before.
	dispatchHook testHook[func(stage, turnID string, redelivered bool)]

	// afterStateCreated may fail a turn's state create that was stored
	// (start) with the error it returns, as a create whose
	// acknowledgement is lost fails.
	afterStateCreated testHook[func(turnID string) error]
)
