package remotehook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// Error reply headers: the micro convention, so that a responder built
// with nats.go/micro and one built with hookbridge fail the same way.
const (
	HeaderError     = micro.ErrorHeader     // Nats-Service-Error: the error text
	HeaderErrorCode = micro.ErrorCodeHeader // Nats-Service-Error-Code: e.g. "500"
)

// Config configures the remote hooks of one caller. The zero value stamps
// requests with the source /llmw/turn/<random>.
type Config struct {
	// Source is the CloudEvent source of hook requests ("" =
	// events.Source("turn", <random>)).
	Source string
}

func (c Config) source() string {
	if c.Source != "" {
		return c.Source
	}
	return events.Source("turn", nuid.Next())
}

// Remote is one registered remote hook: it sends llmw.hook.request to the
// registration's subject and turns the reply into the hook point's result.
// It is safe for concurrent use. Use the method of its event (MessageSend,
// BeforeToolCall, ...) to get the hook.Hook value, or AddTo to register it
// in a chain.
type Remote struct {
	nc     *nats.Conn
	reg    events.HookRegistration
	source string
}

// New returns the remote hook of reg on nc. Errors match
// ErrInvalidRegistration.
func New(nc *nats.Conn, reg events.HookRegistration, cfg Config) (*Remote, error) {
	if err := reg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRegistration, err)
	}
	return &Remote{nc: nc, reg: reg, source: cfg.source()}, nil
}

// Registration returns the registration the hook was made from.
func (r *Remote) Registration() events.HookRegistration { return r.reg }

// Options returns the chain options of a registration: name, priority,
// matcher, timeout (timeout_ms; 0 = the chain's default), failure policy,
// and seq (its place among equal priorities: the registry revision).
// Replace is set so that a changed registration replaces the hook in
// place.
func Options(reg events.HookRegistration, seq int64) hook.Options {
	return hook.Options{
		Name: reg.Name, Priority: reg.Priority, Matcher: reg.Matcher,
		Timeout: time.Duration(reg.TimeoutMS) * time.Millisecond,
		Failure: reg.Failure, Seq: seq, Replace: true,
	}
}

// AddTo registers the hook in c at its registration's hook point, with
// Options(reg, seq). A hook of the same name already in c is replaced.
func (r *Remote) AddTo(c *hook.Chain, seq int64) error {
	o := Options(r.reg, seq)
	switch r.reg.Event {
	case events.HookOnMessageSend:
		return c.OnMessageSend(r.MessageSend(), o)
	case events.HookBeforeToolCall:
		return c.BeforeToolCall(r.BeforeToolCall(), o)
	case events.HookAfterToolCall:
		return c.AfterToolCall(r.AfterToolCall(), o)
	case events.HookOnTurnEnd:
		return c.OnTurnEnd(r.TurnEnd(), o)
	case events.HookOnAbort:
		return c.OnAbort(r.Abort(), o)
	}
	return fmt.Errorf("%w: unknown event %q", ErrInvalidRegistration, r.reg.Event)
}

// Request sends req to the hook and returns its validated reply: decoded
// from a CloudEvent (binary or structured mode) or bare JSON, checked with
// ValidateFor(req.Event). Errors match ErrNoResponders, ErrInvalidReply,
// ErrResponder, or the context's error (the hook's timeout).
func (r *Remote) Request(ctx context.Context, req *events.HookRequest) (*events.HookResponse, error) {
	if req.Hook == "" {
		req.Hook = r.reg.Name
	}
	env, err := events.NewEnvelope(r.source, events.TypeHookRequest, req)
	if err != nil {
		return nil, err
	}
	env.Subject, env.TurnID, env.SessionID = req.TurnID, req.TurnID, req.SessionID
	msg := &nats.Msg{Subject: r.reg.Subject, Header: make(nats.Header, 10), Data: env.Data}
	env.WriteBinaryHeader(msg.Header)
	reply, err := r.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, fmt.Errorf("%w on %s", ErrNoResponders, r.reg.Subject)
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("no reply on %s: %w", r.reg.Subject, cerr)
		}
		return nil, fmt.Errorf("request on %s: %w", r.reg.Subject, err)
	}
	return DecodeResponse(reply.Header, reply.Data, req.Event)
}

