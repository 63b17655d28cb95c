package worker

import (
	"sync"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/timeline"
)

// Subscriber receives every kind of worker event in one value: the
// WorkerSubscriber of docs/architecture.md#the-turn-loop. TS and US are its scope types for
// text blocks and tool_use blocks: the worker gives it a fresh zero TS (US)
// when a block starts and drops it when the block stops or is aborted.
//
// Embed NopSubscriber[TS, US] to implement only the methods you need. A
// subscriber that also implements ThinkingSubscriber[TS] gets thinking
// blocks, with the text scope type.
//
// The worker serialises the calls of one subscriber with a mutex, so a
// subscriber needs no locking of its own even when the Worker runs turns
// concurrently.
type Subscriber[TS, US any] interface {
	// OnTextBlock gets the phases of text blocks (and tool_result blocks of
	// provider-run tools: see BlockType).
	OnTextBlock(scope *TS, ev timeline.TextBlockEvent)
	// OnToolUseBlock gets the phases of tool_use blocks.
	OnToolUseBlock(scope *US, ev timeline.ToolUseBlockEvent)
	OnUsage(ev events.UsageEvent)
	OnStatus(ev events.StatusEvent)
	OnError(ev events.ErrorEvent)
	// OnTextComplete gets the whole text of a text block after its stop.
	OnTextComplete(c events.TextComplete)
	// OnToolCallComplete gets a local tool call with its whole input after
	// its block stopped.
	OnToolCallComplete(c events.ToolCallComplete)
	// OnTurnStart and OnTurnEnd bracket each model call (step, from 1).
	OnTurnStart(step int)
	OnTurnEnd(step int)
}

// ThinkingSubscriber is implemented by subscribers that want thinking
// blocks; the scope type is the subscriber's text scope type.
type ThinkingSubscriber[TS any] interface {
	OnThinkingBlock(scope *TS, ev timeline.ThinkingBlockEvent)
}

// NopSubscriber implements Subscriber with methods that do nothing; embed
// it and override what you need.
type NopSubscriber[TS, US any] struct{}

var _ Subscriber[struct{}, struct{}] = NopSubscriber[struct{}, struct{}]{}

func (NopSubscriber[TS, US]) OnTextBlock(*TS, timeline.TextBlockEvent)       {}
func (NopSubscriber[TS, US]) OnToolUseBlock(*US, timeline.ToolUseBlockEvent) {}
func (NopSubscriber[TS, US]) OnUsage(events.UsageEvent)                      {}
func (NopSubscriber[TS, US]) OnStatus(events.StatusEvent)                    {}
func (NopSubscriber[TS, US]) OnError(events.ErrorEvent)                      {}
func (NopSubscriber[TS, US]) OnTextComplete(events.TextComplete)             {}
func (NopSubscriber[TS, US]) OnToolCallComplete(events.ToolCallComplete)     {}
func (NopSubscriber[TS, US]) OnTurnStart(int)                                {}
func (NopSubscriber[TS, US]) OnTurnEnd(int)                                  {}

// Subscribe registers every method of s, as docs/architecture.md#the-turn-loop's
// worker.subscribe: the block methods become Timeline handlers with s's
// scope types, the others worker event handlers.
func Subscribe[TS, US any](w *Worker, s Subscriber[TS, US]) {
	if s == nil {
		return
	}
	var mu sync.Mutex
	locked := func(f func()) {
		mu.Lock()
		defer mu.Unlock()
		f()
	}
	OnTextBlock(w, timeline.HandlerFunc[timeline.TextBlockEvent, TS](func(sc *TS, ev timeline.TextBlockEvent) {
		locked(func() { s.OnTextBlock(sc, ev) })
	}))
	if ts, ok := s.(ThinkingSubscriber[TS]); ok {
		OnThinkingBlock(w, timeline.HandlerFunc[timeline.ThinkingBlockEvent, TS](func(sc *TS, ev timeline.ThinkingBlockEvent) {
			locked(func() { ts.OnThinkingBlock(sc, ev) })
		}))
	}
	OnToolUseBlock(w, timeline.HandlerFunc[timeline.ToolUseBlockEvent, US](func(sc *US, ev timeline.ToolUseBlockEvent) {
		locked(func() { s.OnToolUseBlock(sc, ev) })
	}))
	w.OnUsage(func(ev events.UsageEvent) { locked(func() { s.OnUsage(ev) }) })
	w.OnStatus(func(ev events.StatusEvent) { locked(func() { s.OnStatus(ev) }) })
	w.OnError(func(ev events.ErrorEvent) { locked(func() { s.OnError(ev) }) })
	w.OnTextComplete(func(c events.TextComplete) { locked(func() { s.OnTextComplete(c) }) })
	w.OnToolCallComplete(func(c events.ToolCallComplete) { locked(func() { s.OnToolCallComplete(c) }) })
	w.OnTurnStart(func(step int) { locked(func() { s.OnTurnStart(step) }) })
	w.OnTurnEnd(func(step int) { locked(func() { s.OnTurnEnd(step) }) })
}
