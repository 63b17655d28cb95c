package turn

import "testing"

// A run's phase decides what it may still do and how a request it stops
// early is answered: a hand-off has the request delivered again at once
// (a replica continues the turn), a run that lost the turn leaves the
// request to the replica that owns it, and neither publishes or writes.
func TestPhaseMovesAndAnswers(t *testing.T) {
	cases := []struct {
		name     string
		moves    []runPhase
		want     runPhase
		answer   answer
		silenced bool
	}{
		{"a new run", nil, phaseRunning, leave, false},
		{"a pause stored", []runPhase{phasePausing}, phasePausing, leave, false},
		{"handed off", []runPhase{phaseHandedOff}, phaseHandedOff, redeliver, true},
		{"lost", []runPhase{phaseLost}, phaseLost, leave, true},
		// Stop hands off a run that lost the turn: its request is
		// delivered again at once.
		{"lost, then handed off", []runPhase{phaseLost, phaseHandedOff}, phaseHandedOff, redeliver, true},
		{"a pause stored, then handed off", []runPhase{phasePausing, phaseHandedOff}, phaseHandedOff, redeliver, true},
		// A handed-off run stays so: the turn is to continue elsewhere.
		{"handed off, then lost", []runPhase{phaseHandedOff, phaseLost}, phaseHandedOff, redeliver, true},
		// A run that stored the turn's cancelled end answered the cancel.
		{"cancelled, then lost", []runPhase{phaseCancelled, phaseLost}, phaseCancelled, leave, false},
		{"lost, then cancelled", []runPhase{phaseLost, phaseCancelled}, phaseLost, leave, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var l runLife
			for _, p := range c.moves {
				l.enter(p)
			}
			if got := l.load(); got != c.want {
				t.Fatalf("phase %v, want %v", got, c.want)
			}
			if got := l.load().answer(); got != c.answer {
				t.Errorf("answer %+v, want %+v", got, c.answer)
			}
			if got := l.load().silenced(); got != c.silenced {
				t.Errorf("silenced %v, want %v", got, c.silenced)
			}
		})
	}
}
