// Package builtin holds llmworker's built-in hooks as typed in-process
// hooks of package hook: put them into any hook.Chain (a library user's
// worker, the turn service) or serve them on NATS (cmd/hookbridge serves
// them from its YAML config through hook/hooknats).
//
//	config           hook point        does
//	DenyTools        before_tool_call  skip calls of tools matching Pattern, with Reason
//	RequireApproval  before_tool_call  pause before calls of tools matching Pattern
//	RewriteInput     before_tool_call  set / delete fields of the call's input (paths a.b.0.c)
//	LimitToolCalls   before_tool_call  skip calls beyond Max per turn (count in a turn variable)
//	MaskResult       after_tool_call   replace regexp matches in results (presets: emails, secrets)
//	InjectMessage    on_message_send   add a message such as "Current date: {{date}}" to each request
//	ValidateJSON     on_turn_end       check the answer as JSON / against a JSON Schema; ask the model to fix it
//
// Each is a config struct with Validate and yaml tags (the names of the
// hookbridge config file); New builds the hook of a config, AddTo
// registers it in a chain at its hook point. A config that does not
// validate is a *FieldError naming the field.
package builtin
