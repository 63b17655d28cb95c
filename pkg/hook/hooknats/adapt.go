package hooknats

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// Adapt returns the Handler that serves an in-process hook on the wire, and
// the hook point it serves. h is a hook.MessageSendHook,
// BeforeToolCallHook, AfterToolCallHook, TurnEndHook or AbortHook (a
// built-in of hook/builtin, a hook.Func, your own type).
//
// Each request becomes the hook point's input through the same mapping
// Remote uses in the other direction (codec.go): a hook.Turn with the
// request's ids, step and variables, whose Emit collects messages for the
// reply. The hook runs under the request's context, and its result plus
// what it changed (messages, call, result, variables) become the reply. A
// result that says nothing new (go on, no reason, no change) is a nil
// reply, which the turn reads as continue.
func Adapt(h any) (Handler, events.HookEvent, error) {
	switch h := h.(type) {
	case hook.MessageSendHook:
		return adapt(sendPoint, h), sendPoint.event, nil
	case hook.BeforeToolCallHook:
		return adapt(beforePoint, h), beforePoint.event, nil
	case hook.AfterToolCallHook:
		return adapt(afterPoint, h), afterPoint.event, nil
	case hook.TurnEndHook:
		return adapt(endPoint, h), endPoint.event, nil
	case hook.AbortHook:
		return adapt(abortPoint, h), abortPoint.event, nil
	}
	return nil, "", fmt.Errorf("%w: %T is not a hook of any hook point", ErrInvalidHook, h)
}

// ServeHook is Adapt plus a registration: the Hook to serve (Serve,
// Server.Handle) for h under reg, whose Event is set from h's hook point.
func ServeHook(reg events.HookRegistration, h any) (Hook, error) {
	handler, ev, err := Adapt(h)
	if err != nil {
		return Hook{}, err
	}
	if reg.Event != "" && reg.Event != ev {
		return Hook{}, fmt.Errorf("%w: %s: the hook runs at %s, the registration says %s", ErrInvalidHook, reg.Name, ev, reg.Event)
	}
	reg.Event = ev
	return Hook{Registration: reg, Handler: handler}, nil
}

func adapt[In, Out any](p *point[In, Out], h hook.Hook[In, Out]) Handler {
	return HandlerFunc(func(ctx context.Context, req *events.HookRequest) (*events.HookResponse, error) {
		var (
			mu   sync.Mutex
			emit []events.Message
		)
		t := &hook.Turn{ID: req.TurnID, SessionID: req.SessionID, Step: req.Step,
			Vars: hook.Variables(maps.Clone(req.Variables)),
			Observer: hook.ObserverFuncs{Message: func(m events.HookMessage) {
				mu.Lock()
				emit = append(emit, m.Messages...)
				mu.Unlock()
			}}}
		in := p.input(req, t)
		out, err := h.Call(ctx, in)
		if err != nil {
			return nil, err
		}
		kind, reason := p.result(out)
		mu.Lock()
		resp := &events.HookResponse{Result: kind, Reason: reason, Emit: emit}
		mu.Unlock()
		p.reply(req, in, out, resp)
		if vt := p.turn(in); vt != nil {
			resp.Variables = changed(req.Variables, vt.Vars)
		}
		if resp.Reason == "" && resp.Messages == nil && resp.ToolCall == nil && resp.ToolResult == nil &&
			len(resp.Variables) == 0 && len(resp.Emit) == 0 && kind == goOn(p.event) {
			return nil, nil
		}
		return resp, nil
	})
}

// goOn is the result that lets the chain go on at ev.
func goOn(ev events.HookEvent) events.HookResultKind {
	if ev == events.HookOnTurnEnd {
		return events.HookFinish
	}
	return events.HookContinue
}

// changed returns the variables of after that are new or differ from
// before (the wire merges variables; deleting one is not expressible).
func changed(before map[string]string, after hook.Variables) map[string]string {
	var out map[string]string
	for k, v := range after {
		if old, ok := before[k]; !ok || old != v {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
