package gateway

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
)

// Mapper turns the worker events of one turn, and of the sub-agent child
// turns it starts (any depth), in their stored order, into UI message
// stream parts (docs/protocol.md, "Gateway"). It keeps only what the
// mapping needs (open blocks, the open step, the calls that wait), so
// that replaying a turn from its first event gives the same parts, with
// the same ids, every time: that is what makes a resumed stream continue
// exactly where another left off. The zero value is not ready; use
// NewMapper or NewTreeMapper.
//
// A child turn's parts are the parent's stream's own parts, each once:
// its text, reasoning and tool parts with ids prefixed by "<child_turn_id>."
// and providerMetadata {"llmw": ChildOwner} naming the child and the tool
// call it runs under; its steps, its end and its data parts without an id
// are left out (its status is the parent's data-llmw-child).
type Mapper struct {
	rootID string
	root   *turnMap
	turns  map[string]*turnMap // child turns by turn id
	found  []Child
}

// Child is a child turn a Mapper learnt of from its parent's
// llmw.tool.child: the turn whose events it maps next.
type Child struct {
	TurnID string
	// SessionID is the session token of its event subjects.
	SessionID string
}

// ChildOwner is providerMetadata.llmw of a child turn's text, reasoning
// and tool parts: the part belongs to turn TurnID, which runs as the tool
// call ToolCallID of its parent (that call's toolCallId in the stream).
type ChildOwner struct {
	TurnID     string `json:"turnId"`
	ToolCallID string `json:"toolCallId"`
	Depth      int    `json:"depth"`
}

// turnMap maps the events of one turn of the tree.
type turnMap struct {
	blocks   map[int]block // open blocks of the step by index
	next     int           // blocks started so far: the ids' counter
	stepOpen bool
	ended    bool
	paused   bool     // the last event mapped paused the turn
	held     bool     // paused, until resumed or ended
	pending  []string // toolCallIds of the calls waiting for approval

	ns      string              // "" for the followed turn, "<turn_id>." for a child
	meta    json.RawMessage     // providerMetadata of a child's parts
	running map[string]bool     // calls started and not ended, by call id
	kids    map[string]*turnMap // child turns by the call id that runs them
	order   []*turnMap          // kids in the order they were named
	closed  bool                // the parent named the child's end
}

type block struct {
	typ    events.BlockType
	id     string // text/reasoning part id, or the tool call id
	result []byte // a tool_result block's text
}

func newTurnMap() *turnMap {
	return &turnMap{blocks: map[int]block{}, running: map[string]bool{}, kids: map[string]*turnMap{}}
}

// NewMapper returns a mapper for one turn, whose events Map takes.
func NewMapper() *Mapper { return NewTreeMapper("") }

// NewTreeMapper returns a mapper for turn turnID and its child turns,
// whose events MapOf takes.
func NewTreeMapper(turnID string) *Mapper {
	return &Mapper{rootID: turnID, root: newTurnMap(), turns: map[string]*turnMap{}}
}

// Ended reports whether the turn ended (completed, failed or aborted).
func (m *Mapper) Ended() bool { return m.root.ended }

// Paused reports whether the last event of the turn mapped paused it.
func (m *Mapper) Paused() bool { return m.root.paused }

// Waiting reports whether the turn's tree waits for a person and does
// nothing else: some turn of it is paused for approval, and each turn
// that has not ended is paused or waits only for running child turns
// (no open block, no other call running), and its children do the same
// (none ended without its parent having taken its result).
func (m *Mapper) Waiting() bool {
	held := false
	var idle func(t *turnMap) bool
	idle = func(t *turnMap) bool {
		switch {
		case t.ended:
			return true
		case !t.held && len(t.blocks) > 0:
			return false
		}
		open := false
		for _, k := range t.kids {
			switch {
			case k.closed:
				continue
			case k.ended:
				// Its parent takes its result next.
				return false
			}
			open = true
			if !idle(k) {
				return false
			}
		}
		if t.held {
			// Paused itself, with no child that still runs.
			held = true
			return true
		}
		for id := range t.running {
			if k := t.kids[id]; k == nil || k.closed {
				return false
			}
		}
		return open
	}
	return !m.root.ended && idle(m.root) && held
}

// Found returns the child turns named since the last call: a stream
// follows their subjects from there.
func (m *Mapper) Found() []Child {
	f := m.found
	m.found = nil
	return f
}

