package a2a_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/llmworker/llmworker/pkg/a2a"
	"github.com/llmworker/llmworker/pkg/events"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// step is one turn event and the A2A events a stream sends for it,
// written as "status:<STATE>", "artifact:<id>:<text>[:append][:last]" or
// "artifact:<id>:data".
type step struct {
	ev   events.WorkerEvent
	want []string
}

func describe(t *testing.T, evs []spec.Event) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		switch e := e.(type) {
		case *spec.TaskStatusUpdateEvent:
			out = append(out, "status:"+string(e.Status.State))
		case *spec.TaskArtifactUpdateEvent:
			s := "artifact:" + string(e.Artifact.ID) + ":"
			for _, p := range e.Artifact.Parts {
				if p.Data() != nil {
					s += "data"
				} else {
					s += p.Text()
				}
			}
			if e.Append {
				s += ":append"
			}
			if e.LastChunk {
				s += ":last"
			}
			out = append(out, s)
		default:
			t.Fatalf("unexpected event %T", e)
		}
	}
	return out
}

func play(t *testing.T, m *a2a.Mapper, steps []step) {
	t.Helper()
	for i, s := range steps {
		got := describe(t, m.Map(nil, s.ev, t0.Add(time.Duration(i)*time.Second)))
		if strings.Join(got, "|") != strings.Join(s.want, "|") {
			t.Errorf("event %d (%T): got %q, want %q", i, s.ev, got, s.want)
		}
	}
}

func text(i int, s string) events.WorkerEvent {
	return events.WorkerBlockDelta{BlockDelta: events.TextDelta(i, s), Step: 1}
}

// A turn that answers in two text blocks and returns an output: working
// once, each block an artifact streamed in chunks and closed, the output
// a data artifact, then completed; the task holds the question and the
// whole answer.
func TestMapperCompleted(t *testing.T) {
	m := a2a.NewMapper("task-1", "ctx-1")
	if m.State() != spec.TaskStateSubmitted {
		t.Fatalf("new task: %s", m.State())
	}
	play(t, m, []step{
		{events.TurnStarted{TurnID: "task-1", SessionID: "ctx-1", Input: []events.Message{events.UserText("Capital of France?")}}, []string{"status:TASK_STATE_WORKING"}},
		{events.TurnStep{Step: 1}, nil},
		{events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 0, BlockType: events.BlockThinking}, Step: 1}, nil},
		{events.WorkerBlockDelta{BlockDelta: events.ThinkingDelta(0, "hmm"), Step: 1}, nil},
		{events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 1, BlockType: events.BlockText}, Step: 1}, nil},
		{text(1, "Par"), []string{"artifact:text-1-1:Par"}},
		{text(1, "is."), []string{"artifact:text-1-1:is.:append"}},
		{events.WorkerBlockStop{BlockStop: events.BlockStop{Index: 1, BlockType: events.BlockText}, Step: 1}, []string{"artifact:text-1-1::append:last"}},
		{events.TextComplete{Step: 1, Index: 1, Text: "Paris."}, nil},
		{events.TurnCompleted{Output: json.RawMessage(`{"capital":"Paris"}`)}, []string{"artifact:output:data:last", "status:TASK_STATE_COMPLETED"}},
	})
	task := m.Task(nil)
	if task.ID != "task-1" || task.ContextID != "ctx-1" || task.Status.State != spec.TaskStateCompleted || !m.Final() {
		t.Fatalf("task: %+v", task)
	}
	if len(task.History) != 1 || task.History[0].Role != spec.MessageRoleUser || task.History[0].Parts[0].Text() != "Capital of France?" {
		t.Errorf("history: %+v", task.History)
	}
	if len(task.Artifacts) != 2 || task.Artifacts[0].Parts[0].Text() != "Paris." {
		t.Fatalf("artifacts: %+v", task.Artifacts)
	}
	out, _ := json.Marshal(task.Artifacts[1].Parts[0].Data())
	if task.Artifacts[1].ID != a2a.ArtifactOutput || string(out) != `{"capital":"Paris"}` {
		t.Errorf("output artifact: %s %s", task.Artifacts[1].ID, out)
	}
	if h := m.Task(new(int)).History; len(h) != 0 {
		t.Errorf("historyLength 0: %d messages", len(h))
	}
}

