package timeline

import (
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
)

// Timeline turns a flat stream of provider events into calls of typed
// handlers: meta events go at once to the handlers of their kind, block
// events become per-block lifecycles with a scope per handler.
//
// The zero Timeline is ready to use. A Timeline is not safe for concurrent
// use (it is driven by the one goroutine that reads the stream); handlers must
// not call Dispatch or AbortCurrentBlock of the Timeline that calls them.
type Timeline struct {
	usage  []metaHandler[events.UsageEvent]
	ping   []metaHandler[events.PingEvent]
	status []metaHandler[events.StatusEvent]
	errs   []metaHandler[events.ErrorEvent]

	text     []blockHandler[TextBlockEvent]
	thinking []blockHandler[ThinkingBlockEvent]
	toolUse  []blockHandler[ToolUseBlockEvent]

	// open holds the blocks that started and did not stop yet, in start
	// order. docs/architecture.md#the-timeline assumes one block at a time; providers that
	// interleave blocks by index are handled too, at the cost of a short
	// linear search (almost always of length one).
	open []openBlock
	// spare holds the scope slices of ended blocks (all nil) for the next
	// blocks: one allocation less per block.
	spare [][]any
}

// maxSpare bounds Timeline.spare: blocks open at the same time are few.
const maxSpare = 8

// New returns an empty Timeline.
func New() *Timeline { return &Timeline{} }

type metaHandler[E any] interface{ dispatch(E) }

// metaWrapper holds the one scope of a meta handler: it is started at
// registration and never dropped (docs/architecture.md#the-timeline).
type metaWrapper[E, S any] struct {
	h     Handler[E, S]
	scope *S
}

func (w *metaWrapper[E, S]) dispatch(e E) { w.h.OnEvent(w.scope, e) }

type blockHandler[E any] interface {
	newScope() any
	dispatch(scope any, e E)
}

type blockWrapper[E, S any] struct{ h Handler[E, S] }

func (w *blockWrapper[E, S]) newScope() any { return new(S) }

func (w *blockWrapper[E, S]) dispatch(scope any, e E) { w.h.OnEvent(scope.(*S), e) }

type openBlock struct {
	index     int
	typ       events.BlockType
	id, name  string
	toolUseID string
	server    bool
	// scopes[i] is the scope of the i-th handler of the block's kind, nil
	// (or missing, for handlers registered after the block started) until
	// the handler's scope is started.
	scopes []any
}

// On registers h for the events of kind k. Handlers of a kind are called in
// registration order. It panics if k is not one of the package's kinds or h
// is nil: both are programming errors.
func On[E, S any](t *Timeline, k Kind[E], h Handler[E, S]) {
	if h == nil {
		panic("timeline: On with a nil handler")
	}
	// The type assertions below cannot fail: each kind's id fixes E.
	switch k.id {
	case kindUsage:
		t.usage = append(t.usage, any(&metaWrapper[E, S]{h, new(S)}).(metaHandler[events.UsageEvent]))
	case kindPing:
		t.ping = append(t.ping, any(&metaWrapper[E, S]{h, new(S)}).(metaHandler[events.PingEvent]))
	case kindStatus:
		t.status = append(t.status, any(&metaWrapper[E, S]{h, new(S)}).(metaHandler[events.StatusEvent]))
	case kindError:
		t.errs = append(t.errs, any(&metaWrapper[E, S]{h, new(S)}).(metaHandler[events.ErrorEvent]))
	case kindText:
		t.text = append(t.text, any(&blockWrapper[E, S]{h}).(blockHandler[TextBlockEvent]))
	case kindThinking:
		t.thinking = append(t.thinking, any(&blockWrapper[E, S]{h}).(blockHandler[ThinkingBlockEvent]))
	case kindToolUse:
		t.toolUse = append(t.toolUse, any(&blockWrapper[E, S]{h}).(blockHandler[ToolUseBlockEvent]))
	default:
		panic(fmt.Sprintf("timeline: On with the zero Kind[%T]; use timeline.Usage, timeline.TextBlock, ...", *new(E)))
	}
}

// OnFunc registers f for the events of kind k; S is inferred from f, so a
// method value registers a handler with its scope type:
//
//	timeline.OnFunc(tl, timeline.TextBlock, c.OnEvent)
func OnFunc[E, S any](t *Timeline, k Kind[E], f func(scope *S, event E)) {
	if f == nil {
		panic("timeline: OnFunc with a nil func")
	}
	On(t, k, HandlerFunc[E, S](f))
}

