package tool

import "context"

// CallInfo identifies one tool call of a turn. The worker puts it into the
// context of every tool execution (WithCall), so that a tool or a remote
// executor knows the call it serves: toolexec's client names the result
// subject P.tool.result.<turn>.<call> and de-duplicates by turn and call id
// with it (a turn continued from a checkpoint may run a call again whose
// result it did not see).
type CallInfo struct {
	TurnID    string
	SessionID string
	CallID    string
	// Name is the tool's name.
	Name string
	// Step is the model call that asked for the tool, from 1.
	Step int
	// First is true when the model asked for the call in this run of the
	// turn, so that it runs for the first time: no earlier run can have
	// published it or stored its result. A call continued from a
	// checkpoint (worker.RunFrom, Resume) is not First. toolexec's client
	// skips its look for a stored result then, and tells the host so.
	First bool
}

type callKey struct{}

// WithCall returns ctx carrying c. The worker calls it for every tool
// execution; tests and direct callers of a remote tool set it themselves.
func WithCall(ctx context.Context, c CallInfo) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallFrom returns the CallInfo of the tool call ctx belongs to.
func CallFrom(ctx context.Context) (CallInfo, bool) {
	switch c := ctx.Value(callKey{}).(type) {
	case CallInfo:
		return c, true
	case *CallInfo: // a CallContext's
		return *c, true
	}
	return CallInfo{}, false
}

// CallContext is the context of one tool execution: a parent context
// plus the call's CallInfo and progress listener, as WithProgress and
// WithCall would add them, but as a value its user allocates, e.g. inside a
// struct it keeps per call (the worker: one allocation for all the calls of
// a step). Set it with Set before use; its pointer is the context.
type CallContext struct {
	context.Context
	info     CallInfo
	progress ProgressReporter
}

// ProgressReporter receives the progress reports of a call whose context is
// a CallContext.
type ProgressReporter interface {
	ReportProgress(Progress)
}

// Set makes c the context of call info under parent, with r receiving the
// call's progress reports (none are taken when r is nil: ReportProgress
// then goes to parent's listener, if any).
func (c *CallContext) Set(parent context.Context, info CallInfo, r ProgressReporter) {
	c.Context, c.info, c.progress = parent, info, r
}

// Value answers the keys of CallFrom and ProgressFrom, and passes the
// others to the parent.
func (c *CallContext) Value(key any) any {
	switch key.(type) {
	case callKey:
		return &c.info
	case progressKey:
		if c.progress != nil {
			return ProgressFunc(c.progress.ReportProgress)
		}
	}
	return c.Context.Value(key)
}