// DecodeResponse reads a hook reply: an error reply (Nats-Service-Error
// header) is ErrResponder; otherwise the body is a llmw.hook.response
// CloudEvent (binary or structured mode) or a bare JSON response object,
// validated for hook point ev. Errors match ErrResponder or
// ErrInvalidReply (and events.ErrInvalid where a field is to blame).
func DecodeResponse(h map[string][]string, body []byte, ev events.HookEvent) (*events.HookResponse, error) {
	if msg := nats.Header(h).Get(HeaderError); msg != "" {
		code := nats.Header(h).Get(HeaderErrorCode)
		if code != "" {
			return nil, fmt.Errorf("%w (%s): %s", ErrResponder, code, msg)
		}
		return nil, fmt.Errorf("%w: %s", ErrResponder, msg)
	}
	data := body
	env, err := events.DecodeEnvelope(h, body)
	switch {
	case errors.Is(err, events.ErrNotCloudEvent):
		// A bare JSON response (DESIGN.md §7 lets any client answer so).
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalidReply, err)
	case env.Type != events.TypeHookResponse:
		return nil, fmt.Errorf("%w: CloudEvent type is %q, want %q", ErrInvalidReply, env.Type, events.TypeHookResponse)
	default:
		data = env.Data
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%w: empty reply", ErrInvalidReply)
	}
	resp, err := events.Decode[events.HookResponse](data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidReply, err)
	}
	if err := resp.ValidateFor(ev); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidReply, err)
	}
	return &resp, nil
}