// Dispatch hands one provider event to the handlers. Meta events go to the
// handlers of their kind at once. Block events drive block lifecycles:
//
//   - BlockStart opens a block and gives every handler of its kind a fresh
//     scope, then a PhaseStart event. A start for an index that is still open
//     first aborts the open block (reason "block restarted").
//   - BlockDelta goes to the open block of its index. With no open block the
//     block starts implicitly (streams that send no starts): its type comes
//     from the delta (text, thinking, input_json → tool_use) and handlers get
//     fresh scopes but no PhaseStart. A delta whose kind does not fit the
//     block's type is ignored.
//   - BlockStop and BlockAbort go to the handlers that hold a scope for the
//     block; the scopes are dropped afterwards. For an index that is not open
//     they are ignored.
//
// tool_result blocks are routed to text handlers.
func (t *Timeline) Dispatch(ev events.Event) {
	switch e := ev.(type) {
	case events.BlockDelta:
		t.delta(e)
	case events.UsageEvent:
		for _, h := range t.usage {
			h.dispatch(e)
		}
	case events.PingEvent:
		for _, h := range t.ping {
			h.dispatch(e)
		}
	case events.StatusEvent:
		for _, h := range t.status {
			h.dispatch(e)
		}
	case events.ErrorEvent:
		for _, h := range t.errs {
			h.dispatch(e)
		}
	case events.BlockStart:
		t.start(e)
	case events.BlockStop:
		if i := t.find(e.Index); i >= 0 {
			t.end(i, PhaseStop, e.StopReason, e.Signature, "")
		}
	case events.BlockAbort:
		if i := t.find(e.Index); i >= 0 {
			t.end(i, PhaseAbort, "", "", e.Reason)
		}
	}
}

// AbortCurrentBlock aborts every open block, in the order they started: the
// handlers holding a scope get a PhaseAbort event with reason, then the
// scopes are dropped. Call it when a stream is cancelled or fails, so that no
// handler keeps a half-finished block.
func (t *Timeline) AbortCurrentBlock(reason string) {
	for len(t.open) > 0 {
		t.end(0, PhaseAbort, "", "", reason)
	}
}

// OpenBlocks returns the indexes of the blocks that started and did not end,
// in start order.
func (t *Timeline) OpenBlocks() []int {
	out := make([]int, len(t.open))
	for i := range t.open {
		out[i] = t.open[i].index
	}
	return out
}

func (t *Timeline) find(index int) int {
	for i := range t.open {
		if t.open[i].index == index {
			return i
		}
	}
	return -1
}

func (t *Timeline) handlerCount(typ events.BlockType) int {
	switch typ {
	case events.BlockText, events.BlockToolResult:
		return len(t.text)
	case events.BlockThinking:
		return len(t.thinking)
	case events.BlockToolUse:
		return len(t.toolUse)
	}
	return 0
}

func (t *Timeline) start(e events.BlockStart) {
	if !e.BlockType.Valid() {
		return
	}
	if i := t.find(e.Index); i >= 0 {
		t.end(i, PhaseAbort, "", "", "block restarted")
	}
	b := t.push(e.Index, e.BlockType)
	b.id, b.name, b.server, b.toolUseID = e.ID, e.Name, e.Server, e.ToolUseID
	switch b.typ {
	case events.BlockText, events.BlockToolResult:
		startAll(t.text, b, b.textEvent(PhaseStart))
	case events.BlockThinking:
		startAll(t.thinking, b, b.thinkingEvent(PhaseStart))
	case events.BlockToolUse:
		startAll(t.toolUse, b, b.toolEvent(PhaseStart))
	}
}

// push opens a block with a fresh scope for every handler of its kind and
// returns it. The pointer is valid until the next change of t.open.
func (t *Timeline) push(index int, typ events.BlockType) *openBlock {
	b := openBlock{index: index, typ: typ}
	n := t.handlerCount(typ)
	if n > 0 {
		if k := len(t.spare); k > 0 && cap(t.spare[k-1]) >= n {
			b.scopes = t.spare[k-1][:n]
			t.spare = t.spare[:k-1]
		} else {
			b.scopes = make([]any, n)
		}
		switch typ {
		case events.BlockText, events.BlockToolResult:
			newScopes(t.text, b.scopes)
		case events.BlockThinking:
			newScopes(t.thinking, b.scopes)
		case events.BlockToolUse:
			newScopes(t.toolUse, b.scopes)
		}
	}
	t.open = append(t.open, b)
	return &t.open[len(t.open)-1]
}

