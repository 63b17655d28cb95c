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
}

type callKey struct{}

// WithCall returns ctx carrying c. The worker calls it for every tool
// execution; tests and direct callers of a remote tool set it themselves.
func WithCall(ctx context.Context, c CallInfo) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallFrom returns the CallInfo of the tool call ctx belongs to.
func CallFrom(ctx context.Context) (CallInfo, bool) {
	c, ok := ctx.Value(callKey{}).(CallInfo)
	return c, ok
}

// WithCallProgress is WithProgress(WithCall(ctx, c), f) as one context
// (one allocation instead of three): the worker sets both for every tool
// execution.
func WithCallProgress(ctx context.Context, c CallInfo, f ProgressFunc) context.Context {
	return &callCtx{Context: ctx, call: c, progress: f}
}

type callCtx struct {
	context.Context
	call     CallInfo
	progress ProgressFunc
}

func (c *callCtx) Value(key any) any {
	switch key.(type) {
	case callKey:
		return c.call
	case progressKey:
		return c.progress
	}
	return c.Context.Value(key)
}
