package natsrt

import "context"

// CallInfo identifies the tool call a RemoteTool executes: the subjects
// P.tool.result.<turn>.<call> and the de-duplication id (the call id) come
// from it.
type CallInfo struct {
	TurnID    string
	SessionID string
	CallID    string
}

type callKey struct{}

// WithCall returns ctx carrying the call that the next RemoteTool.Execute
// on it belongs to. The turn service sets it for each call it dispatches.
func WithCall(ctx context.Context, c CallInfo) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallFrom returns the call stored by WithCall.
func CallFrom(ctx context.Context) (CallInfo, bool) {
	c, ok := ctx.Value(callKey{}).(CallInfo)
	return c, ok
}