// newRequest fills the fields every hook point sends.
func (r *Remote) newRequest(t *hook.Turn) *events.HookRequest {
	req := &events.HookRequest{Event: r.reg.Event, Hook: r.reg.Name}
	if t != nil {
		req.TurnID, req.SessionID, req.Step = t.ID, t.SessionID, t.Step
		if len(t.Vars) > 0 {
			req.Variables = maps.Clone(map[string]string(t.Vars))
		}
	}
	return req
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

// MessageSend returns the hook as an on_message_send hook: a reply's
// messages (when present) replace the context sent to the model.
func (r *Remote) MessageSend() hook.MessageSendHook { return messageSend{r} }

// BeforeToolCall returns the hook as a before_tool_call hook: a reply's
// tool_call (when present, with the same id) replaces the call.
func (r *Remote) BeforeToolCall() hook.BeforeToolCallHook { return beforeToolCall{r} }

// AfterToolCall returns the hook as an after_tool_call hook: a reply's
// tool_result (when present, with the same tool_use_id) replaces the
// result. The request carries the call (read-only) beside the result.
func (r *Remote) AfterToolCall() hook.AfterToolCallHook { return afterToolCall{r} }

// TurnEnd returns the hook as an on_turn_end hook: with
// continue_with_messages the reply's messages are the result's Messages
// (appended by the worker before it asks the model again).
func (r *Remote) TurnEnd() hook.TurnEndHook { return turnEnd{r} }

// Abort returns the hook as an on_abort hook (a notification: only the
// variables and emit of the reply are used).
func (r *Remote) Abort() hook.AbortHook { return abort{r} }

type (
	messageSend    struct{ r *Remote }
	beforeToolCall struct{ r *Remote }
	afterToolCall  struct{ r *Remote }
	turnEnd        struct{ r *Remote }
	abort          struct{ r *Remote }
)

var (
	_ hook.MessageSendHook    = messageSend{}
	_ hook.BeforeToolCallHook = beforeToolCall{}
	_ hook.AfterToolCallHook  = afterToolCall{}
	_ hook.TurnEndHook        = turnEnd{}
	_ hook.AbortHook          = abort{}
)

func (h messageSend) Call(ctx context.Context, in *hook.MessageSendInput) (hook.MessageSendResult, error) {
	req := h.r.newRequest(in.Turn)
	req.Event = events.HookOnMessageSend
	req.Messages = in.Messages
	resp, err := h.r.Request(ctx, req)
	if err != nil {
		return hook.MessageSendResult{}, err
	}
	act, err := hook.ParseMessageSendAction(resp.Result)
	if err != nil {
		return hook.MessageSendResult{}, fmt.Errorf("%w: %w", ErrInvalidReply, err)
	}
	if resp.Messages != nil {
		in.Messages = resp.Messages
	}
	applyCommon(in.Turn, resp)
	return hook.MessageSendResult{Action: act, Reason: resp.Reason}, nil
}

func (h beforeToolCall) Call(ctx context.Context, in *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
	req := h.r.newRequest(in.Turn)
	req.Event = events.HookBeforeToolCall
	call := in.Call
	req.ToolCall = &call
	req.Tool = toolDef(in.Tool)
	resp, err := h.r.Request(ctx, req)
	if err != nil {
		return hook.BeforeToolCallResult{}, err
	}
	act, err := hook.ParseBeforeToolCallAction(resp.Result)
	if err != nil {
		return hook.BeforeToolCallResult{}, fmt.Errorf("%w: %w", ErrInvalidReply, err)
	}
	if c := resp.ToolCall; c != nil {
		if c.ID != in.Call.ID {
			return hook.BeforeToolCallResult{}, fmt.Errorf("%w: tool_call.id %q is not the call's id %q", ErrInvalidReply, c.ID, in.Call.ID)
		}
		in.Call = *c
	}
	applyCommon(in.Turn, resp)
	return hook.BeforeToolCallResult{Action: act, Reason: resp.Reason}, nil
}

func (h afterToolCall) Call(ctx context.Context, in *hook.ToolResultInput) (hook.AfterToolCallResult, error) {
	req := h.r.newRequest(in.Turn)
	req.Event = events.HookAfterToolCall
	call, res := in.Call, in.Result
	req.ToolCall, req.ToolResult = &call, &res
	req.Tool = toolDef(in.Tool)
	resp, err := h.r.Request(ctx, req)
	if err != nil {
		return hook.AfterToolCallResult{}, err
	}
	act, err := hook.ParseAfterToolCallAction(resp.Result)
	if err != nil {
		return hook.AfterToolCallResult{}, fmt.Errorf("%w: %w", ErrInvalidReply, err)
	}
	if tr := resp.ToolResult; tr != nil {
		if tr.ToolUseID != in.Result.ToolUseID {
			return hook.AfterToolCallResult{}, fmt.Errorf("%w: tool_result.tool_use_id %q is not the result's %q", ErrInvalidReply, tr.ToolUseID, in.Result.ToolUseID)
		}
		in.Result = *tr
	}
	applyCommon(in.Turn, resp)
	return hook.AfterToolCallResult{Action: act, Reason: resp.Reason}, nil
}

func (h turnEnd) Call(ctx context.Context, in *hook.TurnEndInput) (hook.TurnEndResult, error) {
	req := h.r.newRequest(in.Turn)
	req.Event = events.HookOnTurnEnd
	req.Messages = in.Messages
	resp, err := h.r.Request(ctx, req)
	if err != nil {
		return hook.TurnEndResult{}, err
	}
	act, err := hook.ParseTurnEndAction(resp.Result)
	if err != nil {
		return hook.TurnEndResult{}, fmt.Errorf("%w: %w", ErrInvalidReply, err)
	}
	out := hook.TurnEndResult{Action: act, Reason: resp.Reason}
	if act == hook.TurnContinueWithMessages {
		out.Messages = resp.Messages
	}
	applyCommon(in.Turn, resp)
	return out, nil
}

func (h abort) Call(ctx context.Context, in *hook.AbortInput) (hook.AbortResult, error) {
	req := h.r.newRequest(in.Turn)
	req.Event = events.HookOnAbort
	req.Messages, req.Reason = in.Messages, in.Reason
	resp, err := h.r.Request(ctx, req)
	if err != nil {
		return hook.AbortResult{}, err
	}
	applyCommon(in.Turn, resp)
	return hook.AbortResult{}, nil
}
