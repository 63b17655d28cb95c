package hook

import (
	"errors"
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
)

// Registration errors, returned by the Chain's registration methods
// (OnMessageSend, BeforeToolCall, AfterToolCall, OnTurnEnd, OnAbort).
var (
	// ErrNilHook is returned when the hook is nil.
	ErrNilHook = errors.New("hook: nil hook")

	// ErrInvalidMatcher is returned (wrapping the regexp error) when
	// Options.Matcher is not a valid regular expression.
	ErrInvalidMatcher = errors.New("hook: invalid matcher")

	// ErrInvalidOptions is returned when Options.Failure is neither "",
	// fail_open nor fail_closed.
	ErrInvalidOptions = errors.New("hook: invalid options")

	// ErrDuplicateName is returned when a hook of that name is already
	// registered (names are unique across all hook points, as the keys of
	// the LLMW_HOOKS registry are) and Options.Replace is false.
	ErrDuplicateName = errors.New("hook: duplicate hook name")
)

// Hook failure causes. A failure is reported in HookDecision.Reason and, when
// it decides the hook point (fail_closed, or the caller's context ended), in
// Outcome.Err as a *Failure that wraps one of these or the hook's own error.
var (
	// ErrTimeout: the hook did not answer within its timeout. The hook was
	// abandoned: its goroutine may still run, but its changes and later
	// emitted messages are dropped.
	ErrTimeout = errors.New("hook: timed out")

	// ErrPanic: the hook panicked.
	ErrPanic = errors.New("hook: panicked")

	// ErrInvalidResult: the hook returned an action that is not one of its
	// hook point (e.g. BeforeToolCallAction(9)), or a Parse function got a
	// wire result not allowed at that hook point.
	ErrInvalidResult = errors.New("hook: invalid result")
)

// Failure is a hook failure: the hook returned an error, panicked, timed
// out or returned an invalid result, or the caller's context ended while
// it ran (then Err matches context.Canceled or context.DeadlineExceeded).
type Failure struct {
	Hook   string
	Event  events.HookEvent
	CallID string
	Err    error
}

func (f *Failure) Error() string {
	return fmt.Sprintf("hook %q (%s) failed: %v", f.Hook, f.Event, f.Err)
}

// Unwrap returns the cause.
func (f *Failure) Unwrap() error { return f.Err }
