package hook

import (
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/tool"
)

// Inputs: one type per hook point. Every input carries the Turn; the fields
// marked mutable are what a hook may change for the hooks after it and for
// the caller. The chain hands each hook its own copy and copies the mutable
// fields back only when the hook answered (no error, panic or timeout), so
// a failed or abandoned hook never leaves half-made changes behind.

// MessageSendInput is the input of on_message_send.
type MessageSendInput struct {
	Turn *Turn
	// Messages is the context sent to the model (mutable: insert a system
	// note, filter secrets, ...).
	Messages []events.Message
}

// ToolCallInput is the input of before_tool_call (ToolCallContext of
// docs/architecture.md#hooks).
type ToolCallInput struct {
	Turn *Turn
	// Call is the model's call (mutable: rewrite or sanitize the input).
	Call events.ToolCall
	// Tool is the tool's definition (metadata, read-only).
	Tool events.ToolDefinition
	// Impl is the tool itself, for hooks that need its state; nil for
	// remote tools or unknown names. Read-only.
	Impl tool.Tool
}

// ToolResultInput is the input of after_tool_call (ToolResultContext of
// docs/architecture.md#hooks).
type ToolResultInput struct {
	Turn *Turn
	// Call is the call that produced the result (read-only).
	Call events.ToolCall
	// Result is what the model will read (mutable: format, mask, ...).
	Result events.ToolResult
	// Tool and Impl as in ToolCallInput (read-only).
	Tool events.ToolDefinition
	Impl tool.Tool
}

// TurnEndInput is the input of on_turn_end.
type TurnEndInput struct {
	Turn *Turn
	// Messages is the transcript. A hook may change it for the on_turn_end
	// hooks after it (the chain passes the changes on as for every hook
	// point), but the worker keeps its own transcript: to add to the turn,
	// answer TurnContinueWithMessages with Result.Messages.
	Messages []events.Message
}

// AbortInput is the input of on_abort (a notification).
type AbortInput struct {
	Turn *Turn
	// Reason says why the turn is aborting.
	Reason   string
	Messages []events.Message
}

// MessageSendAction is what an on_message_send hook decides. The zero
// value continues.
type MessageSendAction uint8

const (
	// MessageSendContinue passes the (possibly changed) context on.
	MessageSendContinue MessageSendAction = iota
	// MessageSendCancel stops the chain and cancels the request: the turn
	// does not call the model.
	MessageSendCancel
)

// BeforeToolCallAction is what a before_tool_call hook decides. The zero
// value continues.
type BeforeToolCallAction uint8

const (
	// ToolContinue passes the (possibly rewritten) call on; after the last
	// hook the call runs.
	ToolContinue BeforeToolCallAction = iota
	// ToolSkip stops the chain and skips this call; the model reads an
	// error result naming the hook.
	ToolSkip
	// ToolAbort stops the chain and aborts the turn (on_abort hooks run).
	ToolAbort
	// ToolPause stops the chain and pauses the turn until a resume.
	ToolPause
)

// AfterToolCallAction is what an after_tool_call hook decides. The zero
// value continues.
type AfterToolCallAction uint8

const (
	// ResultContinue passes the (possibly changed) result on.
	ResultContinue AfterToolCallAction = iota
	// ResultAbort stops the chain and aborts the turn.
	ResultAbort
)

// TurnEndAction is what an on_turn_end hook decides. The zero value
// finishes (and lets the next hook look at the turn).
type TurnEndAction uint8

const (
	// TurnFinish lets the turn end (after the remaining hooks agree).
	TurnFinish TurnEndAction = iota
	// TurnContinueWithMessages stops the chain; the caller appends the
	// result's Messages and asks the model again (bounded by the worker).
	TurnContinueWithMessages
	// TurnPause stops the chain and pauses the turn.
	TurnPause
)

// MessageSendResult is the result of an on_message_send hook.
type MessageSendResult struct {
	Action MessageSendAction
	Reason string
}

// BeforeToolCallResult is the result of a before_tool_call hook.
type BeforeToolCallResult struct {
	Action BeforeToolCallAction
	Reason string
}

// AfterToolCallResult is the result of an after_tool_call hook.
type AfterToolCallResult struct {
	Action AfterToolCallAction
	Reason string
}

