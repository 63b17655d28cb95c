package turn

// requestKind is what a turn request asks for.
type requestKind uint8

const (
	kindSubmit requestKind = iota
	kindResume
)

// standing is where the turn a request names stands: in this replica
// (a run of it here) or else in its state.
type standing uint8

const (
	standNone      standing = iota // no state: the id has no turn
	standCancelled                 // cancelled before it started (StatusCancelled)
	standRunning                   // the state says running
	standPaused                    // the state says paused
	standEnded                     // completed, failed or aborted
	// A run of the turn on this replica: the request's own message
	// delivered again, a run that has not decided yet what to do with
	// its own request (it reads the state, and may run the turn or only
	// answer its request), the run finishing a pause (the paused state
	// is written, the run not over yet), the run ending (its terminal
	// event published, its end not written yet), or running.
	standHereSameMsg
	standHereDeciding
	standHerePausing
	standHereEnding
	standHereRunning
)

// action is what the service does with a request.
type action uint8

const (
	actStart          action = iota // run a new turn
	actResume                       // continue the paused turn with the resume's decisions
	actRecover                      // continue the running turn from its checkpoint: its replica died or stopped
	actAbortCancelled               // end the turn at once with llmw.turn.aborted
	actDuplicate                    // acknowledge: the submit of the turn again, whose events answer it
	actLeave                        // give no answer: the run that has the message answers it
	actWait                         // wait for the run here to decide (deciding) or to end, then look again
	actUnknownTurn                  // reject: unknown_turn
	actNotPaused                    // reject: not_paused
	actTurnExists                   // reject: turn_exists
)

// situation is what decide decides on.
type situation struct {
	kind  requestKind
	stand standing
	// redelivered: the request was delivered before (its replica died or
	// stopped before answering it).
	redelivered bool
	// sameData: a submit with the data of the turn's submit.
	sameData bool
}

// decide is the model of a turn request's life: what the service does
// with a request in a situation. A run here answers for the turn on this
// replica, without a look at the state; otherwise the state decides: a
// running turn is continued only by a redelivered request (a first
// delivery is another request for a turn that runs elsewhere, and taking
// it over would only repeat its work).
func decide(s situation) action {
	switch s.stand {
	case standHereSameMsg:
		return actLeave
	case standHereDeciding:
		// Which of the two requests continues the turn is the state's to
		// say once the run here decided: a redelivered request answered
		// as the duplicate of one that only answers itself would leave
		// the turn to no request at all.
		return actWait
	case standHerePausing:
		if s.kind == kindResume {
			return actWait
		}
		return existing(s)
	case standHereEnding:
		// A client that saw the end and sends the id again is answered
		// with the ended status, which the run writes next.
		return actWait
	case standHereRunning:
		return existing(s)
	case standNone:
		if s.kind == kindResume {
			return actUnknownTurn
		}
		return actStart
	case standCancelled:
		if s.kind == kindResume {
			return actUnknownTurn
		}
		return actAbortCancelled
	case standPaused:
		if s.kind == kindResume {
			return actResume
		}
		return existing(s)
	case standRunning:
		if s.redelivered {
			return actRecover
		}
		return existing(s)
	}
	return existing(s) // standEnded
}

// existing is the answer to a request for a turn that exists and that the
// request does not run.
func existing(s situation) action {
	switch {
	case s.kind == kindResume:
		return actNotPaused
	case s.sameData:
		return actDuplicate
	}
	return actTurnExists
}

// standingOf is where a turn stands by its state's status.
func standingOf(st Status) standing {
	switch st {
	case StatusCancelled:
		return standCancelled
	case StatusPaused:
		return standPaused
	case StatusRunning:
		return standRunning
	}
	return standEnded
}
