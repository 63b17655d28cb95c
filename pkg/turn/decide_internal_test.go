package turn

import "testing"

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
		{"resume while the run here ends with a pause waits for it", situation{kind: kindResume, stand: standHerePausing}, actWait},
		{"submit while the run here ends with a pause, other data, is turn_exists", situation{kind: kindSubmit, stand: standHerePausing}, actTurnExists},
		{"resume while the turn runs here is not_paused", situation{kind: kindResume, stand: standHereRunning, redelivered: true}, actNotPaused},
		{"submit with its data while the turn runs here is a duplicate", situation{kind: kindSubmit, stand: standHereRunning, sameData: true, redelivered: true}, actDuplicate},
		{"submit with other data while the turn runs here is turn_exists", situation{kind: kindSubmit, stand: standHereRunning}, actTurnExists},
	} {
		t.Run(row.name, func(t *testing.T) {
			if got := decide(row.sit); got != row.want {
				t.Fatalf("decide(%+v) = %d, want %d", row.sit, got, row.want)
			}
		})
	}
}
