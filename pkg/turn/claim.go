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

	"github.com/llmworker/llmworker/pkg/emit"
	"github.com/llmworker/llmworker/pkg/events"
)

// takeOver continues a running turn from its checkpoint: aborts for the
// blocks the previous replica left open, then worker.RunFrom (tool calls
// with stored results are not run again; the interrupted model call is made
// again).
func (s *Service) takeOver(t *turnRun, st *State, rev uint64) answer {
	t.w.rev.Store(rev)
	t.base = State{Version: StateVersion, Request: st.Request, RequestDigest: st.RequestDigest, SessionPrefix: st.SessionPrefix, SessionCompaction: st.SessionCompaction, SubAgents: st.SubAgents, SubAgentCalls: st.SubAgentCalls, Remote: st.Remote}
	if st.Request == nil || st.Checkpoint == nil {
		t.ep = s.turnEvents(t.id, "")
		return s.failRun(t, CodeInternal, fmt.Errorf("the checkpoint of turn %q cannot be continued (no request or worker state)", t.id))
	}
	t.session = st.Request.SessionID
	seqs, err := s.loadCheckpoint(s.root, st)
	if err != nil {
		if transcriptLost(err) {
			t.ep = s.turnEvents(t.id, t.session)
			return s.failRun(t, CodeInternal, err)
		}
		s.log.Warn("turn: read the transcript of an interrupted turn", "turn_id", t.id, "err", err)
		return retry
	}
	t.startFrom(st, seqs)
	sc, err := s.scanEvents(s.root, t.session, t.id, st.Seq)
	if err != nil {
		// Without the stream's position the first publish cannot be
		// fenced right: leave the turn to a later delivery.
		s.log.Warn("turn: scan events of an interrupted turn", "turn_id", t.id, "err", err)
		return retry
	}
	// Claim the checkpoint (one of the replicas a request may reach
	// wins), then the event stream (fences the replica that lost it).
	claim := *st
	claim.Owner, claim.Seq, claim.Updated = s.cfg.Instance, sc.pos.Seq, time.Now().UTC()
	if err := t.writeClaim(&claim); err != nil {
		// A conflict: the replica that claimed the turn runs it.
		return afterWrite(err, leave)
	}
	if a, ok := s.claimEvents(t, st, sc); !ok {
		return a
	}
	if st.Remote != nil {
		return t.runRemote(st.Checkpoint, false)
	}
	tools, err := s.selectTools(s.root, st.Request.Tools)
	if err != nil {
		return s.failRun(t, CodeUnknownTool, err)
	}
	w, err := s.newWorker(t, st.Request, tools)
	if err != nil {
		return s.failRun(t, workerCode(err), err)
	}
	t.noteChildren(st.Checkpoint)
	res, err := w.RunFrom(t.ctx, st.Checkpoint)
	return t.finish(res, err)
}

// emitClaimStarted publishes the claim's llmw.turn.started: resumed,
// unless the turn has no events at all (the run that created its state
// stopped before its start went out, or the create's acknowledgement
// was lost and the create was stored): the turn starts here, and its
// one start not resumed carries its input and parent as a first start
// does.
func (t *turnRun) emitClaimStarted(st *State, sc scanned) {
	started := events.TurnStarted{TurnID: t.id, SessionID: t.session, Model: st.Request.Model, Resumed: sc.pos.StreamSeq != 0}
	if !started.Resumed {
		started = t.withParent(started)
		if cp := st.Checkpoint; cp != nil {
			// The checkpoint the turn was created with: the session's
			// messages from its Base, then the request's.
			started.Input = turnOwn(cp.Messages, cp.Base, st.SessionPrefix)
		}
	}
	_ = t.emitStarted(started)
}

// claimAttempts bounds how often a replica continuing a turn publishes its
// claim again after a stale owner's event got in first.
const claimAttempts = 10

