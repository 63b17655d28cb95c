package hooknats

import (
	"context"
	"regexp"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// A registration that reaches LLMW_HOOKS without being valid (written by
// hand or by a client that does not validate) is a hook that fails: a
// deny guard with a typo must not let the calls it was meant to stop
// through. Register refuses such a value; these functions are what the
// watcher does with one that is stored anyway.

// Broken describes what a broken registration guards.
type Broken struct {
	// Event is the hook point the registration names, "" when it names
	// none the turn knows: then it guards nothing.
	Event events.HookEvent
	// Failure is the registration's policy; a missing or unreadable one
	// is fail_closed.
	Failure events.FailurePolicy
	// Matcher is the registration's matcher when it compiles, else ""
	// (every call of the event): a guard whose matcher is broken cannot
	// tell which calls it guards.
	Matcher string
	// Err is why the registration is invalid.
	Err error
}

// BrokenOf says how the stored registration reg, invalid because of err,
// takes part in the chain.
func BrokenOf(reg events.HookRegistration, err error) Broken {
	b := Broken{Failure: events.FailClosed, Err: err}
	if reg.Event.Valid() {
		b.Event = reg.Event
	}
	if reg.Failure == events.FailOpen {
		b.Failure = events.FailOpen
	}
	if _, rerr := regexp.Compile(reg.Matcher); rerr == nil {
		b.Matcher = reg.Matcher
	}
	return b
}

// Effect says in words what the broken registration does to turns (for
// logs and listings).
func (b Broken) Effect() string {
	switch {
	case b.Event == "":
		return "guards nothing: its event names no hook point"
	case b.Event == events.HookOnAbort:
		return "fails at every on_abort it runs at (only reported)"
	case b.Failure == events.FailOpen:
		return "fails at every " + string(b.Event) + " it runs at; fail_open: the turn goes on"
	case b.Matcher == "":
		return "refuses every " + string(b.Event) + " (fail_closed)"
	}
	return "refuses every " + string(b.Event) + " its matcher covers (fail_closed)"
}

// addBroken puts the failing hook of b into c under name (priority and
// seq as a valid registration would have them). It reports false when b
// guards nothing.
func addBroken(c *hook.Chain, name string, priority int, seq int64, b Broken) (bool, error) {
	o := hook.Options{
		Name: name, Priority: priority, Matcher: b.Matcher, Failure: b.Failure,
		Seq: seq, Replace: true,
	}
	err := b.Err
	switch b.Event {
	case events.HookOnMessageSend:
		return true, c.OnMessageSend(failing[hook.MessageSendInput, hook.MessageSendResult](err), o)
	case events.HookBeforeToolCall:
		return true, c.BeforeToolCall(failing[hook.ToolCallInput, hook.BeforeToolCallResult](err), o)
	case events.HookAfterToolCall:
		return true, c.AfterToolCall(failing[hook.ToolResultInput, hook.AfterToolCallResult](err), o)
	case events.HookOnTurnEnd:
		return true, c.OnTurnEnd(failing[hook.TurnEndInput, hook.TurnEndResult](err), o)
	case events.HookOnAbort:
		return true, c.OnAbort(failing[hook.AbortInput, hook.AbortResult](err), o)
	}
	return false, nil
}

// failing is a hook that fails every call with err.
func failing[In, Out any](err error) hook.Func[In, Out] {
	return func(context.Context, *In) (Out, error) {
		var zero Out
		return zero, err
	}
}
