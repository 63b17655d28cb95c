package a2a

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/llmworker/llmworker/pkg/events"
)

// Artifact ids and metadata keys of a task (docs/protocol.md, "A2A").
const (
	// ArtifactOutput is the artifact of a completed turn's output (a turn
	// with a response_format): one data part.
	ArtifactOutput spec.ArtifactID = "output"
	// MetaPending is the key of the data part of an input-required
	// status message: the calls that wait for a decision.
	MetaPending = "pending"
)

// textArtifactID names the artifact of one text block of the turn: its
// step, its index in the step's answer, and how many blocks of that step
// and index were aborted before it (a retried model call streams its
// blocks again).
func textArtifactID(step, index, gen int) spec.ArtifactID {
	id := "text-" + strconv.Itoa(step) + "-" + strconv.Itoa(index)
	if gen > 0 {
		id += "-r" + strconv.Itoa(gen)
	}
	return spec.ArtifactID(id)
}

// StateOf is the task state of a turn whose last turn-channel event
// (llmw.turn.*) has type typ: the one place a turn's status becomes a
// task's state.
func StateOf(typ string) spec.TaskState {
	switch typ {
	case events.TypeTurnQueued, "":
		return spec.TaskStateSubmitted
	case events.TypeTurnPaused:
		return spec.TaskStateInputRequired
	case events.TypeTurnCompleted:
		return spec.TaskStateCompleted
	case events.TypeTurnFailed:
		return spec.TaskStateFailed
	case events.TypeTurnAborted:
		return spec.TaskStateCanceled
	}
	return spec.TaskStateWorking
}

// artifact is one artifact of the task as the events built it.
type artifact struct {
	id      spec.ArtifactID
	text    strings.Builder
	data    json.RawMessage // the output artifact's value
	dropped bool            // its block was aborted
}

type blockKey struct{ step, index int }

// Mapper folds the events of one turn, in stream order, into its A2A
// task, and answers each event with the A2A events a stream sends for
// it. It is the one place the mapping lives (docs/protocol.md, "A2A");
// everything else only moves its results. Two mappers fed the same
// events give the same task and the same events, so a stream picked up
// on another gateway replica continues with the ids the first one used.
type Mapper struct {
	task      spec.TaskInfo
	state     spec.TaskState
	status    *spec.Message
	at        time.Time
	history   []*spec.Message
	artifacts []*artifact
	open      map[blockKey]*artifact
	gens      map[blockKey]int
	pending   []events.ToolCall
}

// NewMapper returns the mapper of the turn taskID of session contextID,
// whose task is submitted.
func NewMapper(taskID, contextID string) *Mapper {
	return &Mapper{
		task:  spec.TaskInfo{TaskID: spec.TaskID(taskID), ContextID: contextID},
		state: spec.TaskStateSubmitted,
		open:  map[blockKey]*artifact{}, gens: map[blockKey]int{},
	}
}

// State is the task's state after the events mapped so far.
func (m *Mapper) State() spec.TaskState { return m.state }

// Pending are the calls an input-required task waits for.
func (m *Mapper) Pending() []events.ToolCall { return m.pending }

