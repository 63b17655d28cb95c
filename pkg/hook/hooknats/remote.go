package hooknats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/fence"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/telemetry"
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
// ValidateFor(req.Event). ctx's fence (pkg/fence) is checked first: its
// error is returned and nothing sent. Errors match ErrNoResponders,
// ErrInvalidReply, ErrResponder, the fence's error, or the context's error
// (the hook's timeout).
func (r *Remote) Request(ctx context.Context, req *events.HookRequest) (*events.HookResponse, error) {
	if req.Hook == "" {
		req.Hook = r.reg.Name
	}
	// A replica that lost the turn must not ask its hooks
	// (docs/architecture.md#fencing).
	if err := fence.Check(ctx); err != nil {
		return nil, fmt.Errorf("hooknats: %s request to %q not sent: %w", req.Event, r.reg.Name, err)
	}
	env, err := events.NewEnvelope(r.source, events.TypeHookRequest, req)
	if err != nil {
		return nil, err
	}
	env.Subject, env.TurnID, env.SessionID = req.TurnID, req.TurnID, req.SessionID
	telemetry.Inject(ctx, env)
	msg := cenats.NewMsg(r.reg.Subject, env)
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
// validated for hook point ev. Binary-mode headers of type
// llmw.hook.request are the request's own, echoed by clients that copy a
// request's headers into the reply (nats-py's Msg.respond): they are
// ignored and the body is read as it stands. Errors match ErrResponder or
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
	if echoesRequest(h) {
		h = nil // the request's headers, echoed: the body is the reply
	}
	env, err := events.DecodeEnvelope(h, body)
	switch {
	case errors.Is(err, events.ErrNotCloudEvent):
		// A bare JSON response (docs/protocol.md §7 lets any client answer so).
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalidReply, err)
	case env.Type != events.TypeHookResponse:
		return nil, fmt.Errorf("%w: the reply is a CloudEvent of type %q: send ce-type %q, or no ce- headers and the bare JSON response",
			ErrInvalidReply, env.Type, events.TypeHookResponse)
	default:
		data = env.Data
	}
	return DecodeBody(data, ev)
}

// DecodeBody reads the JSON of a hook reply (the data of a
// llmw.hook.response, or the bare response object) and checks it for hook
// point ev. It must be a JSON object with a "result" member (the schema
// requires it; "" is continue, finish at on_turn_end): an empty body, null
// and an object without "result" are no reply, and so hook failures under
// the hook's failure policy, over NATS and over HTTP alike. Errors match
// ErrInvalidReply (and events.ErrInvalid where a field is to blame).
func DecodeBody(data []byte, ev events.HookEvent) (*events.HookResponse, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty reply: send a JSON hook response such as {\"result\":\"continue\"}", ErrInvalidReply)
	}
	if data[0] != '{' {
		return nil, fmt.Errorf("%w: the reply is not a JSON object: send a JSON hook response such as {\"result\":\"continue\"}", ErrInvalidReply)
	}
	resp, err := events.Decode[events.HookResponse](data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidReply, err)
	}
	var has struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &has); err != nil || has.Result == nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidReply, &events.FieldError{Field: "result", Problem: "is required"})
	}
	if err := resp.ValidateFor(ev); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidReply, err)
	}
	return &resp, nil
}

// echoesRequest reports whether h carries ce-type llmw.hook.request, in any
// capitalisation of the header name.
func echoesRequest(h map[string][]string) bool {
	for k, v := range h {
		if strings.EqualFold(k, events.HeaderType) && len(v) > 0 && v[0] == events.TypeHookRequest {
			return true
		}
	}
	return false
}

// MessageSend returns the hook as an on_message_send hook: a reply's
// messages (when present) replace the context sent to the model.
func (r *Remote) MessageSend() hook.MessageSendHook {
	return remoteHook[hook.MessageSendInput, hook.MessageSendResult]{r, sendPoint}
}

// BeforeToolCall returns the hook as a before_tool_call hook: a reply's
// tool_call (when present, with the same id) replaces the call.
func (r *Remote) BeforeToolCall() hook.BeforeToolCallHook {
	return remoteHook[hook.ToolCallInput, hook.BeforeToolCallResult]{r, beforePoint}
}

// AfterToolCall returns the hook as an after_tool_call hook: a reply's
// tool_result (when present, with the same tool_use_id) replaces the
// result. The request carries the call (read-only) beside the result.
func (r *Remote) AfterToolCall() hook.AfterToolCallHook {
	return remoteHook[hook.ToolResultInput, hook.AfterToolCallResult]{r, afterPoint}
}

// TurnEnd returns the hook as an on_turn_end hook: with
// continue_with_messages the reply's messages are the result's Messages
// (appended by the worker before it asks the model again).
func (r *Remote) TurnEnd() hook.TurnEndHook {
	return remoteHook[hook.TurnEndInput, hook.TurnEndResult]{r, endPoint}
}

// Abort returns the hook as an on_abort hook (a notification: only the
// variables and emit of the reply are used).
func (r *Remote) Abort() hook.AbortHook {
	return remoteHook[hook.AbortInput, hook.AbortResult]{r, abortPoint}
}

// remoteHook is a Remote as the hook of one hook point: the request is the
// turn's fields plus what the point's wire mapping sends; the reply is
// applied through the same mapping (codec.go).
type remoteHook[In, Out any] struct {
	r *Remote
	p *point[In, Out]
}

var (
	_ hook.MessageSendHook    = remoteHook[hook.MessageSendInput, hook.MessageSendResult]{}
	_ hook.BeforeToolCallHook = remoteHook[hook.ToolCallInput, hook.BeforeToolCallResult]{}
	_ hook.AfterToolCallHook  = remoteHook[hook.ToolResultInput, hook.AfterToolCallResult]{}
	_ hook.TurnEndHook        = remoteHook[hook.TurnEndInput, hook.TurnEndResult]{}
	_ hook.AbortHook          = remoteHook[hook.AbortInput, hook.AbortResult]{}
)

func (h remoteHook[In, Out]) Call(ctx context.Context, in *In) (Out, error) {
	req := &events.HookRequest{Event: h.p.event, Hook: h.r.reg.Name}
	turnToRequest(h.p.turn(in), req)
	h.p.request(in, req)
	var zero Out
	resp, err := h.r.Request(ctx, req)
	if err != nil {
		return zero, err
	}
	out, err := h.p.apply(in, resp)
	if err != nil {
		return zero, fmt.Errorf("%w: %w", ErrInvalidReply, err)
	}
	applyCommon(h.p.turn(in), resp)
	return out, nil
}