// claimEvents publishes the aborts of the blocks left open and
// llmw.turn.started (resumed), fenced on where the scan found the events
// to end: once stored, every later event of the replica that lost the
// turn is refused. A stale owner that published after the scan gets its
// event in first; the scan is then repeated (new open blocks, results, or
// the end of the turn, if the stale owner finished it) and the claim
// published again. Not ok: the run is over, with answer a.
func (s *Service) claimEvents(t *turnRun, st *State, sc scanned) (a answer, ok bool) {
	for attempt := 1; ; attempt++ {
		if sc.end != nil {
			// The previous owner ended the turn before the claim: record
			// the end and let the request go.
			status, reason, code := StatusCompleted, "", ""
			if sc.end.Type != events.TypeTurnCompleted {
				status = StatusFailed
				if sc.end.Type == events.TypeTurnAborted {
					status = StatusAborted
				}
				if te, err := events.DecodeData[events.TurnEnded](sc.end); err == nil {
					reason, code = te.Reason, te.Code
				}
			}
			t.ep = s.pub.Turn(t.id, t.session, sc.pos)
			return afterWrite(t.writeEndOnce(status, reason, code), ackAnswer), false
		}
		t.ep = s.pub.Turn(t.id, t.session, sc.pos)
		t.obs.published = sc.published
		for _, a := range sc.open {
			_, _ = t.emit(a)
		}
		t.emitClaimStarted(st, sc)
		ctx, cancel := s.flushContext(s.root)
		err := t.ep.Flush(ctx)
		cancel()
		if err == nil {
			t.obs.claimed = true
			return leave, true
		}
		if !errors.Is(err, ErrFenced) || attempt == claimAttempts || !t.owns() {
			t.lost(err)
			return t.end(), false
		}
		s.log.Info("turn: a replica that lost the turn published meanwhile; claiming again", "turn_id", t.id, "attempt", attempt)
		if sc, err = s.scanEvents(s.root, t.session, t.id, st.Seq); err != nil {
			s.log.Warn("turn: scan events of an interrupted turn", "turn_id", t.id, "err", err)
			t.life.enter(phaseLost)
			return retry, false
		}
	}
}

// scanned is what scanEvents found in a turn's events.
type scanned struct {
	pos emit.Position
	// open are block.abort events for the blocks left open by a replica
	// that stopped mid-step.
	open []events.WorkerBlockAbort
	published
	// end is the turn's terminal event, if the turn ended (a replica that
	// had lost the turn finished it before the claim reached the stream).
	end *events.Envelope
}

// published is what a turn's events hold that a replica continuing the
// turn does not publish again.
type published struct {
	// results are the calls whose llmw.tool.result (or tool.started, or
	// tool.cancelled) was published after the checkpoint.
	results, started, cancelled map[string]bool
	// compacted and summaries are the compactions whose
	// llmw.turn.compacted and whose summary's llmw.usage (its
	// compaction field) the turn's events hold, wherever they are: the
	// checkpoint that commits a compaction is stored before either goes
	// out, so they may follow the seq it counts, and a claim moves the
	// state's seq past them.
	compacted, summaries map[string]bool
}

// scanEvents reads the worker events of a turn in LLMW_EVENTS published
// after seq `after` (the seq of its last checkpoint, a step boundary where
// no block is open): where they end, the blocks left open, the tool
// results already published and a terminal event.
func (s *Service) scanEvents(ctx context.Context, session, turnID string, after uint64) (scanned, error) {
	ctx, cancel := kvContext(ctx)
	defer cancel()
	sc := scanned{published: published{results: map[string]bool{}, started: map[string]bool{}, cancelled: map[string]bool{},
		compacted: map[string]bool{}, summaries: map[string]bool{}}}
	pos, err := emit.LastEvent(ctx, s.nc, s.cfg.Prefix, session, turnID)
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
		switch m.Headers().Get(events.HeaderType) {
		case events.TypeTurnCompacted:
			var c struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(m.Data(), &c) == nil && c.ID != "" {
				sc.compacted[c.ID] = true
			}
		case events.TypeUsage:
			var u struct {
				Compaction string `json:"compaction"`
			}
			if json.Unmarshal(m.Data(), &u) == nil && u.Compaction != "" {
				sc.summaries[u.Compaction] = true
			}
		}
		if seq > after {
			var b struct {
				Index     int              `json:"index"`
				BlockType events.BlockType `json:"block_type"`
				Step      int              `json:"step"`
				CallID    string           `json:"call_id"`
			}
			switch typ := m.Headers().Get(events.HeaderType); typ {
			case events.TypeToolResult, events.TypeToolStarted, events.TypeToolCancelled:
				if json.Unmarshal(m.Data(), &b) == nil && b.CallID != "" {
					switch typ {
					case events.TypeToolResult:
						sc.results[b.CallID] = true
					case events.TypeToolStarted:
						sc.started[b.CallID] = true
					default:
						sc.cancelled[b.CallID] = true
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

// writeClaim stores st, a claim of the turn, with the expected revision (queue).
// An error silences the run: a conflict (isConflict) means another
// replica owns the turn; any other error, that the bucket took no write
// for RetryTimeout. The caller answers the request.
func (t *turnRun) writeClaim(st *State) error {
	b, err := marshalState(st)
	if err != nil {
		t.life.enter(phaseLost)
		return err
	}
	return t.queue(func() ([]byte, error) { return b, nil }, 0, false)
}
