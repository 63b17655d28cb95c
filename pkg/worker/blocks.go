package worker

import (
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/timeline"
)

// The handlers below turn Timeline phases into the block events of
// docs/protocol.md §5, one to one, with the step. Aborts reach them both
// from the stream (block.abort) and from Timeline.AbortCurrentBlock. The
// model stream is normalized before the Timeline sees it, so every block
// has its PhaseStart: the handlers keep no state of their own (a
// Timeline's implicit scope start only matters to streams that were not
// normalized).

func (r *run) onText(_ *struct{}, ev timeline.TextBlockEvent) {
	if ev.StopReason != "" {
		r.stopReason = ev.StopReason
	}
	if len(r.em.obs) == 0 {
		return
	}
	switch ev.Phase {
	case timeline.PhaseStart:
		r.emitStart(events.BlockStart{Index: ev.Index, BlockType: ev.BlockType, ToolUseID: ev.ToolUseID})
	case timeline.PhaseDelta:
		r.em.emit(events.WorkerBlockDelta{BlockDelta: events.TextDelta(ev.Index, ev.Text), Step: r.step})
	case timeline.PhaseStop:
		r.emitStop(events.BlockStop{Index: ev.Index, BlockType: ev.BlockType, StopReason: ev.StopReason, Signature: ev.Signature})
	case timeline.PhaseAbort:
		r.emitAbort(events.BlockAbort{Index: ev.Index, BlockType: ev.BlockType, Reason: ev.Reason})
	}
}

func (r *run) onThinking(_ *struct{}, ev timeline.ThinkingBlockEvent) {
	if len(r.em.obs) == 0 {
		return
	}
	switch ev.Phase {
	case timeline.PhaseStart:
		r.emitStart(events.BlockStart{Index: ev.Index, BlockType: events.BlockThinking})
	case timeline.PhaseDelta:
		r.em.emit(events.WorkerBlockDelta{BlockDelta: events.ThinkingDelta(ev.Index, ev.Thinking), Step: r.step})
	case timeline.PhaseStop:
		r.emitStop(events.BlockStop{Index: ev.Index, BlockType: events.BlockThinking, Signature: ev.Signature})
	case timeline.PhaseAbort:
		r.emitAbort(events.BlockAbort{Index: ev.Index, BlockType: events.BlockThinking, Reason: ev.Reason})
	}
}

func (r *run) onToolUse(_ *struct{}, ev timeline.ToolUseBlockEvent) {
	if ev.StopReason != "" {
		r.stopReason = ev.StopReason
	}
	if len(r.em.obs) == 0 {
		return
	}
	start := events.BlockStart{Index: ev.Index, BlockType: events.BlockToolUse, ID: ev.ID, Name: ev.Name, Server: ev.Server}
	switch ev.Phase {
	case timeline.PhaseStart:
		r.emitStart(start)
	case timeline.PhaseDelta:
		r.em.emit(events.WorkerBlockDelta{BlockDelta: events.InputJSONDelta(ev.Index, ev.InputJSON), Step: r.step})
	case timeline.PhaseStop:
		r.emitStop(events.BlockStop{Index: ev.Index, BlockType: events.BlockToolUse, StopReason: ev.StopReason, Signature: ev.Signature})
	case timeline.PhaseAbort:
		r.emitAbort(events.BlockAbort{Index: ev.Index, BlockType: events.BlockToolUse, Reason: ev.Reason})
	}
}

func (r *run) emitStart(b events.BlockStart) {
	r.em.emit(events.WorkerBlockStart{BlockStart: b, Step: r.step})
}

func (r *run) emitStop(b events.BlockStop) {
	r.em.emit(events.WorkerBlockStop{BlockStop: b, Step: r.step})
}

func (r *run) emitAbort(b events.BlockAbort) {
	r.em.emit(events.WorkerBlockAbort{BlockAbort: b, Step: r.step})
}

// textScope accumulates a text block for its complete event.
type textScope struct{ b strings.Builder }

// onTextComplete runs after every other text handler: at a text block's
// stop it sends llmw.text.complete and calls the OnTextComplete handlers.
func (r *run) onTextComplete(s *textScope, ev timeline.TextBlockEvent) {
	if ev.BlockType != events.BlockText {
		return
	}
	switch ev.Phase {
	case timeline.PhaseDelta:
		if len(r.em.obs) > 0 || len(r.h.textComplete) > 0 {
			s.b.WriteString(ev.Text)
		}
	case timeline.PhaseStop:
		c := events.TextComplete{Step: r.step, Index: ev.Index, Text: s.b.String()}
		if r.em.observed() {
			r.em.emit(c)
		}
		for _, f := range r.h.textComplete {
			f(c)
		}
	}
}

// onToolCallComplete runs after every other tool_use handler (the
// ToolCallCollector has parsed the input by then): at the stop of a local
// tool call it sends llmw.toolcall.complete and calls the
// OnToolCallComplete handlers.
func (r *run) onToolCallComplete(_ *struct{}, ev timeline.ToolUseBlockEvent) {
	if ev.Phase != timeline.PhaseStop || ev.Server {
		return
	}
	if r.eagerOn && r.mayStartEarly(ev.Name) {
		r.ready = append(r.ready, ev.Index) // see startReady
	}
	if len(r.em.obs) == 0 && len(r.h.toolComplete) == 0 {
		return
	}
	c := events.ToolCallComplete{Step: r.step, ID: ev.ID, Name: ev.Name, Input: []byte("{}")}
	if cc, ok := r.calls.CollectedAt(ev.Index); ok {
		c.Input = cc.Input
		if cc.Err != nil {
			c.Error = cc.Err.Error()
		}
	}
	r.em.emit(c)
	for _, f := range r.h.toolComplete {
		f(c)
	}
}