func newScopes[E any](hs []blockHandler[E], scopes []any) {
	for i, h := range hs {
		scopes[i] = h.newScope()
	}
}

func startAll[E any](hs []blockHandler[E], b *openBlock, ev E) {
	for i, h := range hs {
		h.dispatch(b.scopes[i], ev)
	}
}

func (t *Timeline) delta(d events.BlockDelta) {
	i := t.find(d.Index)
	if i < 0 {
		var typ events.BlockType
		switch d.Kind {
		case events.DeltaText:
			typ = events.BlockText
		case events.DeltaThinking:
			typ = events.BlockThinking
		case events.DeltaInputJSON:
			typ = events.BlockToolUse
		default:
			return
		}
		t.push(d.Index, typ)
		i = len(t.open) - 1
	}
	b := &t.open[i]
	switch {
	case d.Kind == events.DeltaText && (b.typ == events.BlockText || b.typ == events.BlockToolResult):
		ev := b.textEvent(PhaseDelta)
		ev.Text = d.Content
		deltaAll(t.text, b, ev)
	case d.Kind == events.DeltaThinking && b.typ == events.BlockThinking:
		ev := b.thinkingEvent(PhaseDelta)
		ev.Thinking = d.Content
		deltaAll(t.thinking, b, ev)
	case d.Kind == events.DeltaInputJSON && b.typ == events.BlockToolUse:
		ev := b.toolEvent(PhaseDelta)
		ev.InputJSON = d.Content
		deltaAll(t.toolUse, b, ev)
	}
}

// deltaAll dispatches a delta, starting the scope of a handler that has none
// (one registered after the block started): the implicit scope start of
// docs/architecture.md#the-timeline.
func deltaAll[E any](hs []blockHandler[E], b *openBlock, ev E) {
	for i, h := range hs {
		if i >= len(b.scopes) {
			b.scopes = append(b.scopes, nil)
		}
		if b.scopes[i] == nil {
			b.scopes[i] = h.newScope()
		}
		h.dispatch(b.scopes[i], ev)
	}
}

// end sends a stop or abort for t.open[i] to the handlers that hold a scope
// for it and drops the block with its scopes.
func (t *Timeline) end(i int, ph Phase, reason events.StopReason, sig, why string) {
	b := &t.open[i]
	switch b.typ {
	case events.BlockText, events.BlockToolResult:
		ev := b.textEvent(ph)
		ev.StopReason, ev.Signature, ev.Reason = reason, sig, why
		endAll(t.text, b, ev)
	case events.BlockThinking:
		ev := b.thinkingEvent(ph)
		ev.Signature, ev.Reason = sig, why
		endAll(t.thinking, b, ev)
	case events.BlockToolUse:
		ev := b.toolEvent(ph)
		ev.StopReason, ev.Signature, ev.Reason = reason, sig, why
		endAll(t.toolUse, b, ev)
	}
	// Handlers cannot change t.open (re-entrant Dispatch is not supported),
	// so i is still the block's position. endAll dropped every scope.
	if b.scopes != nil && len(t.spare) < maxSpare {
		t.spare = append(t.spare, b.scopes[:0])
	}
	copy(t.open[i:], t.open[i+1:])
	t.open[len(t.open)-1] = openBlock{} // let the scopes be collected
	t.open = t.open[:len(t.open)-1]
}

func endAll[E any](hs []blockHandler[E], b *openBlock, ev E) {
	for i, h := range hs {
		if i < len(b.scopes) && b.scopes[i] != nil {
			h.dispatch(b.scopes[i], ev)
			b.scopes[i] = nil
		}
	}
}

func (b *openBlock) textEvent(ph Phase) TextBlockEvent {
	return TextBlockEvent{Phase: ph, Index: b.index, BlockType: b.typ, ToolUseID: b.toolUseID}
}

func (b *openBlock) thinkingEvent(ph Phase) ThinkingBlockEvent {
	return ThinkingBlockEvent{Phase: ph, Index: b.index}
}

func (b *openBlock) toolEvent(ph Phase) ToolUseBlockEvent {
	return ToolUseBlockEvent{Phase: ph, Index: b.index, ID: b.id, Name: b.name, Server: b.server}
}
