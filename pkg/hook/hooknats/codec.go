package hooknats

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// point is the wire mapping of one hook point, in both directions, so the
// caller (Remote) and the responder (Adapt) cannot drift apart:
//
//	caller:    input --request--> HookRequest     HookResponse --apply--> result (+ input changes)
//	responder: HookRequest --input--> input       result (+ input changes) --reply--> HookResponse
//
// The turn's fields (ids, step, variables, emitted messages) are mapped
// by turnToRequest / applyCommon and turnFromRequest / the responder's
// Turn, the same for every point.
type point[In, Out any] struct {
	event events.HookEvent
	turn  func(in *In) *hook.Turn
	// caller side
	request func(in *In, req *events.HookRequest)
	apply   func(in *In, resp *events.HookResponse) (Out, error)
	// responder side
	input func(req *events.HookRequest, t *hook.Turn) *In
	reply func(req *events.HookRequest, in *In, out Out, resp *events.HookResponse)
	// kind and reason of a result
	result func(out Out) (events.HookResultKind, string)
}

var sendPoint = &point[hook.MessageSendInput, hook.MessageSendResult]{
	event: events.HookOnMessageSend,
	turn:  func(in *hook.MessageSendInput) *hook.Turn { return in.Turn },
	request: func(in *hook.MessageSendInput, req *events.HookRequest) {
		req.Messages = in.Messages
	},
	apply: func(in *hook.MessageSendInput, resp *events.HookResponse) (hook.MessageSendResult, error) {
		act, err := hook.ParseMessageSendAction(resp.Result)
		if err != nil {
			return hook.MessageSendResult{}, err
		}
		if resp.Messages != nil {
			in.Messages = resp.Messages
		}
		return hook.MessageSendResult{Action: act, Reason: resp.Reason}, nil
	},
	input: func(req *events.HookRequest, t *hook.Turn) *hook.MessageSendInput {
		return &hook.MessageSendInput{Turn: t, Messages: req.Messages}
	},
	reply: func(req *events.HookRequest, in *hook.MessageSendInput, _ hook.MessageSendResult, resp *events.HookResponse) {
		if !reflect.DeepEqual(in.Messages, req.Messages) {
			resp.Messages = in.Messages
		}
	},
	result: func(r hook.MessageSendResult) (events.HookResultKind, string) { return r.Action.Kind(), r.Reason },
}

var beforePoint = &point[hook.ToolCallInput, hook.BeforeToolCallResult]{
	event: events.HookBeforeToolCall,
	turn:  func(in *hook.ToolCallInput) *hook.Turn { return in.Turn },
	request: func(in *hook.ToolCallInput, req *events.HookRequest) {
		call := in.Call
		req.ToolCall = &call
		req.Tool = toolDef(in.Tool)
	},
	apply: func(in *hook.ToolCallInput, resp *events.HookResponse) (hook.BeforeToolCallResult, error) {
		act, err := hook.ParseBeforeToolCallAction(resp.Result)
		if err != nil {
			return hook.BeforeToolCallResult{}, err
		}
		if c := resp.ToolCall; c != nil {
			if c.ID != in.Call.ID {
				return hook.BeforeToolCallResult{}, fmt.Errorf("tool_call.id %q is not the call's id %q", c.ID, in.Call.ID)
			}
			in.Call = *c
		}
		return hook.BeforeToolCallResult{Action: act, Reason: resp.Reason}, nil
	},
	input: func(req *events.HookRequest, t *hook.Turn) *hook.ToolCallInput {
		in := &hook.ToolCallInput{Turn: t}
		if req.ToolCall != nil {
			in.Call = *req.ToolCall
			in.Call.Input = bytes.Clone(req.ToolCall.Input)
		}
		if req.Tool != nil {
			in.Tool = *req.Tool
		}
		return in
	},
	reply: func(req *events.HookRequest, in *hook.ToolCallInput, _ hook.BeforeToolCallResult, resp *events.HookResponse) {
		if req.ToolCall == nil || in.Call.Name != req.ToolCall.Name || !bytes.Equal(in.Call.Input, req.ToolCall.Input) {
			call := in.Call
			resp.ToolCall = &call
		}
	},
	result: func(r hook.BeforeToolCallResult) (events.HookResultKind, string) { return r.Action.Kind(), r.Reason },
}

