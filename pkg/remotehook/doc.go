// Package remotehook is the turn side of remote hooks (DESIGN.md §7): hooks
// that answer NATS requests — hookbridge, a script behind it, or any program
// with a NATS client — registered in the KV bucket LLMW_HOOKS and run in the
// same hook.Chain as in-process hooks, so ordering, matchers, timeouts,
// failure policies, decisions and propagation are exactly those of package
// hook.
//
// # Calling a remote hook
//
// A Remote is built from an events.HookRegistration. Its MessageSend,
// BeforeToolCall, AfterToolCall, TurnEnd and Abort methods return it as the
// hook.Hook of that hook point. A call sends llmw.hook.request (a CloudEvent
// in binary content mode, subject and turnid = the turn id) by NATS request
// to the registration's subject, under the ctx the chain gives the hook
// (which carries its timeout_ms), and applies the reply:
//
//	on_message_send   messages     replace the context sent to the model
//	before_tool_call  tool_call    replaces the call (the id must stay the same)
//	after_tool_call   tool_result  replaces the result (the tool_use_id must stay)
//	on_turn_end       messages     are appended before the retry (continue_with_messages only)
//	every event       variables    are merged into Turn.Vars (keys set, others kept)
//	every event       emit         go to the UI as llmw.hook.message (Turn.Emit)
//
// The after_tool_call request carries the call (read-only) beside the
// result. A reply is a llmw.hook.response CloudEvent (binary or structured
// mode) or a bare JSON response object (DecodeResponse).
//
// A hook fails — and the chain applies its failure policy — when nobody
// answers (ErrNoResponders), the reply does not come within the timeout
// (the context's error; the chain reports hook.ErrTimeout), the reply is an
// error reply with a Nats-Service-Error header (ErrResponder), or it cannot
// be decoded, does not validate, has a result not allowed at the hook point
// or changes the id of the call or result (ErrInvalidReply).
//
// # The registry
//
// Register, RegisterOrdered and Unregister write LLMW_HOOKS; List reads it
// in run order. A hook's place among hooks of equal priority is the KV
// revision of its entry: a new name is created, an identical
// re-registration writes nothing and keeps the place, a changed
// registration is updated and so moves after the hooks registered so far
// (the bucket keeps one revision per key). RegisterOrdered registers a
// list so that the revisions follow the list (what hookbridge does with the
// hooks of its config file).
//
// # Watching the registry
//
// Watch loads LLMW_HOOKS (initial values included) into a hook.Chain and
// keeps it in sync: a put adds or replaces the remote hook (Seq = revision,
// Replace), a delete removes it. The chain snapshots its hook list at every
// hook point, so a change reaches running turns at their next hook point.
// WaitRevision and Sync let callers (and tests) wait until a change is in
// the chain. The turn service creates one chain, passes it to Watch and to
// every worker (worker.Config.Hooks), and stops the watcher after its turns
// drained:
//
//	chain := &hook.Chain{}
//	w, err := remotehook.Watch(ctx, js, chain, remotehook.WatchOptions{Config: remotehook.Config{Source: src}})
//	...
//	defer w.Stop()
package remotehook
