package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// ending is how an aborted or failed turn ends (end's arguments), for a
// decision taken where the turn cannot end at once: during a model
// stream, whose open blocks and early calls go first.
type ending struct {
	status Status
	code   string
	kind   error
	reason string
	hook   string
	cause  error
}

func (r *run) endWith(ctx context.Context, e *ending) *Result {
	return r.end(ctx, e.status, e.code, e.kind, e.reason, e.hook, e.cause)
}

func cancelledEnding(ctx context.Context) *ending {
	cause := context.Cause(ctx)
	return &ending{status: StatusAborted, code: CodeCancelled, kind: ErrCancelled, reason: "the turn was cancelled: " + cause.Error(), cause: cause}
}

func hookFailedEnding(name string, err error) *ending {
	reason := fmt.Sprintf("hook %q failed: %v", name, err)
	var f *hook.Failure
	if errors.As(err, &f) {
		reason = f.Error()
	}
	return &ending{status: StatusAborted, code: CodeHookFailed, kind: ErrHookAbort, reason: reason, hook: name, cause: err}
}

func (r *run) cancelled(ctx context.Context) *Result {
	return r.endWith(ctx, cancelledEnding(ctx))
}

func (r *run) hookFailed(ctx context.Context, name string, err error) *Result {
	return r.endWith(ctx, hookFailedEnding(name, err))
}

// end finishes an aborted or failed turn: open blocks are aborted, the
// on_abort hooks run (detached from ctx, which may be what was cancelled),
// then the terminal event is sent.
func (r *run) end(ctx context.Context, status Status, code string, kind error, reason, hookName string, cause error) *Result {
	r.stopTools()
	if errors.Is(cause, ErrDetached) {
		// The calls started early are the owner's now, as the turn.
		r.st.Eager, r.eagerRuns = nil, nil
		// The turn goes on elsewhere: no trace here (see ErrDetached).
		r.syncVars()
		res := r.result(StatusAborted)
		res.Reason, res.Code = "the run was detached: "+cause.Error(), CodeDetached
		res.err = &TurnError{Status: StatusAborted, Code: CodeDetached, Reason: res.Reason, Cause: cause, kind: ErrDetached}
		return res
	}
	r.tl.AbortCurrentBlock(reason)
	r.dropEager(ctx, reason)
	r.chain.RunAbort(ctx, &hook.AbortInput{Turn: r.turn, Reason: reason, Messages: cloneMessages(r.st.Messages)})
	r.syncVars()
	res := r.result(status)
	res.Reason, res.Code, res.Hook = reason, code, hookName
	res.err = &TurnError{Status: status, Code: code, Reason: reason, Hook: hookName, Cause: cause, kind: kind}
	if status == StatusAborted {
		r.em.emit(events.TurnAborted{Reason: reason, Code: code})
	} else {
		r.em.emit(events.TurnFailed{Reason: reason, Code: code})
	}
	return res
}

func suffix(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}