var afterPoint = &point[hook.ToolResultInput, hook.AfterToolCallResult]{
	event: events.HookAfterToolCall,
	turn:  func(in *hook.ToolResultInput) *hook.Turn { return in.Turn },
	request: func(in *hook.ToolResultInput, req *events.HookRequest) {
		call, res := in.Call, in.Result
		req.ToolCall, req.ToolResult = &call, &res
		req.Tool = toolDef(in.Tool)
	},
	apply: func(in *hook.ToolResultInput, resp *events.HookResponse) (hook.AfterToolCallResult, error) {
		act, err := hook.ParseAfterToolCallAction(resp.Result)
		if err != nil {
			return hook.AfterToolCallResult{}, err
		}
		if tr := resp.ToolResult; tr != nil {
			if tr.ToolUseID != in.Result.ToolUseID {
				return hook.AfterToolCallResult{}, fmt.Errorf("tool_result.tool_use_id %q is not the result's %q", tr.ToolUseID, in.Result.ToolUseID)
			}
			in.Result = *tr
		}
		return hook.AfterToolCallResult{Action: act, Reason: resp.Reason}, nil
	},
	input: func(req *events.HookRequest, t *hook.Turn) *hook.ToolResultInput {
		in := &hook.ToolResultInput{Turn: t}
		if req.ToolCall != nil {
			in.Call = *req.ToolCall
		}
		if req.ToolResult != nil {
			in.Result = *req.ToolResult
		}
		if req.Tool != nil {
			in.Tool = *req.Tool
		}
		return in
	},
	reply: func(req *events.HookRequest, in *hook.ToolResultInput, _ hook.AfterToolCallResult, resp *events.HookResponse) {
		if req.ToolResult == nil || !reflect.DeepEqual(in.Result, *req.ToolResult) {
			res := in.Result
			resp.ToolResult = &res
		}
	},
	result: func(r hook.AfterToolCallResult) (events.HookResultKind, string) { return r.Action.Kind(), r.Reason },
}

var endPoint = &point[hook.TurnEndInput, hook.TurnEndResult]{
	event: events.HookOnTurnEnd,
	turn:  func(in *hook.TurnEndInput) *hook.Turn { return in.Turn },
	request: func(in *hook.TurnEndInput, req *events.HookRequest) {
		req.Messages = in.Messages
	},
	apply: func(_ *hook.TurnEndInput, resp *events.HookResponse) (hook.TurnEndResult, error) {
		act, err := hook.ParseTurnEndAction(resp.Result)
		if err != nil {
			return hook.TurnEndResult{}, err
		}
		out := hook.TurnEndResult{Action: act, Reason: resp.Reason}
		if act == hook.TurnContinueWithMessages {
			out.Messages = resp.Messages
		}
		return out, nil
	},
	input: func(req *events.HookRequest, t *hook.Turn) *hook.TurnEndInput {
		return &hook.TurnEndInput{Turn: t, Messages: req.Messages}
	},
	reply: func(_ *events.HookRequest, _ *hook.TurnEndInput, out hook.TurnEndResult, resp *events.HookResponse) {
		if out.Action == hook.TurnContinueWithMessages {
			resp.Messages = out.Messages
		}
	},
	result: func(r hook.TurnEndResult) (events.HookResultKind, string) { return r.Action.Kind(), r.Reason },
}

var abortPoint = &point[hook.AbortInput, hook.AbortResult]{
	event: events.HookOnAbort,
	turn:  func(in *hook.AbortInput) *hook.Turn { return in.Turn },
	request: func(in *hook.AbortInput, req *events.HookRequest) {
		req.Messages, req.Reason = in.Messages, in.Reason
	},
	apply: func(*hook.AbortInput, *events.HookResponse) (hook.AbortResult, error) { return hook.AbortResult{}, nil },
	input: func(req *events.HookRequest, t *hook.Turn) *hook.AbortInput {
		return &hook.AbortInput{Turn: t, Reason: req.Reason, Messages: req.Messages}
	},
	reply:  func(*events.HookRequest, *hook.AbortInput, hook.AbortResult, *events.HookResponse) {},
	result: func(hook.AbortResult) (events.HookResultKind, string) { return events.HookContinue, "" },
}

// turnToRequest fills the fields every hook point sends.
func turnToRequest(t *hook.Turn, req *events.HookRequest) {
	if t == nil {
		return
	}
	req.TurnID, req.SessionID, req.Step = t.ID, t.SessionID, t.Step
	if len(t.Vars) > 0 {
		req.Variables = maps.Clone(map[string]string(t.Vars))
	}
}

// applyCommon merges the reply's variables into the turn's (the hook's
// view; the chain commits them when the hook answered) and sends its emit
// messages to the UI.
func applyCommon(t *hook.Turn, resp *events.HookResponse) {
	if t == nil {
		return
	}
	if len(resp.Variables) > 0 {
		if t.Vars == nil {
			t.Vars = hook.Variables{}
		}
		maps.Copy(t.Vars, resp.Variables)
	}
	if len(resp.Emit) > 0 {
		t.Emit(resp.Emit...)
	}
}

func toolDef(d events.ToolDefinition) *events.ToolDefinition {
	if d.Name == "" {
		return nil
	}
	return &d
}
