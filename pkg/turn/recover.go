package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// scanned is what scanEvents found in a turn's events.
type scanned struct {
	pos Position
	// open are block.abort events for the blocks left open by a replica
	// that stopped mid-step.
	open []events.WorkerBlockAbort
	// results are the calls whose llmw.tool.result (or tool.started) was
	// published after the checkpoint: the replica continuing the turn
	// does not publish them again.
	results, started map[string]bool
	// end is the turn's terminal event, if the turn ended (a replica that
	// had lost the turn finished it before the claim reached the stream).
	end *events.Envelope
}

// scanEvents reads the worker events of a turn in LLMW_EVENTS published
// after seq `after` (the seq of its last checkpoint, a step boundary where
// no block is open): where they end, the blocks left open, the tool
// results already published and a terminal event.
func (s *Service) scanEvents(ctx context.Context, session, turnID string, after uint64) (scanned, error) {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	sc := scanned{results: map[string]bool{}, started: map[string]bool{}}
	pos, err := LastEvent(ctx, s.nc, s.cfg.Prefix, session, turnID)
	sc.pos = pos
	if err != nil || pos.StreamSeq == 0 {
		return sc, err
	}
	subj := s.subjects.Events(session, turnID, "*")
	oc, err := s.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		return sc, err
	}
	it, err := oc.Messages()
	if err != nil {
		return sc, err
	}
	defer it.Stop()
	type key struct{ step, index int }
	open := map[key]events.BlockType{}
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return sc, fmt.Errorf("turn: read events of %s: %w", turnID, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return sc, err
		}
		seq, _ := strconv.ParseUint(m.Headers().Get(events.HeaderSeq), 10, 64)
		if seq > after {
			var b struct {
				Index     int              `json:"index"`
				BlockType events.BlockType `json:"block_type"`
				Step      int              `json:"step"`
				CallID    string           `json:"call_id"`
			}
			switch typ := m.Headers().Get(events.HeaderType); typ {
			case events.TypeToolResult, events.TypeToolStarted:
				if json.Unmarshal(m.Data(), &b) == nil && b.CallID != "" {
					if typ == events.TypeToolResult {
						sc.results[b.CallID] = true
					} else {
						sc.started[b.CallID] = true
					}
				}
			case events.TypeTurnCompleted, events.TypeTurnFailed, events.TypeTurnAborted:
				if env, err := events.DecodeEnvelope(m.Headers(), m.Data()); err == nil {
					sc.end = env
				}
			case events.TypeBlockStart:
				if json.Unmarshal(m.Data(), &b) == nil {
					open[key{b.Step, b.Index}] = b.BlockType
				}
			case events.TypeBlockStop, events.TypeBlockAbort:
				if json.Unmarshal(m.Data(), &b) == nil {
					delete(open, key{b.Step, b.Index})
				}
			}
		}
		if md.Sequence.Stream >= pos.StreamSeq {
			break
		}
	}
	keys := make([]key, 0, len(open))
	for k := range open {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.step != b.step {
			return a.step - b.step
		}
		return a.index - b.index
	})
	aborts := make([]events.WorkerBlockAbort, len(keys))
	for i, k := range keys {
		aborts[i] = events.WorkerBlockAbort{
			BlockAbort: events.BlockAbort{Index: k.index, BlockType: open[k],
				Reason: "the replica running the turn stopped mid-block; the model call is made again"},
			Step: k.step,
		}
	}
	sc.open = aborts
	return sc, nil
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

