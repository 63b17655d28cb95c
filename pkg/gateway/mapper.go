package gateway

import (
	"encoding/json"

	"github.com/llmworker/llmworker/pkg/events"
)

// Mapper turns the worker events of one turn, in their stored order, into
// UI message stream parts (docs/protocol.md, "Gateway"). It keeps only
// what the mapping needs (open blocks, the open step), so that replaying
// a turn from its first event gives the same parts, with the same ids,
// every time: that is what makes a resumed stream continue exactly where
// another left off. The zero value is not ready; use NewMapper.
type Mapper struct {
	blocks   map[int]block // open blocks of the step by index
	next     int           // blocks started so far: the ids' counter
	stepOpen bool
	ended    bool
	paused   bool
	pending  []string // calls waiting for approval
}

type block struct {
	typ    events.BlockType
	id     string // text/reasoning part id, or the tool call id
	result []byte // a tool_result block's text
}

// NewMapper returns a mapper for one turn.
func NewMapper() *Mapper { return &Mapper{blocks: map[int]block{}} }

// Ended reports whether the turn ended (completed, failed or aborted).
func (m *Mapper) Ended() bool { return m.ended }

// Paused reports whether the last event mapped paused the turn.
func (m *Mapper) Paused() bool { return m.paused }

// Map appends the parts of one worker event to out. Events the protocol
// has no place for (llmw.text.complete repeats the deltas) add nothing.
func (m *Mapper) Map(out []Chunk, ev events.WorkerEvent) []Chunk {
	m.paused = false
	switch e := ev.(type) {
	case events.TurnStarted:
		out = append(out, dataPart(DataTurn, "turn", e))
	case events.TurnStep:
		out = m.closeStep(out)
		clear(m.blocks)
		m.stepOpen = true
		out = append(out, Chunk{Type: PartStartStep})
	case events.WorkerBlockStart:
		out = m.blockStart(out, e)
	case events.WorkerBlockDelta:
		b, ok := m.blocks[e.Index]
		if !ok {
			break
		}
		switch e.Kind {
		case events.DeltaText:
			if b.typ == events.BlockToolResult {
				b.result = append(b.result, e.Content...)
				m.blocks[e.Index] = b
			} else if e.Content != "" {
				out = append(out, Chunk{Type: PartTextDelta, ID: b.id, Delta: e.Content})
			}
		case events.DeltaThinking:
			if e.Content != "" {
				out = append(out, Chunk{Type: PartReasoningDelta, ID: b.id, Delta: e.Content})
			}
		case events.DeltaInputJSON:
			if e.Content != "" {
				out = append(out, Chunk{Type: PartToolInputDelta, ToolCallID: b.id, Delta: e.Content})
			}
		}
	case events.WorkerBlockStop:
		out = m.blockEnd(out, e.Index)
	case events.WorkerBlockAbort:
		out = m.blockEnd(out, e.Index)
		out = append(out, dataPart(DataBlockAbort, "", e))
	case events.ToolCallComplete:
		if e.Error != "" {
			out = append(out, Chunk{Type: PartToolInputError, ToolCallID: e.ID, ToolName: e.Name, Input: jsonOrString(e.Input), ErrorText: e.Error})
		} else {
			out = append(out, Chunk{Type: PartToolInputAvailable, ToolCallID: e.ID, ToolName: e.Name, Input: jsonOrString(e.Input)})
		}
	case events.ToolStarted:
		// A call may start while the model still streams (a tool that
		// starts early) or only after the response ended: the UI tells a
		// running call from one whose input is merely complete by this.
		out = append(out, dataPart(DataToolStarted, "started-"+e.CallID, e))
	case events.ToolProgress:
		out = append(out, dataPart(DataToolProgress, "progress-"+e.CallID, e))
	case events.ToolCallResult:
		if e.IsError {
			out = append(out, Chunk{Type: PartToolOutputError, ToolCallID: e.CallID, ErrorText: e.Content})
		} else if e.Parts != nil {
			// Images and files: the parts as they are, for a UI to show.
			out = append(out, Chunk{Type: PartToolOutputAvailable, ToolCallID: e.CallID, Output: partsJSON(e.Parts)})
		} else {
			out = append(out, Chunk{Type: PartToolOutputAvailable, ToolCallID: e.CallID, Output: jsonOrString([]byte(e.Content))})
		}
	case events.ToolSkipped:
		if e.Hook == "" {
			// A person denied the paused call.
			out = append(out, Chunk{Type: PartToolOutputDenied, ToolCallID: e.CallID})
		} else {
			out = append(out, Chunk{Type: PartToolOutputError, ToolCallID: e.CallID, ErrorText: e.Reason})
		}
	case events.ToolCancelled:
		// A call started while the model streamed a response that no
		// longer asks for it: it ends without an output.
		out = append(out, Chunk{Type: PartToolOutputError, ToolCallID: e.CallID, ErrorText: "cancelled: " + e.Reason})
	case events.HookDecision:
		out = append(out, dataPart(DataHookDecision, "", e))
	case events.HookMessage:
		out = append(out, dataPart(DataHookMessage, "", e))
	case events.UsageReport:
		out = append(out, dataPart(DataUsage, "usage", e))
	case events.TurnPaused:
		m.pending = m.pending[:0]
		for _, c := range e.Pending {
			out = append(out, Chunk{Type: PartToolApprovalRequest, ApprovalID: ApprovalID(c.ID), ToolCallID: c.ID})
			m.pending = append(m.pending, c.ID)
		}
		out = append(out, dataPart(DataPaused, "", e))
		out = m.closeStep(out)
		m.paused = true
	case events.TurnResumed:
		m.pending = m.pending[:0]
		out = append(out, dataPart(DataResumed, "", e))
	case events.TurnWarning:
		out = append(out, dataPart(DataWarning, "", e))
	case events.TurnQueued:
		// One id per step and attempt: a UI shows the latest wait of
		// each call, and the call's first part ends it.
		out = append(out, dataPart(DataQueued, "queued-"+itoa(e.Step)+"-"+itoa(max(e.Attempt, 1)), e))
	case events.TurnCompleted:
		if e.Output != nil {
			out = append(out, Chunk{Type: DataOutput, ID: "output", Data: e.Output})
		}
		out = m.closeStep(out)
		out = append(out, Chunk{Type: PartFinish, FinishReason: finishReason(e.StopReason)})
		m.ended = true
	case events.TurnFailed:
		out = m.closeStep(out)
		out = m.unsettled(out, events.TurnEnded(e))
		out = append(out, Chunk{Type: PartError, ErrorText: endText(events.TurnEnded(e))}, Chunk{Type: PartFinish, FinishReason: "error"})
		m.ended = true
	case events.TurnAborted:
		out = m.closeStep(out)
		out = m.unsettled(out, events.TurnEnded(e))
		out = append(out, Chunk{Type: PartAbort, Reason: endText(events.TurnEnded(e))})
		m.ended = true
	}
	return out
}

