package hook

import (
	"maps"
	"sync"

	"github.com/llmworker/llmworker/pkg/events"
)

// Variables is the per-turn map shared by the hooks of a turn (docs/architecture.md#hooks
// HookContext.variables): what one hook sets, the hooks after it — at this
// and at later hook points of the same turn — read.
type Variables map[string]string

// Get returns the value of key ("" if unset); safe on a nil map.
func (v Variables) Get(key string) string { return v[key] }

// Clone returns a copy (never nil).
func (v Variables) Clone() Variables {
	c := make(Variables, len(v))
	maps.Copy(c, v)
	return c
}

// Turn is what the hooks of one turn share. The worker creates one per
// turn and passes it in every input; the chain hands each hook a view of it
// whose Vars are the hook's own copy (committed when the hook answers) and
// whose Emit names the hook.
type Turn struct {
	ID        string
	SessionID string
	// Step is the current step (LLM request) of the turn, from 1.
	Step int
	// Vars are the turn's variables; the chain creates the map when nil.
	Vars Variables
	// Observer receives decisions and emitted messages; may be nil.
	Observer Observer

	// call is set on the views the chain gives to hooks.
	call *callScope
}

// callScope ties a Turn view to one hook call, so that messages emitted by
// a hook are attributed to it and dropped once the call is over (a hook
// abandoned at its timeout must not talk to the UI after its decision).
type callScope struct {
	mu     sync.Mutex
	hook   string
	event  events.HookEvent
	closed bool
}

// Emit sends messages to the UI as llmw.hook.message (they are not added
// to the transcript). Inside a hook the message names the hook and its
// hook point; after the hook's call ended (answered or abandoned) Emit
// does nothing. Safe on a nil Turn and with a nil Observer.
func (t *Turn) Emit(msgs ...events.Message) {
	if t == nil || t.Observer == nil || len(msgs) == 0 {
		return
	}
	m := events.HookMessage{Messages: msgs}
	if s := t.call; s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return
		}
		m.Hook, m.Event = s.hook, s.event
	}
	t.Observer.HookMessage(m)
}

// Hook returns the name of the hook this view was given to ("" on a Turn
// the chain did not create), e.g. for a remote hook's request.
func (t *Turn) Hook() string {
	if t == nil || t.call == nil {
		return ""
	}
	return t.call.hook
}

// Event returns the hook point of the call this view was given to.
func (t *Turn) Event() events.HookEvent {
	if t == nil || t.call == nil {
		return ""
	}
	return t.call.event
}

// view returns the Turn a hook gets: same identity and observer, own Vars.
func (t *Turn) view(name string, ev events.HookEvent) *Turn {
	v := &Turn{call: &callScope{hook: name, event: ev}}
	if t != nil {
		v.ID, v.SessionID, v.Step, v.Observer = t.ID, t.SessionID, t.Step, t.Observer
		v.Vars = t.Vars.Clone()
	} else {
		v.Vars = Variables{}
	}
	return v
}

// end closes the view's call: later Emits are dropped. It waits for an
// Emit in progress, so the Observer is never called concurrently.
func (t *Turn) end() {
	t.call.mu.Lock()
	t.call.closed = true
	t.call.mu.Unlock()
}

// commitVars makes the hook's variables the turn's.
func (t *Turn) commitVars(v Variables) {
	if t == nil {
		return
	}
	if t.Vars == nil {
		t.Vars = make(Variables, len(v))
	}
	clear(t.Vars)
	maps.Copy(t.Vars, v)
}
