package hook

import (
	"context"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
)

// Hook is one hook of hook point In/Out (the Hook<E> trait of
// docs/architecture.md#hooks). Call may change the mutable fields of *in; the changes
// are seen by the next hook when Call returns a result that lets the chain
// go on. ctx carries the hook's timeout: a hook doing I/O must honour it.
type Hook[In, Out any] interface {
	Call(ctx context.Context, in *In) (Out, error)
}

// Func adapts a function to Hook.
type Func[In, Out any] func(ctx context.Context, in *In) (Out, error)

// Call implements Hook.
func (f Func[In, Out]) Call(ctx context.Context, in *In) (Out, error) { return f(ctx, in) }

// The hook types of the five hook points.
type (
	MessageSendHook    = Hook[MessageSendInput, MessageSendResult]
	BeforeToolCallHook = Hook[ToolCallInput, BeforeToolCallResult]
	AfterToolCallHook  = Hook[ToolResultInput, AfterToolCallResult]
	TurnEndHook        = Hook[TurnEndInput, TurnEndResult]
	AbortHook          = Hook[AbortInput, AbortResult]

	MessageSendFunc    = Func[MessageSendInput, MessageSendResult]
	BeforeToolCallFunc = Func[ToolCallInput, BeforeToolCallResult]
	AfterToolCallFunc  = Func[ToolResultInput, AfterToolCallResult]
	TurnEndFunc        = Func[TurnEndInput, TurnEndResult]
	AbortFunc          = Func[AbortInput, AbortResult]
)

var (
	_ MessageSendHook    = MessageSendFunc(nil)
	_ BeforeToolCallHook = BeforeToolCallFunc(nil)
	_ AfterToolCallHook  = AfterToolCallFunc(nil)
	_ TurnEndHook        = TurnEndFunc(nil)
	_ AbortHook          = AbortFunc(nil)
)

// DefaultTimeout is the timeout of a hook when neither Options.Timeout nor
// Chain.Timeout says otherwise: long enough for a person-facing remote hook,
// short enough that a stuck hook cannot hold a turn forever.
const DefaultTimeout = 30 * time.Second

// Options configure one registered hook. The zero value is a hook with a
// generated name, priority 0, no matcher, the chain's timeout and
// fail_closed.
type Options struct {
	// Name identifies the hook in decisions, messages, List and Remove.
	// Unique across the chain; "" generates "<event>-<seq>".
	Name string
	// Priority orders the hooks of a hook point: ascending, then by Seq.
	Priority int
	// Matcher is a regular expression (Go syntax, unanchored, as
	// regexp.MatchString) on the tool name; "" matches everything. At
	// before/after_tool_call it is matched against the call's name; at the
	// other hook points against the names of the tool_use parts of the
	// input's messages (docs/architecture.md#hooks lets OnTurnCompleted hooks name tools),
	// so a hook with a matcher there runs only when a matching tool was
	// used.
	Matcher string
	// Timeout bounds one call of the hook: 0 uses Chain.Timeout, negative
	// means no timeout (the caller's context still applies).
	Timeout time.Duration
	// Failure says what an error, panic, timeout or invalid result means:
	// fail_open goes on as if the hook had continued, fail_closed (the
	// default, "") stops the hook point (see Outcome.Failed).
	Failure events.FailurePolicy
	// Seq places the hook among hooks of equal priority: 0 means "after
	// every hook registered so far"; an explicit value (e.g. the creation
	// revision of the hook's key in LLMW_HOOKS) sorts numerically, so remote
	// hooks keep their registry order whatever order they are added in.
	Seq int64
	// Replace lets a registration replace the hook of the same name (at any
	// hook point) atomically instead of failing with ErrDuplicateName; with
	// Seq 0 the new hook keeps the replaced one's Seq.
	Replace bool
}

// Info describes a registered hook (Chain.List).
type Info struct {
	Name     string
	Event    events.HookEvent
	Priority int
	Matcher  string
	// Timeout is Options.Timeout as registered (0 = chain default).
	Timeout time.Duration
	// Failure is the effective policy (never "").
	Failure events.FailurePolicy
	// Seq is the effective registration sequence number.
	Seq int64
}

// Observer receives what the hooks of a turn decide and emit. The chain
// never calls the Observer of one Turn from two goroutines at once, but
// Observers shared by several turns must be safe for concurrent use.
type Observer interface {
	// HookDecision is called once per hook call, after the hook answered,
	// failed or was abandoned.
	HookDecision(events.HookDecision)
	// HookMessage is called for every Turn.Emit while the hook runs.
	HookMessage(events.HookMessage)
}

// ObserverFuncs adapts two functions to Observer; a nil function ignores
// its events.
type ObserverFuncs struct {
	Decision func(events.HookDecision)
	Message  func(events.HookMessage)
}

var _ Observer = ObserverFuncs{}

// HookDecision implements Observer.
func (o ObserverFuncs) HookDecision(d events.HookDecision) {
	if o.Decision != nil {
		o.Decision(d)
	}
}

// HookMessage implements Observer.
func (o ObserverFuncs) HookMessage(m events.HookMessage) {
	if o.Message != nil {
		o.Message(m)
	}
}

// Outcome is what a hook point decided.
type Outcome[R any] struct {
	// Result is the deciding hook's result, the zero value (continue /
	// finish) when every hook went on, or the fail_closed result when
	// Failed.
	Result R
	// Hook names the hook that stopped the chain ("" if none did). For
	// skip it is what the model is told; for continue_with_messages it is
	// what the worker's retry bound names.
	Hook string
	// Kind is the wire name of the decision: Result's action, or abort
	// (cancel at on_message_send) when Failed.
	Kind events.HookResultKind
	// Failed is true when the decision comes from a hook failure under
	// fail_closed, or the caller's context ended during the hook point.
	// The caller must then stop as for an abort: Result already says
	// MessageSendCancel, ToolAbort or ResultAbort; at on_turn_end (which
	// has no abort action) Result is TurnFinish and Kind is abort, so the
	// worker checks Failed first and aborts the turn. For RunAbort, Failed
	// only reports that some on_abort hook failed.
	Failed bool
	// Err is the *Failure behind Failed.
	Err error
}

// Stopped reports whether a hook stopped the chain or it failed, i.e.
// whether the caller must not simply go on.
func (o Outcome[R]) Stopped() bool { return o.Hook != "" || o.Failed }