// Map appends to out the A2A events of ev, stored at time at, and
// updates the task.
func (m *Mapper) Map(out []spec.Event, ev events.WorkerEvent, at time.Time) []spec.Event {
	switch e := ev.(type) {
	case events.TurnStarted:
		for _, msg := range e.Input {
			if msg.Role == events.RoleUser {
				m.history = append(m.history, m.message(spec.MessageRoleUser, msg.Content))
			}
		}
		out = m.setState(out, spec.TaskStateWorking, nil, at)
	case events.TurnQueued:
		// Submitted already: a turn queued behind its session's running one.
	case events.TurnStep, events.TurnResumed:
		m.pending = nil
		out = m.setState(out, spec.TaskStateWorking, nil, at)
	case events.WorkerBlockStart:
		if e.BlockType != events.BlockText {
			break
		}
		k := blockKey{e.Step, e.Index}
		a := &artifact{id: textArtifactID(e.Step, e.Index, m.gens[k])}
		m.open[k] = a
		m.artifacts = append(m.artifacts, a)
	case events.WorkerBlockDelta:
		a := m.open[blockKey{e.Step, e.Index}]
		if a == nil || e.Kind != events.DeltaText || e.Content == "" {
			break
		}
		first := a.text.Len() == 0
		a.text.WriteString(e.Content)
		out = append(out, &spec.TaskArtifactUpdateEvent{
			TaskID: m.task.TaskID, ContextID: m.task.ContextID, Append: !first,
			Artifact: &spec.Artifact{ID: a.id, Parts: spec.ContentParts{spec.NewTextPart(e.Content)}},
		})
	case events.WorkerBlockStop:
		k := blockKey{e.Step, e.Index}
		a := m.open[k]
		if a == nil {
			break
		}
		delete(m.open, k)
		out = append(out, &spec.TaskArtifactUpdateEvent{
			TaskID: m.task.TaskID, ContextID: m.task.ContextID, Append: true, LastChunk: true,
			Artifact: &spec.Artifact{ID: a.id, Parts: spec.ContentParts{}},
		})
	case events.WorkerBlockAbort:
		k := blockKey{e.Step, e.Index}
		a := m.open[k]
		if a == nil {
			break
		}
		delete(m.open, k)
		m.gens[k]++
		a.dropped = true
		// The client's copy is emptied: the retried call streams the
		// block again under another id.
		out = append(out, &spec.TaskArtifactUpdateEvent{
			TaskID: m.task.TaskID, ContextID: m.task.ContextID, LastChunk: true,
			Artifact: &spec.Artifact{ID: a.id, Parts: spec.ContentParts{}, Metadata: map[string]any{"aborted": e.Reason}},
		})
	case events.TurnPaused:
		m.pending = e.Pending
		out = m.setState(out, spec.TaskStateInputRequired, m.pausedMessage(e), at)
	case events.TurnCompleted:
		if len(e.Output) > 0 {
			a := &artifact{id: ArtifactOutput, data: e.Output}
			m.artifacts = append(m.artifacts, a)
			out = append(out, &spec.TaskArtifactUpdateEvent{
				TaskID: m.task.TaskID, ContextID: m.task.ContextID, LastChunk: true, Artifact: a.toSpec(),
			})
		}
		out = m.setState(out, spec.TaskStateCompleted, nil, at)
	case events.TurnFailed:
		out = m.setState(out, spec.TaskStateFailed, m.endMessage(events.TurnEnded(e)), at)
	case events.TurnAborted:
		out = m.setState(out, spec.TaskStateCanceled, m.endMessage(events.TurnEnded(e)), at)
	}
	return out
}

// Reject is the answer of the turn service's refusal of the submit that
// would have started the turn: the task is rejected.
func (m *Mapper) Reject(out []spec.Event, rj events.TurnRejected, at time.Time) []spec.Event {
	msg := spec.NewMessageForTask(spec.MessageRoleAgent, m.task, spec.NewTextPart(rj.Code+": "+rj.Reason))
	msg.ID = string(m.task.TaskID) + "-rejected"
	return m.setState(out, spec.TaskStateRejected, msg, at)
}

func (m *Mapper) setState(out []spec.Event, s spec.TaskState, msg *spec.Message, at time.Time) []spec.Event {
	if s == m.state && msg == nil {
		return out
	}
	m.state, m.status, m.at = s, msg, at.UTC()
	ts := m.at
	return append(out, &spec.TaskStatusUpdateEvent{
		TaskID: m.task.TaskID, ContextID: m.task.ContextID,
		Status: spec.TaskStatus{State: s, Message: msg, Timestamp: &ts},
	})
}

// pausedMessage is the status message of an input-required task: the
// calls in words, and as a data part {"pending": [{id, name, input}]}
// whose ids a decision names.
func (m *Mapper) pausedMessage(e events.TurnPaused) *spec.Message {
	var b strings.Builder
	b.WriteString("Approval needed")
	if e.Reason != "" {
		b.WriteString(" (" + e.Reason + ")")
	}
	b.WriteString(":")
	pending := make([]map[string]any, 0, len(e.Pending))
	for _, c := range e.Pending {
		fmt.Fprintf(&b, " %s %s %s;", c.ID, c.Name, c.Input)
		pending = append(pending, map[string]any{"id": c.ID, "name": c.Name, "input": c.Input})
	}
	b.WriteString(` answer "approve" or "deny", or a data part {"decisions": {"<id>": "approve" | "deny" | {"input": {...}}}}.`)
	msg := spec.NewMessageForTask(spec.MessageRoleAgent, m.task,
		spec.NewTextPart(b.String()), spec.NewDataPart(map[string]any{MetaPending: pending}))
	msg.ID = string(m.task.TaskID) + "-paused-" + firstID(e.Pending)
	return msg
}

