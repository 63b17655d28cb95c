package turn

import (
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/worker"
)

// Each row is one situation a turn request can meet and what the service
// does then (docs/protocol.md §5, "Answers").
func TestDecide(t *testing.T) {
	for _, row := range []struct {
		name string
		sit  situation
		want action
	}{
		{"submit of a new id starts the turn", situation{kind: kindSubmit, stand: standNone}, actStart},
		{"resume of an id with no turn is unknown_turn", situation{kind: kindResume, stand: standNone}, actUnknownTurn},
		{"submit of an id cancelled before it started ends at once", situation{kind: kindSubmit, stand: standCancelled}, actAbortCancelled},
		{"resume of an id cancelled before it started is unknown_turn", situation{kind: kindResume, stand: standCancelled}, actUnknownTurn},
		{"resume of a paused turn resumes it", situation{kind: kindResume, stand: standPaused}, actResume},
		{"redelivered resume of a paused turn resumes it", situation{kind: kindResume, stand: standPaused, redelivered: true}, actResume},
		{"submit of a paused turn with its data is a duplicate", situation{kind: kindSubmit, stand: standPaused, sameData: true}, actDuplicate},
		{"submit of a paused turn with other data is turn_exists", situation{kind: kindSubmit, stand: standPaused}, actTurnExists},
		{"first delivery of a submit of a running turn with its data is a duplicate", situation{kind: kindSubmit, stand: standRunning, sameData: true}, actDuplicate},
		{"first delivery of a submit of a running turn with other data is turn_exists", situation{kind: kindSubmit, stand: standRunning}, actTurnExists},
		{"first delivery of a resume of a running turn is not_paused", situation{kind: kindResume, stand: standRunning}, actNotPaused},
		{"redelivered submit of a running turn continues it", situation{kind: kindSubmit, stand: standRunning, redelivered: true, sameData: true}, actRecover},
		{"redelivered resume of a running turn continues it", situation{kind: kindResume, stand: standRunning, redelivered: true}, actRecover},
		{"submit of an ended turn with its data is a duplicate", situation{kind: kindSubmit, stand: standEnded, sameData: true}, actDuplicate},
		{"redelivered submit of an ended turn with its data is a duplicate", situation{kind: kindSubmit, stand: standEnded, sameData: true, redelivered: true}, actDuplicate},
		{"submit of an ended turn with other data is turn_exists", situation{kind: kindSubmit, stand: standEnded}, actTurnExists},
		{"resume of an ended turn is not_paused", situation{kind: kindResume, stand: standEnded}, actNotPaused},
		{"the message a run here has, delivered again, is left to it", situation{kind: kindSubmit, stand: standHereSameMsg, redelivered: true}, actLeave},
		{"redelivered submit while the run here decides waits for its decision", situation{kind: kindSubmit, stand: standHereDeciding, redelivered: true, sameData: true}, actWait},
		{"submit while the run here decides waits for its decision", situation{kind: kindSubmit, stand: standHereDeciding, sameData: true}, actWait},
		{"resume while the run here decides waits for its decision", situation{kind: kindResume, stand: standHereDeciding}, actWait},
		{"resume while the run here ends with a pause waits for it", situation{kind: kindResume, stand: standHerePausing}, actWait},
		{"submit while the run here ends with a pause, other data, is turn_exists", situation{kind: kindSubmit, stand: standHerePausing}, actTurnExists},
		{"submit while the run here ends with a pause, its data, is a duplicate", situation{kind: kindSubmit, stand: standHerePausing, sameData: true}, actDuplicate},
		{"resume while the turn runs here is not_paused", situation{kind: kindResume, stand: standHereRunning, redelivered: true}, actNotPaused},
		{"submit with its data while the turn runs here is a duplicate", situation{kind: kindSubmit, stand: standHereRunning, sameData: true, redelivered: true}, actDuplicate},
		{"submit with other data while the turn runs here is turn_exists", situation{kind: kindSubmit, stand: standHereRunning}, actTurnExists},
		{"submit with other data while the run here ends waits for its end", situation{kind: kindSubmit, stand: standHereEnding}, actWait},
		{"submit with its data while the run here ends waits for its end", situation{kind: kindSubmit, stand: standHereEnding, sameData: true}, actWait},
		{"resume while the run here ends waits for its end", situation{kind: kindResume, stand: standHereEnding}, actWait},
	} {
		t.Run(row.name, func(t *testing.T) {
			if got := decide(row.sit); got != row.want {
				t.Fatalf("decide(%+v) = %d, want %d", row.sit, got, row.want)
			}
		})
	}
}

// Where a turn stands by each status its state can have.
func TestStandingOf(t *testing.T) {
	for st, want := range map[Status]standing{
		StatusRunning:   standRunning,
		StatusPaused:    standPaused,
		StatusCancelled: standCancelled,
		StatusCompleted: standEnded,
		StatusFailed:    standEnded,
		StatusAborted:   standEnded,
	} {
		if got := standingOf(st); got != want {
			t.Errorf("standingOf(%s) = %d, want %d", st, got, want)
		}
	}
}

// A resume is checked against the pause before the turn is claimed.
func TestCheckResume(t *testing.T) {
	toolPause := &State{Checkpoint: &worker.Checkpoint{
		Pending: []worker.PendingCall{
			{Call: events.ToolCall{ID: "call_1", Name: "a"}, State: worker.CallPaused},
			{Call: events.ToolCall{ID: "call_2", Name: "b"}, State: worker.CallPaused},
		},
		Pause: &worker.Pause{Event: events.HookBeforeToolCall},
	}}
	endPause := &State{Checkpoint: &worker.Checkpoint{Pause: &worker.Pause{Event: events.HookOnTurnEnd}}}
	approve := events.Decision{Kind: events.DecisionApprove}
	for _, row := range []struct {
		name      string
		st        *State
		decisions map[string]events.Decision
		// want is what the error names ("" for none).
		want string
	}{
		{"a decision for each waiting call", toolPause, map[string]events.Decision{"call_1": approve, "call_2": {Kind: events.DecisionDeny}}, ""},
		{"a decision for some of the waiting calls", toolPause, map[string]events.Decision{"call_2": approve}, ""},
		{"no decision while calls wait", toolPause, nil, "call_1, call_2"},
		{"a decision for a call that does not wait", toolPause, map[string]events.Decision{"call_1": approve, "call_9": approve}, `"call_9"`},
		{"a decision of no known kind", toolPause, map[string]events.Decision{"call_1": {Kind: "maybe"}}, `"maybe"`},
		{"no decision for a turn paused at on_turn_end", endPause, nil, ""},
		{"decisions for a turn paused at on_turn_end", endPause, map[string]events.Decision{"call_1": approve}, "on_turn_end"},
	} {
		t.Run(row.name, func(t *testing.T) {
			err := checkResume(row.st, &events.ResumeRequest{TurnID: "t", Decisions: row.decisions})
			switch {
			case row.want == "" && err != nil:
				t.Fatalf("checkResume = %v, want nil", err)
			case row.want != "" && (err == nil || !strings.Contains(err.Error(), row.want)):
				t.Fatalf("checkResume = %v, want an error naming %s", err, row.want)
			}
		})
	}
}
