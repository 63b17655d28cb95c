package events

import "regexp"

// CloudEvent types of the hook protocol (docs/protocol.md §7).
const (
	TypeHookRequest  = "llmw.hook.request"
	TypeHookResponse = "llmw.hook.response"
)

// HookEvent names a hook point.
type HookEvent string

const (
	HookOnMessageSend  HookEvent = "on_message_send"
	HookBeforeToolCall HookEvent = "before_tool_call"
	HookAfterToolCall  HookEvent = "after_tool_call"
	HookOnTurnEnd      HookEvent = "on_turn_end"
	HookOnAbort        HookEvent = "on_abort"
)

// HookEvents lists the hook points in the order a turn reaches them.
var HookEvents = []HookEvent{HookOnMessageSend, HookBeforeToolCall, HookAfterToolCall, HookOnTurnEnd, HookOnAbort}

// Valid reports whether e is one of the five hook points.
func (e HookEvent) Valid() bool {
	switch e {
	case HookOnMessageSend, HookBeforeToolCall, HookAfterToolCall, HookOnTurnEnd, HookOnAbort:
		return true
	}
	return false
}

// HookResultKind is the "result" of a hook reply.
type HookResultKind string

const (
	HookContinue             HookResultKind = "continue"
	HookCancel               HookResultKind = "cancel"
	HookSkip                 HookResultKind = "skip"
	HookAbort                HookResultKind = "abort"
	HookPause                HookResultKind = "pause"
	HookFinish               HookResultKind = "finish"
	HookContinueWithMessages HookResultKind = "continue_with_messages"
)

// Allowed reports whether result r may be returned at hook point e
// (docs/protocol.md §7's table). on_abort accepts only continue (it is a
// notification).
func (r HookResultKind) Allowed(e HookEvent) bool {
	switch e {
	case HookOnMessageSend:
		return r == HookContinue || r == HookCancel
	case HookBeforeToolCall:
		return r == HookContinue || r == HookSkip || r == HookAbort || r == HookPause
	case HookAfterToolCall:
		return r == HookContinue || r == HookAbort
	case HookOnTurnEnd:
		return r == HookFinish || r == HookContinueWithMessages || r == HookPause
	case HookOnAbort:
		return r == HookContinue || r == ""
	}
	return false
}

// FailurePolicy says what a hook failure (timeout, no responder, invalid
// reply, error) means.
type FailurePolicy string

const (
	// FailClosed (the default) acts as abort (cancel for on_message_send).
	FailClosed FailurePolicy = "fail_closed"
	// FailOpen goes on as if the hook had answered continue.
	FailOpen FailurePolicy = "fail_open"
)

// HookRegistration is the value of a hook in KV LLMW_HOOKS (docs/protocol.md §7).
type HookRegistration struct {
	Name      string        `json:"name"`
	Event     HookEvent     `json:"event" jsonschema:"enum=on_message_send,enum=before_tool_call,enum=after_tool_call,enum=on_turn_end,enum=on_abort"`
	Matcher   string        `json:"matcher,omitempty"`
	Subject   string        `json:"subject"`
	Priority  int           `json:"priority,omitempty"`
	TimeoutMS int64         `json:"timeout_ms,omitempty"`
	Failure   FailurePolicy `json:"failure,omitempty" jsonschema:"enum=fail_closed,enum=fail_open"`
}

// Validate checks name, event, subject, matcher and failure policy.
func (h HookRegistration) Validate() error {
	if h.Name == "" {
		return missing("name")
	}
	if !ValidToken(h.Name) {
		return invalidf("name", "must be a NATS subject token (it is the KV key), got %q", h.Name)
	}
	if h.Event == "" {
		return missing("event")
	}
	if !h.Event.Valid() {
		return invalidf("event", "must be on_message_send, before_tool_call, after_tool_call, on_turn_end or on_abort, got %q", h.Event)
	}
	if h.Subject == "" {
		return missing("subject")
	}
	if h.Matcher != "" {
		if _, err := regexp.Compile(h.Matcher); err != nil {
			return invalidf("matcher", "is not a valid regular expression: %v", err)
		}
	}
	switch h.Failure {
	case "", FailClosed, FailOpen:
	default:
		return invalidf("failure", "must be fail_closed or fail_open, got %q", h.Failure)
	}
	if h.TimeoutMS < 0 {
		return invalidf("timeout_ms", "must not be negative")
	}
	return nil
}

// HookRequest is the data of llmw.hook.request.
type HookRequest struct {
	Event     HookEvent         `json:"event"`
	Hook      string            `json:"hook,omitempty"`
	TurnID    string            `json:"turn_id"`
	SessionID string            `json:"session_id,omitempty"`
	Step      int               `json:"step"`
	Variables map[string]string `json:"variables,omitempty"`
	// Messages: the context (on_message_send), the transcript (on_turn_end,
	// on_abort).
	Messages   []Message       `json:"messages,omitempty"`
	ToolCall   *ToolCall       `json:"tool_call,omitempty"`
	ToolResult *ToolResult     `json:"tool_result,omitempty"`
	Tool       *ToolDefinition `json:"tool,omitempty"`
	// Reason is why the turn is aborting (on_abort only).
	Reason string `json:"reason,omitempty"`
}

// Validate checks the event and that the event's input is present.
func (r HookRequest) Validate() error {
	if r.Event == "" {
		return missing("event")
	}
	if !r.Event.Valid() {
		return invalidf("event", "unknown hook event %q", r.Event)
	}
	if r.TurnID == "" {
		return missing("turn_id")
	}
	switch r.Event {
	case HookBeforeToolCall:
		if r.ToolCall == nil {
			return missing("tool_call")
		}
	case HookAfterToolCall:
		if r.ToolResult == nil {
			return missing("tool_result")
		}
	}
	return nil
}

// HookResponse is the data of llmw.hook.response.
type HookResponse struct {
	Result     HookResultKind    `json:"result"`
	Reason     string            `json:"reason,omitempty"`
	Messages   []Message         `json:"messages,omitempty"`
	ToolCall   *ToolCall         `json:"tool_call,omitempty"`
	ToolResult *ToolResult       `json:"tool_result,omitempty"`
	Variables  map[string]string `json:"variables,omitempty"`
	Emit       []Message         `json:"emit,omitempty"`
}

// Validate checks the result and the replaced values. Whether the result is
// allowed at a given hook point is ValidateFor's concern.
func (r HookResponse) Validate() error {
	if err := ValidateMessages("messages", r.Messages); err != nil {
		return err
	}
	if r.ToolCall != nil {
		if err := r.ToolCall.Validate(); err != nil {
			return prefixField("tool_call", err)
		}
	}
	if r.ToolResult != nil {
		if err := r.ToolResult.Validate(); err != nil {
			return prefixField("tool_result", err)
		}
	}
	return ValidateMessages("emit", r.Emit)
}

// ValidateFor checks that the result is allowed at hook point e. An empty
// result means continue (finish for on_turn_end).
func (r HookResponse) ValidateFor(e HookEvent) error {
	if err := r.Validate(); err != nil {
		return err
	}
	res := r.Result
	if res == "" {
		return nil
	}
	if !res.Allowed(e) {
		return invalidf("result", "%q is not a result of %s", res, e)
	}
	return nil
}
