// Package hookbridge is the config-file host of hooks: the engine of
// cmd/hookbridge, which serves built-in, command and HTTP hooks from a YAML
// file over NATS (docs/protocol.md §7). The serving itself is
// hook/hooknats' (Serve, the generic Adapt); this package turns a file
// into hooknats.Hooks.
//
// # Built-in hooks
//
// A builtin: block decodes into the config struct of package hook/builtin
// (its yaml names are the file's keys), which validates it; the hook is
// the same typed hook a library user puts into an in-process chain, served
// through hooknats.Adapt.
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
// within the hook's timeout; a non-2xx status, or a body that is not a JSON
// hook response with a "result" (an empty body included), is a failure.
//
// # Config files
//
// ParseConfig and LoadConfig read the YAML format (see
// deploy/hooks.example.yaml). An invalid file is refused as a whole with a
// *ConfigError naming the line, column and field that are wrong, e.g.
//
//	hooks.yaml:7:14: hooks[1].builtin.pattern: is not a valid regular expression: ...
package hookbridge
