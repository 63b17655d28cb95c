package turn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/fence"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// process dispatches a decoded request and returns its answer: decide
// says what to do in the situation a run of the turn here, or else the
// turn's state, makes. The run it starts (turnRun) holds the request
// until it ends, and its functions return the answer the request gets.
func (s *Service) process(m *request, env *events.Envelope, submit *events.TurnRequest, resume *events.ResumeRequest, dg string) answer {
	sit := situation{kind: kindSubmit}
	id := ""
	if submit != nil {
		id = submit.TurnID
	} else {
		sit.kind, id = kindResume, resume.TurnID
	}
	if md, err := m.ack.Metadata(); err == nil {
		sit.redelivered = md.NumDelivered > 1
	}
	// The request's trace context (telemetry.Extract) parents the turn's
	// spans; a continued turn's checkpoint keeps it (worker.Checkpoint).
	ctx, cancel := context.WithCancelCause(telemetry.Extract(s.root, env))
	t := &turnRun{s: s, id: id, msg: m, cancelF: cancel, done: make(chan struct{})}
	// Remote tool calls and hook requests go out only once the turn's
	// events are stored, fenced: proof that the turn is still this run's.
	t.ctx = fence.With(ctx, func(context.Context) error { return t.fence() })
	for {
		here := s.register(t)
		if here == nil {
			break
		}
		sit.stand = here.standFor(m)
		act := decide(sit)
		if act == actWait {
			<-here.done
			continue
		}
		cancel(nil)
		if act == actLeave {
			return leave
		}
		st, _, err := s.leaderRead(id)
		if err != nil {
			return nakAfter(time.Second)
		}
		sit.sameData = dg != "" && dg == st.RequestDigest
		return s.answerExisting(id, st, decide(sit))
	}
	defer s.unregister(t)

	for attempt := 0; ; attempt++ {
		st, rev, err := s.dispatchState(id, sit.kind == kindSubmit && attempt == 0)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			st, sit.stand = nil, standNone
		case err != nil:
			s.log.Warn("turn: read checkpoint", "turn_id", id, "err", err)
			return nakAfter(time.Second)
		default:
			sit.stand, sit.sameData = standingOf(st.Status), dg != "" && dg == st.RequestDigest
		}
		switch act := decide(sit); act {
		case actStart:
			a, again := s.fresh(t, submit, dg)
			if again && attempt < 3 {
				continue // another replica created the turn meanwhile
			}
			return a
		case actResume:
			return s.resume(t, st, rev, resume)
		case actRecover:
			telemetry.RecordRedelivery(t.ctx, "turn", "")
			if s.takeCancelRequest(id) {
				// Cancelled while no replica ran it: the turn ends as
				// soon as this run continues it.
				s.cancelHere(id)
			}
			return s.recover(t, st, rev)
		case actAbortCancelled:
			return s.abortCancelled(t, submit, rev, dg)
		default:
			return s.answerExisting(id, st, act)
		}
	}
}

// register makes t the running turn of its id, or returns the run of the
// id this replica has already.
func (s *Service) register(t *turnRun) *turnRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	if here := s.running[t.id]; here != nil {
		return here
	}
	s.running[t.id] = t
	return nil
}

// standFor is where the turn stands for a request m that finds this run
// of it here.
func (t *turnRun) standFor(m *request) standing {
	switch {
	case sameMsg(t.currentMsg(), m):
		return standHereSameMsg
	case t.pausing.Load():
		return standHerePausing
	}
	return standHereRunning
}

// sameMsg reports whether a and b are deliveries of one stream message.
func sameMsg(a, b *request) bool {
	if a == nil || b == nil {
		return false
	}
	ma, err1 := a.ack.Metadata()
	mb, err2 := b.ack.Metadata()
	return err1 == nil && err2 == nil && ma.Sequence.Stream == mb.Sequence.Stream
}

// leaderRead is leaderState within kvTimeout.
func (s *Service) leaderRead(id string) (*State, uint64, error) {
	ctx, cancel := context.WithTimeout(s.root, kvTimeout)
	defer cancel()
	return s.leaderState(ctx, id)
}

// answerExisting is the answer to a request the service does not run,
// act's: a rejection (unknown_turn, not_paused, turn_exists), or for a
// submit with the same data as the turn's (a retried publish, a
// redelivery) an acknowledgement without an answer: the turn's events
// answer it. st is the turn's state (nil when it has none).
func (s *Service) answerExisting(id string, st *State, act action) answer {
	switch act {
	case actUnknownTurn:
		why := "it never started, or its state expired"
		req := events.TypeTurnResume
		if st != nil {
			why = "it was cancelled before it started"
		}
		return s.reject(events.TurnRejected{TurnID: id, Request: req, Code: events.RejectUnknownTurn,
			Reason: fmt.Sprintf("there is no turn %q to resume (%s)", id, why)})
	case actNotPaused:
		return s.reject(events.TurnRejected{TurnID: id, Request: events.TypeTurnResume, Code: events.RejectNotPaused, Status: string(st.Status),
			Reason: fmt.Sprintf("turn %q is %s, not paused: a resume applies to a paused turn once (a resume sent twice finds it running or ended)", id, st.Status)})
	case actDuplicate:
		return ackAnswer
	default:
		reason := fmt.Sprintf("turn %q exists (%s) and was submitted with other data: a turn id names one turn, so choose a new id", id, st.Status)
		if st.Status.Finished() && s.cfg.FinishedTTL > 0 {
			reason += fmt.Sprintf(" (the id is free again %s after the turn ended)", s.cfg.FinishedTTL)
		}
		return s.reject(events.TurnRejected{TurnID: id, Request: events.TypeTurnSubmit, Code: events.RejectTurnExists, Status: string(st.Status), Reason: reason})
	}
}

// turnEvents returns the EventPublisher of a turn positioned where its
// events in LLMW_EVENTS end (a new turn's when they cannot be read: its
// first publish is then refused if the turn has events).
func (s *Service) turnEvents(turnID, sessionID string) *EventPublisher {
	ctx, cancel := context.WithTimeout(s.root, kvTimeout)
	defer cancel()
	pos, err := LastEvent(ctx, s.nc, s.cfg.Prefix, sessionID, turnID)
	if err != nil {
		s.log.Warn("turn: read the last event of a turn", "turn_id", turnID, "err", err)
	}
	return s.pub.Turn(turnID, sessionID, pos)
}

// flush waits for a publisher's events to be stored.
func (s *Service) flush(ep *EventPublisher) error {
	ctx, cancel := context.WithTimeout(s.root, s.pub.retry+kvTimeout)
	defer cancel()
	return ep.Flush(ctx)
}
