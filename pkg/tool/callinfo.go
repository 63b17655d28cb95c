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
