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

// scanEvents reads the worker events of a turn in LLMW_EVENTS published
// after seq `after` (the seq of its last checkpoint, a step boundary where
// no block is open) and returns the last seq and block.abort events for the
// blocks left open by a replica that died mid-step.
func (s *Service) scanEvents(ctx context.Context, session, turnID string, after uint64) (uint64, []events.WorkerBlockAbort, error) {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	st, err := s.js.Stream(ctx, events.StreamEvents)
	if err != nil {
		return after, nil, err
	}
	subj := s.subjects.Events(session, turnID, "*")
	lastMsg, err := st.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return after, nil, nil
	}
	if err != nil {
		return after, nil, err
	}
	oc, err := s.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		return after, nil, err
	}
	it, err := oc.Messages()
	if err != nil {
		return after, nil, err
	}
	defer it.Stop()
	type key struct{ step, index int }
	open := map[key]events.BlockType{}
	last := after
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return last, nil, fmt.Errorf("turn: read events of %s: %w", turnID, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return last, nil, err
		}
		seq, _ := strconv.ParseUint(m.Headers().Get(events.HeaderSeq), 10, 64)
		if seq > last {
			last = seq
		}
		if seq > after {
			var b struct {
				Index     int              `json:"index"`
				BlockType events.BlockType `json:"block_type"`
				Step      int              `json:"step"`
			}
			switch m.Headers().Get(events.HeaderType) {
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
		if md.Sequence.Stream >= lastMsg.Sequence {
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
	return last, aborts, nil
}

// cancelIdle handles a cancel of a turn this replica does not run: a
// paused turn is aborted (its on_abort hooks run), a turn not started yet
// gets an aborted state so that its request does nothing. A running turn
// is its replica's to cancel. Replicas race by revision; one wins.
func (s *Service) cancelIdle(ctx context.Context, id string) {
	st, rev, err := getState(ctx, s.stateKV, id)
	now := time.Now().UTC()
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		tomb := State{Version: StateVersion, Status: StatusAborted, Owner: s.cfg.Instance, Seq: 1,
			Reason: "the turn was cancelled before it started", Code: CodeCancelled, Updated: now}
		b, _ := json.Marshal(&tomb)
		if _, err := s.stateKV.Create(ctx, kvKey(id), b); err != nil {
			return // another replica was first, or the turn just started
		}
		ep := s.pub.Turn(id, "", 0)
		_, _ = ep.Publish(events.ChannelTurn, events.TypeTurnAborted, events.TurnEnded{Reason: tomb.Reason, Code: CodeCancelled})
	case err != nil:
		s.log.Warn("turn: cancel: read checkpoint", "turn_id", id, "err", err)
	case st.Status == StatusPaused && st.Checkpoint != nil:
		reason := "the turn was cancelled while paused: " + errCancelRequested.Error()
		session := ""
		if st.Request != nil {
			session = st.Request.SessionID
		}
		ep := s.pub.Turn(id, session, st.Seq)
		end := *st
		end.Status, end.Owner, end.Reason, end.Code, end.Updated = StatusAborted, s.cfg.Instance, reason, CodeCancelled, now
		end.Checkpoint = nil
		b, _ := json.Marshal(&end)
		if _, err := s.stateKV.Update(ctx, kvKey(id), b, rev); err != nil {
			return // a resume or another replica was first
		}
		cp := st.Checkpoint
		obs := hook.ObserverFuncs{
			Decision: func(d events.HookDecision) { _, _ = ep.Publish(events.ChannelHook, events.TypeHookDecision, d) },
			Message:  func(m events.HookMessage) { _, _ = ep.Publish(events.ChannelHook, events.TypeHookMessage, m) },
		}
		if s.cfg.Hooks != nil {
			s.cfg.Hooks.RunAbort(ctx, &hook.AbortInput{
				Turn:     &hook.Turn{ID: id, SessionID: session, Step: cp.Step, Vars: hook.Variables(cp.Vars), Observer: obs},
				Reason:   reason,
				Messages: cp.Messages,
			})
		}
		_, _ = ep.Publish(events.ChannelTurn, events.TypeTurnAborted, events.TurnEnded{Reason: reason, Code: CodeCancelled})
		end.Seq = ep.Seq()
		if b, err := json.Marshal(&end); err == nil {
			_, _ = s.stateKV.Put(ctx, kvKey(id), b)
		}
	}
}
