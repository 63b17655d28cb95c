// Package hookbridge serves hooks (DESIGN.md §7) as NATS request/reply
// responders: a Go library for hooks written in Go, and the engine of
// cmd/hookbridge, which hosts built-in, command and HTTP hooks from a YAML
// config file.
//
// # Serving hooks from Go
//
// A Handler answers the events.HookRequest of one hook with an
// events.HookResponse (nil continues). Serve, or New + Start + Stop, does
// the rest: it subscribes each hook's subject (P.hook.<name> unless the
// registration names one) in a queue group, so replicas share the requests;
// decodes the request (binary or structured CloudEvent, or bare JSON);
// calls the handler under the hook's timeout_ms; replies with a
// llmw.hook.response CloudEvent in binary mode; and registers the hooks in
// KV LLMW_HOOKS in the order they were added (remotehook.RegisterOrdered:
// restarting with the same hooks writes nothing, so the order the turns see
// stays put). A handler error, a panic, or a response that is not valid for
// the hook's event is answered with an error reply (Nats-Service-Error
// header), which the turn treats as a hook failure under the hook's failure
// policy. Stop drains: no new requests, requests in flight finish.
// Registrations stay in LLMW_HOOKS after Stop unless
// Config.UnregisterOnStop (other replicas may still serve them).
//
// # Built-in hooks
//
//	type              event             does
//	deny_tools        before_tool_call  skip calls of tools matching pattern, with reason
//	require_approval  before_tool_call  pause before calls of tools matching pattern
//	rewrite_input     before_tool_call  set / delete fields of the call's input (paths a.b.0.c)
//	limit_tool_calls  before_tool_call  skip calls beyond max per turn (count in a turn variable)
//	mask_result       after_tool_call   replace regexp matches in results (presets: emails, secrets)
//	inject_message    on_message_send   add a message such as "Current date: {{date}}" to each request
//	validate_json     on_turn_end       check the answer as JSON / against a JSON Schema; ask the model to fix it
//
// # Command hooks
//
// A command hook runs a program per request: the request as JSON on stdin,
// the reply as JSON on stdout; exit code 0 with empty output continues;
// exit code 2 blocks with stderr as the reason (skip at before_tool_call,
// cancel at on_message_send, abort at after_tool_call; at on_turn_end
// stderr becomes a user message and the model is asked to continue); other
// exit codes are failures. A timeout kills the process group. argv runs
// without a shell; a shell: line the user wrote runs under /bin/sh -c, and
// in both cases the request reaches the program only through stdin and the
// environment, never through the command line.
//
// # HTTP hooks
//
// An HTTP hook POSTs the request as JSON and reads the reply as JSON
// within the hook's timeout; a non-2xx status is a failure.
//
// # Config files
//
// ParseConfig and LoadConfig read the YAML format (see
// deploy/hooks.example.yaml). An invalid file is refused as a whole with a
// *ConfigError naming the line, column and field that are wrong, e.g.
//
//	hooks.yaml:7:14: hooks[1].builtin.pattern: is not a valid regular expression: ...
package hookbridge