// TurnEndResult is the result of an on_turn_end hook.
type TurnEndResult struct {
	Action TurnEndAction
	// Messages are appended to the transcript before the retry
	// (TurnContinueWithMessages only).
	Messages []events.Message
	Reason   string
}

// AbortResult is the (empty) result of an on_abort hook.
type AbortResult struct{}

// Kind returns the wire name of the action (docs/protocol.md §7), "" if a is not
// an action of this hook point.
func (a MessageSendAction) Kind() events.HookResultKind {
	switch a {
	case MessageSendContinue:
		return events.HookContinue
	case MessageSendCancel:
		return events.HookCancel
	}
	return ""
}

// Kind returns the wire name of the action, "" if invalid.
func (a BeforeToolCallAction) Kind() events.HookResultKind {
	switch a {
	case ToolContinue:
		return events.HookContinue
	case ToolSkip:
		return events.HookSkip
	case ToolAbort:
		return events.HookAbort
	case ToolPause:
		return events.HookPause
	}
	return ""
}

// Kind returns the wire name of the action, "" if invalid.
func (a AfterToolCallAction) Kind() events.HookResultKind {
	switch a {
	case ResultContinue:
		return events.HookContinue
	case ResultAbort:
		return events.HookAbort
	}
	return ""
}

// Kind returns the wire name of the action, "" if invalid.
func (a TurnEndAction) Kind() events.HookResultKind {
	switch a {
	case TurnFinish:
		return events.HookFinish
	case TurnContinueWithMessages:
		return events.HookContinueWithMessages
	case TurnPause:
		return events.HookPause
	}
	return ""
}

func (a MessageSendAction) String() string    { return kindString(a.Kind(), uint8(a)) }
func (a BeforeToolCallAction) String() string { return kindString(a.Kind(), uint8(a)) }
func (a AfterToolCallAction) String() string  { return kindString(a.Kind(), uint8(a)) }
func (a TurnEndAction) String() string        { return kindString(a.Kind(), uint8(a)) }

func kindString(k events.HookResultKind, v uint8) string {
	if k == "" {
		return fmt.Sprintf("invalid(%d)", v)
	}
	return string(k)
}

// ParseMessageSendAction maps a wire result to an action; "" is continue.
// Results not allowed at on_message_send return an error matching
// ErrInvalidResult. Remote hooks (docs/protocol.md §7) use the Parse functions to
// turn a reply into a result.
func ParseMessageSendAction(k events.HookResultKind) (MessageSendAction, error) {
	switch k {
	case "", events.HookContinue:
		return MessageSendContinue, nil
	case events.HookCancel:
		return MessageSendCancel, nil
	}
	return 0, invalidResult(events.HookOnMessageSend, k)
}

// ParseBeforeToolCallAction maps a wire result to an action; "" is
// continue.
func ParseBeforeToolCallAction(k events.HookResultKind) (BeforeToolCallAction, error) {
	switch k {
	case "", events.HookContinue:
		return ToolContinue, nil
	case events.HookSkip:
		return ToolSkip, nil
	case events.HookAbort:
		return ToolAbort, nil
	case events.HookPause:
		return ToolPause, nil
	}
	return 0, invalidResult(events.HookBeforeToolCall, k)
}

// ParseAfterToolCallAction maps a wire result to an action; "" is continue.
func ParseAfterToolCallAction(k events.HookResultKind) (AfterToolCallAction, error) {
	switch k {
	case "", events.HookContinue:
		return ResultContinue, nil
	case events.HookAbort:
		return ResultAbort, nil
	}
	return 0, invalidResult(events.HookAfterToolCall, k)
}

// ParseTurnEndAction maps a wire result to an action; "" is finish.
func ParseTurnEndAction(k events.HookResultKind) (TurnEndAction, error) {
	switch k {
	case "", events.HookFinish:
		return TurnFinish, nil
	case events.HookContinueWithMessages:
		return TurnContinueWithMessages, nil
	case events.HookPause:
		return TurnPause, nil
	}
	return 0, invalidResult(events.HookOnTurnEnd, k)
}

func invalidResult(e events.HookEvent, k events.HookResultKind) error {
	return fmt.Errorf("%w: %q is not a result of %s", ErrInvalidResult, k, e)
}