// Map appends the parts of one worker event of the turn to out. Events
// the protocol has no place for (llmw.text.complete repeats the deltas)
// add nothing.
func (m *Mapper) Map(out []Chunk, ev events.WorkerEvent) []Chunk {
	return m.mapTurn(out, m.root, ev)
}

// MapOf appends the parts of one worker event of turn turnID: the
// mapper's turn or a child turn it found. Events of other turns add
// nothing.
func (m *Mapper) MapOf(out []Chunk, turnID string, ev events.WorkerEvent) []Chunk {
	if turnID == m.rootID {
		return m.mapTurn(out, m.root, ev)
	}
	if t := m.turns[turnID]; t != nil {
		return m.mapTurn(out, t, ev)
	}
	return out
}

// namespace is the prefix of turnID's ids ("" for the mapper's turn).
func (m *Mapper) namespace(turnID string) string {
	if t := m.turns[turnID]; t != nil && turnID != m.rootID {
		return t.ns
	}
	return ""
}

func (m *Mapper) mapTurn(out []Chunk, t *turnMap, ev events.WorkerEvent) []Chunk {
	if t == m.root {
		switch e := ev.(type) {
		case events.TurnCompleted, events.TurnFailed, events.TurnAborted:
			// No child may keep offering an approval once the tree ended.
			text := "not run: the turn ended"
			if te, ok := endOf(e); ok {
				text += " (" + endText(te) + ")"
			}
			for _, k := range m.root.order {
				out = m.withdraw(out, k, text)
			}
		}
	}
	n := len(out)
	out = t.mapEvent(out, ev)
	if t.meta != nil {
		out = t.childParts(out, n)
	}
	if e, ok := ev.(events.ToolChild); ok {
		out = m.child(out, t, e)
	}
	return out
}

func endOf(ev events.WorkerEvent) (events.TurnEnded, bool) {
	switch e := ev.(type) {
	case events.TurnFailed:
		return events.TurnEnded(e), true
	case events.TurnAborted:
		return events.TurnEnded(e), true
	}
	return events.TurnEnded{}, false
}

// child records the child turn a llmw.tool.child of turn t names, and
// withdraws its approvals when the parent says it ended.
func (m *Mapper) child(out []Chunk, t *turnMap, e events.ToolChild) []Chunk {
	k := t.kids[e.CallID]
	if k == nil {
		if !events.ValidToken(e.ChildTurnID) || e.ChildTurnID == m.rootID || m.turns[e.ChildTurnID] != nil {
			return out
		}
		k = newTurnMap()
		k.ns = e.ChildTurnID + "."
		k.meta, _ = json.Marshal(map[string]ChildOwner{"llmw": {TurnID: e.ChildTurnID, ToolCallID: t.ns + e.CallID, Depth: e.Depth}})
		t.kids[e.CallID] = k
		t.order = append(t.order, k)
		m.turns[e.ChildTurnID] = k
		session := e.ChildSessionID
		if session == "" {
			session = events.NoSession
		}
		m.found = append(m.found, Child{TurnID: e.ChildTurnID, SessionID: session})
	}
	switch e.Status {
	case events.ChildResumed:
		// The child's state runs again: its parent may say so before the
		// child's own llmw.turn.resumed is stored, and a stream must not
		// end as if a person were still waited for.
		k.held = false
	case events.ChildCompleted, events.ChildFailed, events.ChildAborted:
		if !k.closed {
			text := "not run: the sub-agent's turn ended (" + string(e.Status)
			if e.Code != "" {
				text += ": " + e.Code
			}
			out = m.withdraw(out, k, text+")")
			k.closed = true
		}
	}
	return out
}

// withdraw ends the calls of t and its children that still wait for
// approval.
func (m *Mapper) withdraw(out []Chunk, t *turnMap, text string) []Chunk {
	for _, id := range t.pending {
		out = append(out, Chunk{Type: PartToolOutputError, ToolCallID: id, ErrorText: text})
	}
	t.pending = t.pending[:0]
	t.held = false
	for _, k := range t.order {
		out = m.withdraw(out, k, text)
	}
	return out
}

