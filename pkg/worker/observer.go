package worker

import (
	"sync"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// Event is one worker event of a turn, exactly as a turn service
// publishes it on P.events.<session>.<turn>.<Channel()> with CloudEvent
// type Type() and Data as the JSON body. Data's Go type says which event
// it is (see events.WorkerEvent for the table).
type Event struct {
	TurnID    string
	SessionID string
	Data      events.WorkerEvent
}

// Type is the CloudEvent type of the event.
func (e Event) Type() string { return e.Data.WorkerType() }

// Channel is the last token of the event's subject.
func (e Event) Channel() events.Channel { return e.Data.Channel() }

// Observer receives every worker event of a turn.
//
// Ordering and goroutines: the worker calls Observe for one turn from one
// goroutine at a time, never concurrently, in the order the events happen
// (calls are serialised by a mutex, because hook decisions may be reported
// from a hook's goroutine). Most events come from the goroutine that called
// Run; tool.started is sent just before a tool's goroutine starts and
// tool.result after its after_tool_call hooks, in call order, on the Run
// goroutine too. Observe must not block for long: it delays the turn.
// Observers shared by concurrent turns must be safe for concurrent use.
type Observer interface {
	Observe(ev Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ev Event)

// Observe calls f.
func (f ObserverFunc) Observe(ev Event) { f(ev) }

var _ Observer = ObserverFunc(nil)

// emitter sends the events of one run to the observers, serialised.
type emitter struct {
	mu        sync.Mutex
	turnID    string
	sessionID string
	obs       []Observer
}

// observed reports whether any observer gets events, so that callers can
// spare building one nobody reads.
func (e *emitter) observed() bool { return len(e.obs) > 0 }

func (e *emitter) emit(data events.WorkerEvent) {
	if len(e.obs) == 0 {
		return
	}
	ev := Event{TurnID: e.turnID, SessionID: e.sessionID, Data: data}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, o := range e.obs {
		o.Observe(ev)
	}
}

// hookObserver forwards what hooks decide and emit as worker events.
type hookObserver struct{ e *emitter }

var _ hook.Observer = hookObserver{}

func (h hookObserver) HookDecision(d events.HookDecision) {
	h.e.emit(d)
}

func (h hookObserver) HookMessage(m events.HookMessage) {
	h.e.emit(m)
}
