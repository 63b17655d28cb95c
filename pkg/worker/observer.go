package worker

import (
	"sync"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// Event is one worker event of DESIGN.md §5, exactly as a turn service
// publishes it on P.events.<session>.<turn>.<Channel> with CloudEvent type
// Type and Data as the JSON body.
//
// Type, Channel and the Go type of Data, one to one:
//
//	llmw.turn.started      turn      events.TurnStarted
//	llmw.turn.step         turn      events.TurnStep
//	llmw.turn.paused       turn      events.TurnPaused
//	llmw.turn.resumed      turn      events.TurnResumed
//	llmw.turn.completed    turn      events.TurnCompleted
//	llmw.turn.failed       turn      events.TurnEnded
//	llmw.turn.aborted      turn      events.TurnEnded
//	llmw.block.start       text|thinking|tool  events.WorkerBlockStart
//	llmw.block.delta       text|thinking|tool  events.WorkerBlockDelta
//	llmw.block.stop        text|thinking|tool  events.WorkerBlockStop
//	llmw.block.abort       text|thinking|tool  events.WorkerBlockAbort
//	llmw.text.complete     text      events.TextComplete
//	llmw.toolcall.complete tool      events.ToolCallComplete
//	llmw.tool.started      tool      events.ToolStarted
//	llmw.tool.result       tool      events.ToolCallResult
//	llmw.tool.skipped      tool      events.ToolSkipped
//	llmw.hook.decision     hook      events.HookDecision
//	llmw.hook.message      hook      events.HookMessage
//	llmw.usage             usage     events.UsageReport
//
// Block events go to the channel of their block type (events.BlockChannel:
// tool_result blocks of provider-run tools travel with text).
type Event struct {
	TurnID    string
	SessionID string
	Type      string
	Channel   events.Channel
	Data      any
}

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

func (e *emitter) emit(typ string, ch events.Channel, data any) {
	if len(e.obs) == 0 {
		return
	}
	ev := Event{TurnID: e.turnID, SessionID: e.sessionID, Type: typ, Channel: ch, Data: data}
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
	h.e.emit(events.TypeHookDecision, events.ChannelHook, d)
}

func (h hookObserver) HookMessage(m events.HookMessage) {
	h.e.emit(events.TypeHookMessage, events.ChannelHook, m)
}