// childParts keeps of out[n:] the parts a child turn shows in its
// parent's stream, owner metadata added.
func (t *turnMap) childParts(out []Chunk, n int) []Chunk {
	kept := out[:n]
	for _, c := range out[n:] {
		switch c.Type {
		case PartStart, PartFinish, PartAbort, PartError, PartStartStep, PartFinishStep, DataTurn:
			continue
		case PartTextStart, PartReasoningStart, PartToolInputStart, PartToolInputAvailable, PartToolInputError:
			c.ProviderMetadata = t.meta
		default:
			if strings.HasPrefix(c.Type, "data-") && c.ID == "" {
				continue
			}
		}
		kept = append(kept, c)
	}
	return kept
}

// call is the toolCallId of this turn's call id.
func (t *turnMap) call(id string) string { return t.ns + id }

// mapEvent appends the parts of one worker event of this turn.
func (t *turnMap) mapEvent(out []Chunk, ev events.WorkerEvent) []Chunk {
	t.paused = false
	switch e := ev.(type) {
	case events.TurnStarted:
		out = append(out, dataPart(DataTurn, "turn", e))
	case events.TurnStep:
		out = t.closeStep(out)
		clear(t.blocks)
		t.stepOpen = true
		out = append(out, Chunk{Type: PartStartStep})
	case events.WorkerBlockStart:
		out = t.blockStart(out, e)
	case events.WorkerBlockDelta:
		b, ok := t.blocks[e.Index]
		if !ok {
			break
		}
		switch e.Kind {
		case events.DeltaText:
			if b.typ == events.BlockToolResult {
				b.result = append(b.result, e.Content...)
				t.blocks[e.Index] = b
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
		out = t.blockEnd(out, e.Index)
	case events.WorkerBlockAbort:
		out = t.blockEnd(out, e.Index)
		out = append(out, dataPart(DataBlockAbort, "", e))
	case events.ToolCallComplete:
		if e.Error != "" {
			out = append(out, Chunk{Type: PartToolInputError, ToolCallID: t.call(e.ID), ToolName: e.Name, Input: jsonOrString(e.Input), ErrorText: e.Error})
		} else {
			out = append(out, Chunk{Type: PartToolInputAvailable, ToolCallID: t.call(e.ID), ToolName: e.Name, Input: jsonOrString(e.Input)})
		}
	case events.ToolStarted:
		// A call may start while the model still streams (a tool that
		// starts early) or only after the response ended: the UI tells a
		// running call from one whose input is merely complete by this.
		t.running[e.CallID] = true
		out = append(out, dataPart(DataToolStarted, "started-"+t.call(e.CallID), e))
	case events.ToolProgress:
		out = append(out, dataPart(DataToolProgress, "progress-"+t.call(e.CallID), e))
	case events.ToolChild:
		// The child's own parts follow from its subjects (Mapper.child).
		out = append(out, dataPart(DataChild, "child-"+t.call(e.CallID), e))
	case events.ToolCallResult:
		delete(t.running, e.CallID)
		id := t.call(e.CallID)
		if e.IsError {
			out = append(out, Chunk{Type: PartToolOutputError, ToolCallID: id, ErrorText: e.Content})
		} else if e.Parts != nil {
			// Images and files: the parts as they are, for a UI to show.
			out = append(out, Chunk{Type: PartToolOutputAvailable, ToolCallID: id, Output: partsJSON(e.Parts)})
		} else {
			out = append(out, Chunk{Type: PartToolOutputAvailable, ToolCallID: id, Output: jsonOrString([]byte(e.Content))})
		}
	case events.ToolSkipped:
		delete(t.running, e.CallID)
		if e.Hook == "" {
			// A person denied the paused call.
			out = append(out, Chunk{Type: PartToolOutputDenied, ToolCallID: t.call(e.CallID)})
		} else {
			out = append(out, Chunk{Type: PartToolOutputError, ToolCallID: t.call(e.CallID), ErrorText: e.Reason})
		}
	case events.ToolCancelled:
		// A call started while the model streamed a response that no
		// longer asks for it: it ends without an output.
		delete(t.running, e.CallID)
		out = append(out, Chunk{Type: PartToolOutputError, ToolCallID: t.call(e.CallID), ErrorText: "cancelled: " + e.Reason})
	case events.HookDecision:
		out = append(out, dataPart(DataHookDecision, "", e))
	case events.HookMessage:
		out = append(out, dataPart(DataHookMessage, "", e))
	case events.UsageReport:
		out = append(out, dataPart(DataUsage, t.ns+"usage", e))
	case events.TurnPaused:
		t.pending = t.pending[:0]
		for _, c := range e.Pending {
			id := t.call(c.ID)
			out = append(out, Chunk{Type: PartToolApprovalRequest, ApprovalID: ApprovalID(id), ToolCallID: id})
			t.pending = append(t.pending, id)
		}
		out = append(out, dataPart(DataPaused, "", e))
		out = t.closeStep(out)
		t.paused, t.held = true, true
	case events.TurnResumed:
		t.pending = t.pending[:0]
		t.held = false
		out = append(out, dataPart(DataResumed, "", e))
	case events.TurnWarning:
		out = append(out, dataPart(DataWarning, "", e))
	case events.TurnQueued:
		// One id per step and attempt: a UI shows the latest wait of
		// each call, and the call's first part ends it.
		out = append(out, dataPart(DataQueued, t.ns+"queued-"+itoa(e.Step)+"-"+itoa(max(e.Attempt, 1)), e))
	case events.TurnCompacted:
		// One id per compaction: a replay draws its divider once.
		out = append(out, dataPart(DataCompacted, t.ns+"compacted-"+e.ID, e))
	case events.TurnCompleted:
		if e.Output != nil {
			out = append(out, Chunk{Type: DataOutput, ID: t.ns + "output", Data: e.Output})
		}
		out = t.closeStep(out)
		out = append(out, Chunk{Type: PartFinish, FinishReason: finishReason(e.StopReason)})
		t.ended, t.held = true, false
	case events.TurnFailed:
		out = t.closeStep(out)
		out = t.unsettled(out, events.TurnEnded(e))
		out = append(out, Chunk{Type: PartError, ErrorText: endText(events.TurnEnded(e))}, Chunk{Type: PartFinish, FinishReason: "error"})
		t.ended, t.held = true, false
	case events.TurnAborted:
		out = t.closeStep(out)
		out = t.unsettled(out, events.TurnEnded(e))
		out = append(out, Chunk{Type: PartAbort, Reason: endText(events.TurnEnded(e))})
		t.ended, t.held = true, false
	}
	return out
}

// unsettled ends the calls that still wait for approval when the turn
// ends (a stop of a paused turn): a client must not keep offering them.
func (t *turnMap) unsettled(out []Chunk, e events.TurnEnded) []Chunk {
	for _, id := range t.pending {
		out = append(out, Chunk{Type: PartToolOutputError, ToolCallID: id, ErrorText: "not run: the turn ended (" + endText(e) + ")"})
	}
	t.pending = t.pending[:0]
	return out
}

// ApprovalID is the approvalId of the tool-approval-request of a paused
// call: the call id with a prefix, so that a client's approval response
// names the call it settles.
func ApprovalID(callID string) string { return "approval-" + callID }

func (t *turnMap) blockStart(out []Chunk, e events.WorkerBlockStart) []Chunk {
	t.next++
	b := block{typ: e.BlockType}
	switch e.BlockType {
	case events.BlockText:
		b.id = t.ns + "text-" + itoa(t.next)
		out = append(out, Chunk{Type: PartTextStart, ID: b.id})
	case events.BlockThinking:
		b.id = t.ns + "reasoning-" + itoa(t.next)
		out = append(out, Chunk{Type: PartReasoningStart, ID: b.id})
	case events.BlockToolUse:
		b.id = t.call(e.ID)
		out = append(out, Chunk{Type: PartToolInputStart, ToolCallID: b.id, ToolName: e.Name, ProviderExecuted: e.Server})
	case events.BlockToolResult:
		b.id = t.call(e.ToolUseID)
	}
	t.blocks[e.Index] = b
	return out
}

func (t *turnMap) blockEnd(out []Chunk, index int) []Chunk {
	b, ok := t.blocks[index]
	if !ok {
		return out
	}
	delete(t.blocks, index)
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

// closeStep ends the open parts, in the order of their blocks, and the
// step.
func (t *turnMap) closeStep(out []Chunk) []Chunk {
	if !t.stepOpen {
		return out
	}
	for _, i := range slices.Sorted(maps.Keys(t.blocks)) {
		out = t.blockEnd(out, i)
	}
	t.stepOpen = false
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