// A pause is input-required with the pending calls in a data part; the
// resume is working again; an aborted block's artifact is emptied and
// its retry streams under another id.
func TestMapperPauseResumeRetry(t *testing.T) {
	m := a2a.NewMapper("task-2", "ctx-2")
	pending := []events.ToolCall{{ID: "call_1", Name: "get_capital", Input: json.RawMessage(`{"country":"France"}`)}}
	play(t, m, []step{
		{events.TurnStarted{TurnID: "task-2"}, []string{"status:TASK_STATE_WORKING"}},
		{events.TurnPaused{Reason: "needs a person", Pending: pending}, []string{"status:TASK_STATE_INPUT_REQUIRED"}},
	})
	if !m.Interrupted() || m.Final() {
		t.Fatal("a paused turn is interrupted, not final")
	}
	msg := m.Task(nil).Status.Message
	if msg == nil || len(msg.Parts) != 2 {
		t.Fatalf("input-required message: %+v", msg)
	}
	b, _ := json.Marshal(msg.Parts[1].Data())
	if string(b) != `{"pending":[{"id":"call_1","input":{"country":"France"},"name":"get_capital"}]}` {
		t.Errorf("pending data part: %s", b)
	}
	play(t, m, []step{
		{events.TurnResumed{Decisions: map[string]events.Decision{"call_1": {Kind: events.DecisionApprove}}}, []string{"status:TASK_STATE_WORKING"}},
		{events.TurnStep{Step: 2}, nil},
		{events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 0, BlockType: events.BlockText}, Step: 2}, nil},
		{events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "Lyon"), Step: 2}, []string{"artifact:text-2-0:Lyon"}},
		{events.WorkerBlockAbort{BlockAbort: events.BlockAbort{Index: 0, BlockType: events.BlockText, Reason: "retry"}, Step: 2}, []string{"artifact:text-2-0::last"}},
		{events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 0, BlockType: events.BlockText}, Step: 2}, nil},
		{events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "Paris"), Step: 2}, []string{"artifact:text-2-0-r1:Paris"}},
		{events.WorkerBlockStop{BlockStop: events.BlockStop{Index: 0, BlockType: events.BlockText}, Step: 2}, []string{"artifact:text-2-0-r1::append:last"}},
		{events.TurnCompleted{}, []string{"status:TASK_STATE_COMPLETED"}},
	})
	arts := m.Task(nil).Artifacts
	if len(arts) != 1 || arts[0].ID != "text-2-0-r1" || arts[0].Parts[0].Text() != "Paris" {
		t.Errorf("artifacts after a retried block: %+v", arts)
	}
}

// The ends of a turn: failed, aborted (canceled) and rejected, each with
// its code and reason in the status message.
func TestMapperEnds(t *testing.T) {
	for _, c := range []struct {
		ev   events.WorkerEvent
		want spec.TaskState
		text string
	}{
		{events.TurnFailed{Code: "max_steps", Reason: "10 steps"}, spec.TaskStateFailed, "max_steps: 10 steps"},
		{events.TurnAborted{Code: "cancelled", Reason: "by the client"}, spec.TaskStateCanceled, "cancelled: by the client"},
	} {
		m := a2a.NewMapper("t", "c")
		m.Map(nil, events.TurnStarted{}, t0)
		got := describe(t, m.Map(nil, c.ev, t0))
		task := m.Task(nil)
		if len(got) != 1 || task.Status.State != c.want || !m.Final() || task.Status.Message.Parts[0].Text() != c.text {
			t.Errorf("%T: events %q, task %s %q", c.ev, got, task.Status.State, task.Status.Message.Parts[0].Text())
		}
	}
	m := a2a.NewMapper("t", "c")
	got := describe(t, m.Reject(nil, events.TurnRejected{TurnID: "t", Code: "unknown_agent", Reason: "no agent x"}, t0))
	if len(got) != 1 || got[0] != "status:TASK_STATE_REJECTED" || !m.Final() {
		t.Errorf("rejected: %q", got)
	}
}

// StateOf maps each turn status to the task state of docs/protocol.md.
func TestStateOf(t *testing.T) {
	for typ, want := range map[string]spec.TaskState{
		"":                       spec.TaskStateSubmitted,
		events.TypeTurnQueued:    spec.TaskStateSubmitted,
		events.TypeTurnStarted:   spec.TaskStateWorking,
		events.TypeTurnStep:      spec.TaskStateWorking,
		events.TypeTurnResumed:   spec.TaskStateWorking,
		events.TypeTurnPaused:    spec.TaskStateInputRequired,
		events.TypeTurnCompleted: spec.TaskStateCompleted,
		events.TypeTurnFailed:    spec.TaskStateFailed,
		events.TypeTurnAborted:   spec.TaskStateCanceled,
		events.TypeTurnCompacted: spec.TaskStateWorking,
		events.TypeTurnWarning:   spec.TaskStateWorking,
	} {
		if got := a2a.StateOf(typ); got != want {
			t.Errorf("StateOf(%q) = %s, want %s", typ, got, want)
		}
	}
}
