// Package hook lets code intervene in a worker's turn at five hook points
// (docs/architecture.md#hooks; the wire form is docs/protocol.md §7): change
// the context sent to the model, allow, rewrite, skip or pause tool calls,
// format or mask tool results, check the final answer and ask the model to
// fix it, and clean up when a turn aborts.
//
// # Hook points
//
//	on_message_send   before each LLM request   MessageSendInput  → MessageSendResult    continue | cancel
//	before_tool_call  before each tool call     ToolCallInput     → BeforeToolCallResult continue | skip | abort | pause
//	after_tool_call   after each tool call      ToolResultInput   → AfterToolCallResult  continue | abort
//	on_turn_end       answer without tool calls TurnEndInput      → TurnEndResult        finish | continue_with_messages | pause
//	on_abort          the turn is aborting      AbortInput        → AbortResult          (notification)
//
// A hook is a Hook[In, Out] (or a Func); each hook point has its own input
// and result types, so a hook cannot return a result that means nothing
// there. The zero value of every result goes on (continue, finish).
// before_tool_call and after_tool_call run once per call, one call after
// the other, in the model's order (the worker runs the allowed calls in
// parallel in between).
//
// # Order
//
// The hooks of a hook point run one after another, sorted by
// Options.Priority ascending, then by Options.Seq (registration order: 0
// means "after every hook so far"; an explicit Seq such as a KV creation
// revision keeps remote hooks in registry order), then by the order of the
// registration calls. A hook whose Options.Matcher does not fit is not
// called and reports nothing.
//
// # Propagation
//
// A hook that goes on (continue; finish at on_turn_end) passes the input,
// as it changed it, to the next hook; after the last hook the caller finds
// the final input in its *In. Any other result stops the chain and is
// returned in the Outcome with the name of the deciding hook:
//
//	on_message_send   cancel                         → the request is not sent
//	before_tool_call  skip / abort / pause           → the call is skipped (the model reads an error naming
//	                                                   Outcome.Hook) / the turn aborts / the turn pauses
//	after_tool_call   abort                          → the turn aborts
//	on_turn_end       continue_with_messages / pause → Result.Messages are appended and the model is asked
//	                                                   again (the worker bounds the retries and names
//	                                                   Outcome.Hook when the bound is hit) / the turn pauses
//	on_abort          —                              → every hook runs whatever the others do
//
// Changes a hook made to its input are kept when it answered (whatever the
// result), and dropped when it failed.
//
// # Failures, timeouts and cancellation
//
// A hook fails when it returns an error, panics, returns an action not
// defined for its hook point (ErrInvalidResult) or does not answer within
// its timeout (ErrTimeout; Options.Timeout, else Chain.Timeout, else
// DefaultTimeout). The timeout is the deadline of the ctx the hook gets;
// a hook that ignores ctx is abandoned: the chain stops waiting for it, and
// since every hook works on its own copy of the input and variables, what
// it does afterwards cannot reach the turn.
//
// The hook's Options.Failure decides what a failure means. fail_open goes
// on as if the hook had continued. fail_closed (the default) stops the hook
// point with Outcome.Failed set and Outcome.Err a *Failure: Result is
// MessageSendCancel, ToolAbort or ResultAbort; at on_turn_end, which has no
// abort result, Kind is abort and the worker aborts the turn as for an
// abort elsewhere. At on_abort failures are only reported and the
// remaining hooks run. If the caller's ctx ends during a hook point, the
// chain stops at once with a Failed outcome whatever the policy; RunAbort
// ignores the cancellation of its ctx (the turn is usually aborting
// because of it) but keeps each hook's timeout.
//
// # Variables and messages for the UI
//
// Turn.Vars is a map shared by the hooks of a turn: a value one hook sets
// is seen by the hooks after it, at the same and at later hook points of
// that turn (the worker passes the same Turn everywhere). Turn.Emit sends
// messages to the UI as llmw.hook.message through Turn.Observer, named
// after the emitting hook; they do not enter the transcript.
//
// # Observing decisions
//
// Every hook call ends in one events.HookDecision to Turn.Observer: hook,
// hook point, result, reason, duration in ms, the tool call's id at the
// tool hook points, and Failed when the failure policy decided. The chain
// never calls one Turn's Observer from two goroutines at once.
//
// # Concurrency
//
// A Chain is safe for concurrent use. Registration copies the hook list
// of its hook point; every Run works on the list current when it starts,
// so hooks added or removed while a turn runs are used from the next hook
// point on.
//
// # Testing
//
// Always and Fail build stub hooks; Recorder is an Observer that records
// decisions and messages (Trace gives a compact form to compare).
package hook