// cancelIdle handles a cancel of a turn this replica does not run: a
// paused turn is aborted (its on_abort hooks run). For a turn id with no
// turn the cancel is answered with llmw.turn.rejected (unknown_turn) and
// remembered for Config.CancelTTL, since it may have overtaken its submit
// (cancels are core NATS, submits wait in a stream): that submit then
// ends at once with llmw.turn.aborted. A running turn is its replica's to
// cancel. Replicas race by revision; one wins.
func (s *Service) cancelIdle(ctx context.Context, id string) {
	st, rev, err := s.leaderState(ctx, id)
	now := time.Now().UTC()
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		reason := fmt.Sprintf("no turn %q is running or paused", id)
		if s.cfg.CancelTTL > 0 {
			tomb := State{Version: StateVersion, Status: StatusCancelled, Owner: s.cfg.Instance,
				Reason: "the turn was cancelled before it started", Code: CodeCancelled, Updated: now}
			b, _ := json.Marshal(&tomb)
			if _, err := s.storeState(ctx, id, b, 0, s.cfg.CancelTTL); err != nil {
				return // another replica was first, or the turn just started
			}
			reason += fmt.Sprintf("; a submit of it within %s ends at once with llmw.turn.aborted (the cancel may have overtaken it)", s.cfg.CancelTTL)
		}
		s.rejected(events.TurnRejected{TurnID: id, Request: events.TypeTurnCancel, Code: events.RejectUnknownTurn, Reason: reason})
	case err != nil:
		s.log.Warn("turn: cancel: read checkpoint", "turn_id", id, "err", err)
	case st.Status == StatusPaused && st.Checkpoint != nil:
		s.abortPaused(ctx, id, st, rev, "the turn was cancelled while paused: "+s.cancelCause(id).Error())
	case st.Status == StatusRunning:
		// Its replica runs it and cancels it, unless that replica is gone:
		// then the replica that takes the turn over applies the cancel.
		s.rememberOrphanCancel(id)
	case st.Status == StatusCompleted || st.Status == StatusFailed || st.Status == StatusAborted || st.Status == StatusCancelled:
		// Nothing to cancel, but the canceller waits for an answer: the
		// replica that rewrites the state at its revision gives it (one
		// answer, however many replicas heard the cancel). The rewrite
		// keeps the moment the state expires: a cancel does not hold the
		// id longer.
		b, _ := json.Marshal(st)
		ttl := s.cfg.FinishedTTL
		if st.Status == StatusCancelled {
			ttl = s.cfg.CancelTTL
		}
		if ttl > 0 {
			ttl = max(ttl-now.Sub(st.Updated), time.Second)
		}
		if _, err := s.storeState(ctx, id, b, rev, ttl); err != nil {
			return
		}
		rj := events.TurnRejected{TurnID: id, Request: events.TypeTurnCancel, Code: events.RejectTurnEnded, Status: string(st.Status),
			Reason: fmt.Sprintf("turn %q already ended (%s): there is nothing to cancel", id, st.Status)}
		if st.Status == StatusCancelled {
			rj.Code, rj.Status, rj.Reason = events.RejectUnknownTurn, "", fmt.Sprintf("no turn %q is running or paused; it was already cancelled before it started", id)
		}
		s.rejected(rj)
	}
}

// abortPaused ends a paused turn with llmw.turn.aborted (code cancelled).
// The aborted state is written first, at revision rev, so that a resume
// or another replica that was first wins; it keeps the checkpoint until
// the event is stored. Then the turn's on_abort hooks run and the event is
// published. Once it is stored the checkpoint goes; when it cannot be
// stored the paused state is written back, so that the state never says
// aborted without the event and a later cancel or resume finds the turn
// as it was.
func (s *Service) abortPaused(ctx context.Context, id string, st *State, rev uint64, reason string) {
	now := time.Now().UTC()
	session := ""
	if st.Request != nil {
		session = st.Request.SessionID
	}
	ep := s.turnEvents(id, session)
	end := *st
	end.Status, end.Owner, end.Reason, end.Code, end.Updated = StatusAborted, s.cfg.Instance, reason, CodeCancelled, now
	b, err := marshalState(&end)
	if err != nil {
		return
	}
	if rev, err = s.storeState(ctx, id, b, rev, s.cfg.FinishedTTL); err != nil {
		return // a resume or another replica was first
	}
	cp := st.Checkpoint
	obs := hook.ObserverFuncs{
		Decision: func(d events.HookDecision) { _, _ = ep.Publish(d) },
		Message:  func(m events.HookMessage) { _, _ = ep.Publish(m) },
	}
	if s.cfg.Hooks != nil {
		s.cfg.Hooks.RunAbort(ctx, &hook.AbortInput{
			Turn:     &hook.Turn{ID: id, SessionID: session, Step: cp.Step, Vars: hook.Variables(cp.Vars), Observer: obs},
			Reason:   reason,
			Messages: cp.Messages,
		})
	}
	_, _ = ep.Publish(events.TurnAborted{Reason: reason, Code: CodeCancelled})
	if err := s.flush(ep); err != nil {
		s.log.Warn("turn: cancel: llmw.turn.aborted not stored; the turn stays paused", "turn_id", id, "err", err)
		if b, err := marshalState(st); err == nil {
			_, _ = s.storeState(ctx, id, b, rev, 0)
		}
		return
	}
	end.Seq, end.Checkpoint = ep.Seq(), nil
	if b, err := json.Marshal(&end); err == nil {
		_, _ = s.storeState(ctx, id, b, rev, s.cfg.FinishedTTL)
	}
}