// unsettled ends the calls that still wait for approval when the turn
// ends (a stop of a paused turn): a client must not keep offering them.
func (m *Mapper) unsettled(out []Chunk, e events.TurnEnded) []Chunk {
	for _, id := range m.pending {
		out = append(out, Chunk{Type: PartToolOutputError, ToolCallID: id, ErrorText: "not run: the turn ended (" + endText(e) + ")"})
	}
	m.pending = m.pending[:0]
	return out
}

// ApprovalID is the approvalId of the tool-approval-request of a paused
// call: the call id with a prefix, so that a client's approval response
// names the call it settles.
func ApprovalID(callID string) string { return "approval-" + callID }

func (m *Mapper) blockStart(out []Chunk, e events.WorkerBlockStart) []Chunk {
	m.next++
	b := block{typ: e.BlockType}
	switch e.BlockType {
	case events.BlockText:
		b.id = "text-" + itoa(m.next)
		out = append(out, Chunk{Type: PartTextStart, ID: b.id})
	case events.BlockThinking:
		b.id = "reasoning-" + itoa(m.next)
		out = append(out, Chunk{Type: PartReasoningStart, ID: b.id})
	case events.BlockToolUse:
		b.id = e.ID
		out = append(out, Chunk{Type: PartToolInputStart, ToolCallID: e.ID, ToolName: e.Name, ProviderExecuted: e.Server})
	case events.BlockToolResult:
		b.id = e.ToolUseID
	}
	m.blocks[e.Index] = b
	return out
}

func (m *Mapper) blockEnd(out []Chunk, index int) []Chunk {
	b, ok := m.blocks[index]
	if !ok {
		return out
	}
	delete(m.blocks, index)
	switch b.typ {
	case events.BlockText:
		out = append(out, Chunk{Type: PartTextEnd, ID: b.id})
	case events.BlockThinking:
		out = append(out, Chunk{Type: PartReasoningEnd, ID: b.id})
	case events.BlockToolResult:
		// A provider-run tool's result (its tool_use was a server tool).
		out = append(out, Chunk{Type: PartToolOutputAvailable, ToolCallID: b.id, Output: jsonOrString(b.result), ProviderExecuted: true})
	}
	return out
}

// closeStep ends the open parts and the step.
func (m *Mapper) closeStep(out []Chunk) []Chunk {
	if !m.stepOpen {
		return out
	}
	for i := range m.blocks {
		out = m.blockEnd(out, i)
	}
	m.stepOpen = false
	return append(out, Chunk{Type: PartFinishStep})
}

// finishReason maps a stop reason to the protocol's finishReason.
func finishReason(r events.StopReason) string {
	switch r {
	case events.StopEndTurn, events.StopSequence:
		return "stop"
	case events.StopMaxTokens:
		return "length"
	case events.StopToolUse:
		return "tool-calls"
	case events.StopRefusal, events.StopContentFilter:
		return "content-filter"
	}
	return "other"
}

func endText(e events.TurnEnded) string {
	if e.Code == "" {
		return e.Reason
	}
	return e.Code + ": " + e.Reason
}

// jsonOrString is b when it is JSON, else b as a JSON string: a tool's
// output is usually text, and the protocol carries any JSON value.
func jsonOrString(b []byte) json.RawMessage {
	if len(b) > 0 && json.Valid(b) {
		return b
	}
	return events.AppendJSONString(nil, string(b))
}

// partsJSON is a tool result's parts as the JSON array of its content.
func partsJSON(parts []events.Part) json.RawMessage {
	b, err := json.Marshal(parts)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

func dataPart(typ, id string, v any) Chunk {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("null")
	}
	return Chunk{Type: typ, ID: id, Data: b}
}
