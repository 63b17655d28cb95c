package hook

import (
	"bytes"
	"regexp"
	"slices"

	"github.com/llmworker/llmworker/pkg/events"
)

// The specs say, per hook point, what a hook may change (clone/commit),
// what its matcher looks at and how its results map to the wire.

var sendSpec = spec[MessageSendInput, MessageSendResult]{
	event:    events.HookOnMessageSend,
	goOn:     events.HookContinue,
	failKind: events.HookCancel,
	turn:     func(in *MessageSendInput) *Turn { return in.Turn },
	clone: func(in *MessageSendInput, v *Turn) *MessageSendInput {
		return &MessageSendInput{Turn: v, Messages: cloneMessages(in.Messages)}
	},
	commit: func(dst, src *MessageSendInput) { dst.Messages = src.Messages },
	match:  func(in *MessageSendInput, re *regexp.Regexp) bool { return matchMessages(in.Messages, re) },
	callID: func(*MessageSendInput) string { return "" },
	result: func(r MessageSendResult) (events.HookResultKind, string) { return r.Action.Kind(), r.Reason },
	failed: func(reason string) MessageSendResult {
		return MessageSendResult{Action: MessageSendCancel, Reason: reason}
	},
}

var beforeSpec = spec[ToolCallInput, BeforeToolCallResult]{
	event:    events.HookBeforeToolCall,
	goOn:     events.HookContinue,
	failKind: events.HookAbort,
	turn:     func(in *ToolCallInput) *Turn { return in.Turn },
	clone: func(in *ToolCallInput, v *Turn) *ToolCallInput {
		w := *in
		w.Turn = v
		w.Call.Input = bytes.Clone(in.Call.Input)
		return &w
	},
	commit: func(dst, src *ToolCallInput) { dst.Call = src.Call },
	match:  func(in *ToolCallInput, re *regexp.Regexp) bool { return re.MatchString(in.Call.Name) },
	callID: func(in *ToolCallInput) string { return in.Call.ID },
	result: func(r BeforeToolCallResult) (events.HookResultKind, string) { return r.Action.Kind(), r.Reason },
	failed: func(reason string) BeforeToolCallResult {
		return BeforeToolCallResult{Action: ToolAbort, Reason: reason}
	},
}

var afterSpec = spec[ToolResultInput, AfterToolCallResult]{
	event:    events.HookAfterToolCall,
	goOn:     events.HookContinue,
	failKind: events.HookAbort,
	turn:     func(in *ToolResultInput) *Turn { return in.Turn },
	clone: func(in *ToolResultInput, v *Turn) *ToolResultInput {
		w := *in
		w.Turn = v
		// Result holds only strings and a bool: the struct copy is deep.
		return &w
	},
	commit: func(dst, src *ToolResultInput) { dst.Result = src.Result },
	match:  func(in *ToolResultInput, re *regexp.Regexp) bool { return re.MatchString(in.Call.Name) },
	callID: func(in *ToolResultInput) string { return in.Call.ID },
	result: func(r AfterToolCallResult) (events.HookResultKind, string) { return r.Action.Kind(), r.Reason },
	failed: func(reason string) AfterToolCallResult {
		return AfterToolCallResult{Action: ResultAbort, Reason: reason}
	},
}

var endSpec = spec[TurnEndInput, TurnEndResult]{
	event: events.HookOnTurnEnd,
	goOn:  events.HookFinish,
	// on_turn_end has no abort result; fail_closed aborts the turn all the
	// same (docs/protocol.md §7: fail_closed acts as abort), signalled by Failed.
	failKind: events.HookAbort,
	turn:     func(in *TurnEndInput) *Turn { return in.Turn },
	clone: func(in *TurnEndInput, v *Turn) *TurnEndInput {
		return &TurnEndInput{Turn: v, Messages: cloneMessages(in.Messages)}
	},
	commit: func(dst, src *TurnEndInput) { dst.Messages = src.Messages },
	match:  func(in *TurnEndInput, re *regexp.Regexp) bool { return matchMessages(in.Messages, re) },
	callID: func(*TurnEndInput) string { return "" },
	result: func(r TurnEndResult) (events.HookResultKind, string) { return r.Action.Kind(), r.Reason },
	failed: func(reason string) TurnEndResult { return TurnEndResult{Reason: reason} },
}

var abortSpec = spec[AbortInput, AbortResult]{
	event:    events.HookOnAbort,
	goOn:     events.HookContinue,
	failKind: events.HookContinue,
	all:      true,
	turn:     func(in *AbortInput) *Turn { return in.Turn },
	clone: func(in *AbortInput, v *Turn) *AbortInput {
		return &AbortInput{Turn: v, Reason: in.Reason, Messages: cloneMessages(in.Messages)}
	},
	commit: func(dst, src *AbortInput) { dst.Messages = src.Messages },
	match:  func(in *AbortInput, re *regexp.Regexp) bool { return matchMessages(in.Messages, re) },
	callID: func(*AbortInput) string { return "" },
	result: func(AbortResult) (events.HookResultKind, string) { return events.HookContinue, "" },
	failed: func(string) AbortResult { return AbortResult{} },
}

// cloneMessages copies the messages and their parts, so that a hook
// editing a part in place does not change the caller's messages. Raw JSON
// inputs are shared: replace them rather than editing their bytes.
func cloneMessages(msgs []events.Message) []events.Message {
	if msgs == nil {
		return nil
	}
	out := make([]events.Message, len(msgs))
	for i, m := range msgs {
		out[i] = events.Message{Role: m.Role, Content: slices.Clone(m.Content), Pinned: m.Pinned}
	}
	return out
}

// matchMessages reports whether a tool_use part names a matching tool.
func matchMessages(msgs []events.Message, re *regexp.Regexp) bool {
	for _, m := range msgs {
		for _, p := range m.Content {
			if p.Type == events.PartToolUse && re.MatchString(p.Name) {
				return true
			}
		}
	}
	return false
}