func firstID(cs []events.ToolCall) string {
	if len(cs) == 0 {
		return ""
	}
	return cs[0].ID
}

func (m *Mapper) endMessage(e events.TurnEnded) *spec.Message {
	msg := spec.NewMessageForTask(spec.MessageRoleAgent, m.task, spec.NewTextPart(e.Code+": "+e.Reason))
	msg.ID = string(m.task.TaskID) + "-end"
	msg.Metadata = map[string]any{"code": e.Code}
	return msg
}

// message is a user message of the turn's input as an A2A message: text
// as text parts, media as file parts (a URL, the bytes, or, for media
// stored in LLMW_MEDIA, a text part naming its ref), tool parts left out.
func (m *Mapper) message(role spec.MessageRole, content []events.Part) *spec.Message {
	msg := spec.NewMessageForTask(role, m.task)
	msg.ID = string(m.task.TaskID) + "-in-" + strconv.Itoa(len(m.history))
	for _, p := range content {
		switch {
		case p.Type == events.PartText:
			msg.Parts = append(msg.Parts, spec.NewTextPart(p.Text))
		case p.IsMedia() && p.URL != "":
			sp := spec.NewFileURLPart(spec.URL(p.URL), p.MediaType)
			sp.Filename = p.Filename
			msg.Parts = append(msg.Parts, sp)
		case p.IsMedia() && p.Data != "":
			if b, err := p.Bytes(); err == nil {
				sp := spec.NewRawPart(b)
				sp.MediaType, sp.Filename = p.MediaType, p.Filename
				msg.Parts = append(msg.Parts, sp)
			}
		case p.IsMedia() && p.Ref != "":
			sp := spec.NewTextPart("[" + p.MediaType + " " + p.Ref + "]")
			sp.Metadata = map[string]any{"ref": p.Ref, "mediaType": p.MediaType, "size": p.Size}
			msg.Parts = append(msg.Parts, sp)
		}
	}
	return msg
}

func (a *artifact) toSpec() *spec.Artifact {
	if a.id == ArtifactOutput {
		var v any
		_ = json.Unmarshal(a.data, &v)
		p := spec.NewDataPart(v)
		p.MediaType = "application/json"
		return &spec.Artifact{ID: a.id, Name: "output", Parts: spec.ContentParts{p}, Metadata: map[string]any{"response_format": true}}
	}
	return &spec.Artifact{ID: a.id, Name: "answer", Parts: spec.ContentParts{spec.NewTextPart(a.text.String())}}
}

// Task is the task after the events mapped so far: a copy the caller
// may keep. historyLength bounds its history (nil = all, 0 = none).
func (m *Mapper) Task(historyLength *int) *spec.Task {
	t := &spec.Task{ID: m.task.TaskID, ContextID: m.task.ContextID, Status: spec.TaskStatus{State: m.state, Message: m.status}}
	if !m.at.IsZero() {
		ts := m.at
		t.Status.Timestamp = &ts
	}
	for _, a := range m.artifacts {
		if !a.dropped {
			t.Artifacts = append(t.Artifacts, a.toSpec())
		}
	}
	h := m.history
	if historyLength != nil && *historyLength < len(h) {
		h = h[len(h)-max(0, *historyLength):]
	}
	t.History = append([]*spec.Message(nil), h...)
	return t
}

// Final reports whether the task is in a terminal state.
func (m *Mapper) Final() bool { return m.state.Terminal() }

// Interrupted reports whether the task waits for the client
// (input-required): a stream ends there, the next message resumes it.
func (m *Mapper) Interrupted() bool { return m.state == spec.TaskStateInputRequired }
