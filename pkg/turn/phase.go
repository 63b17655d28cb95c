package turn

import (
	"sync"
	"sync/atomic"
)

// runPhase is where a run stands in its life. Every run starts running;
// the moves between phases are phaseMoves' and are made by turnRun.enter
// alone, so a phase says what the run may do (publish, write) and what
// answer a run that stops early gives (phase.answer).
type runPhase uint32

const (
	// phaseRunning: the run owns the turn, publishes its events and
	// writes its state.
	phaseRunning runPhase = iota
	// phasePausing: the paused state is stored; the run is ending (a
	// resume that finds it waits for it, decide's standHerePausing).
	phasePausing
	// phaseCancelled: the run stored the turn's end as cancelled, which
	// answers a cancel that reached it (unregister settles one that did
	// not end the turn).
	phaseCancelled
	// phaseLost: another replica owns the turn. The run publishes and
	// writes nothing more, and leaves the request to that replica.
	phaseLost
	// phaseHandedOff: the run publishes and writes nothing more, and the
	// request is negatively acknowledged so that a replica continues the
	// turn from its checkpoint at once (a drain, Stop, a bucket or stream
	// that took no write in time).
	phaseHandedOff
)

// phaseMoves is the table of the moves a run makes: from a phase, the
// phases it may enter. A lost run is handed off still by Stop; a handed
// off run and one that stored its cancelled end stay so.
var phaseMoves = [...][]runPhase{
	phaseRunning:   {phasePausing, phaseCancelled, phaseLost, phaseHandedOff},
	phasePausing:   {phaseLost, phaseHandedOff},
	phaseCancelled: nil,
	phaseLost:      {phaseHandedOff},
	phaseHandedOff: nil,
}

// runLife is a run's life: its phase; done, closed when the run stops
// running the turn here (unregister); decided, closed when process
// chose to run the turn (start, continue or end it) or the run stops
// (decide once, unregister), so that a request that found the run
// still reading the state waits for that alone; cancelRequested, set when
// P.turn.cancel arrived while the run was registered (guarded by
// Service.mu); and ending, set when the run publishes the turn's
// terminal event: its state says running until the end is written, one
// write later, so a request that finds the run ending waits for it
// (standHereEnding) and is answered from the state it leaves.
type runLife struct {
	p               atomic.Uint32
	done            chan struct{}
	decided         chan struct{}
	decideOnce      sync.Once
	cancelRequested bool
	ending          atomic.Bool
}

func newRunLife() runLife {
	return runLife{done: make(chan struct{}), decided: make(chan struct{})}
}

func (s *runLife) load() runPhase { return runPhase(s.p.Load()) }

// decide closes decided, once.
func (s *runLife) decide() { s.decideOnce.Do(func() { close(s.decided) }) }

// deciding says the run has not decided yet what to do with its request.
func (s *runLife) deciding() bool {
	select {
	case <-s.decided:
		return false
	default:
		return true
	}
}

// enter moves the run to phase to, if the table allows it from the phase
// it is in, and says whether it did.
func (s *runLife) enter(to runPhase) bool {
	for {
		from := s.load()
		allowed := false
		for _, p := range phaseMoves[from] {
			allowed = allowed || p == to
		}
		if !allowed {
			return false
		}
		if s.p.CompareAndSwap(uint32(from), uint32(to)) {
			return true
		}
	}
}

// silenced says the run must publish and write nothing more.
func (p runPhase) silenced() bool { return p == phaseLost || p == phaseHandedOff }

// answer is the request's answer when a run stops early in phase p (its
// events or state could not be stored, or it was handed off): a
// negative acknowledgement when the turn is to continue elsewhere at
// once, else leave.
func (p runPhase) answer() answer {
	if p == phaseHandedOff {
		return redeliver
	}
	return leave
}

func (p runPhase) String() string {
	switch p {
	case phaseRunning:
		return "running"
	case phasePausing:
		return "pausing"
	case phaseCancelled:
		return "cancelled"
	case phaseLost:
		return "lost"
	case phaseHandedOff:
		return "handed off"
	}
	return "unknown"
}
