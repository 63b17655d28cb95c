// Package hooknats is the NATS transport of package hook (docs/protocol.md
// §7): both sides of remote hooks. The calling side runs hooks that answer
// NATS requests — hookbridge, a Go program using Serve, or any program with
// a NATS client — registered in the KV bucket LLMW_HOOKS, in the same
// hook.Chain as in-process hooks, so ordering, matchers, timeouts, failure
// policies, decisions and propagation are exactly those of package hook.
// The serving side answers those requests with any hook.
//
// # Serving hooks
//
// Adapt turns any in-process hook (hook.BeforeToolCallFunc, a built-in of
// hook/builtin, your own type) into a Handler; ServeHook adds its
// registration. One mapping per hook point (codec.go) is used in both
// directions, so what a Remote sends is what Adapt reads and what Adapt
// replies is what a Remote reads. A Handler may also answer the wire types directly (HandlerFunc).
//
// Serve, or NewServer + Start + Stop, does the rest: it subscribes each
// hook's subject (P.hook.<name> unless the registration names one) in a
// queue group, so replicas share the requests; decodes the request (binary
// or structured CloudEvent, or bare JSON); calls the handler under the
// hook's timeout_ms; replies with a llmw.hook.response CloudEvent in binary
// mode; and registers the hooks in LLMW_HOOKS in the order they were added
// (RegisterOrdered: restarting with the same hooks writes nothing, so the
// order the turns see stays put). A handler error, a panic, or a response
// that is not valid for the hook's event is answered with an error reply
// (Nats-Service-Error header), which the turn treats as a hook failure
// under the hook's failure policy. Stop drains: no new requests, requests
// in flight finish. Registrations stay in LLMW_HOOKS after Stop unless
// ServerConfig.UnregisterOnStop (other replicas may still serve them).
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
// error reply with a Nats-Service-Error header (ErrResponder), or it is
// empty, is not a JSON object with a "result" (DecodeBody), cannot be
// decoded, does not validate, has a result not allowed at the hook point or
// changes the id of the call or result (ErrInvalidReply).
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
// the chain. A value that does not validate (Register refuses it; a
// client's direct KV put does not) becomes a hook that fails every call
// under its failure policy (broken.go: BrokenOf), so that a guard with a
// typo refuses rather than lets through; List returns it with Entry.Err.
// The turn service creates one chain, passes it to Watch and to
// every worker (worker.Config.Hooks), and stops the watcher after its turns
// drained:
//
//	chain := &hook.Chain{}
//	w, err := hooknats.Watch(ctx, js, chain, hooknats.WatchOptions{Config: hooknats.Config{Source: src}})
//	...
//	defer w.Stop()
package hooknats
