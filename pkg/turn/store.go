package turn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/jsread"
	"github.com/llmworker/llmworker/pkg/events"
)

// storeState is the one place a turn's state is written (KV
// LLMW_TURN_STATE, key kvKey(id), through storeKey): a compare-and-set, created when rev is
// 0, else expecting revision rev, so that of two replicas that read one
// revision only one writes the next; with a per-key TTL when ttl > 0
// (ended turns, see Config.FinishedTTL), so the bucket forgets them. A
// lost race is an error isConflict reports. A run writes through
// turnRun.put and turnRun.putEnd (checkpoint.go), one write at a time
// and in order, with turnRun.update's retries.
//
// jetstream.KeyValue.Update takes no TTL: an update with one is the
// publish Update makes ($KV.<bucket>.<key>, expecting the key's last
// revision) with the TTL header added (store_internal_test.go pins
// what the server does with it).
func (s *Service) storeState(ctx context.Context, id string, b []byte, rev uint64, ttl time.Duration) (uint64, error) {
	return s.storeKey(ctx, kvKey(id), b, rev, ttl)
}

// storeKey is storeState for a key of the bucket: a turn's (kvKey) or
// its cancel request's (cancelKey).
func (s *Service) storeKey(ctx context.Context, key string, b []byte, rev uint64, ttl time.Duration) (uint64, error) {
	if ttl <= 0 {
		if rev == 0 {
			return s.stateKV.Create(ctx, key, b)
		}
		return s.stateKV.Update(ctx, key, b, rev)
	}
	if rev == 0 {
		return s.stateKV.Create(ctx, key, b, jetstream.KeyTTL(ttl))
	}
	m := &nats.Msg{Subject: "$KV." + events.BucketTurnState + "." + key, Data: b}
	ack, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(ttl))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// isConflict reports a KV revision mismatch (wrong last sequence) or a
// create of an existing key.
func isConflict(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// getState reads a turn's state with a direct get, which any replica of
// the bucket's stream may answer (leaderState reads from the leader).
func getState(ctx context.Context, kv jetstream.KeyValue, turnID string) (*State, uint64, error) {
	e, err := kv.Get(ctx, kvKey(turnID))
	if err != nil {
		return nil, 0, err
	}
	var st State
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return nil, e.Revision(), fmt.Errorf("turn: state of %s: %w", turnID, err)
	}
	return &st, e.Revision(), nil
}

// update writes a state of the turn with the expected revision t.rev and
// returns the new revision. Failures that may pass (a timeout while the
// bucket elects a leader, no responders) are retried for the publisher's
// RetryTimeout; a revision conflict after such a failure is checked
// against the stored value, since the earlier attempt may have been
// stored with its acknowledgement lost.
func (t *turnRun) update(b []byte, ttl time.Duration) (uint64, error) {
	deadline := time.Now().Add(t.s.pub.retry)
	backoff, retried := 50*time.Millisecond, false
	for {
		kctx, cancel := context.WithTimeout(t.s.root, kvTimeout)
		rev, err := t.s.storeState(kctx, t.id, b, t.rev.Load(), ttl)
		cancel()
		if err == nil {
			return rev, nil
		}
		if isConflict(err) {
			if retried {
				gctx, cancel := context.WithTimeout(t.s.root, kvTimeout)
				cur, rev, gerr := jsread.KVLast(gctx, t.s.nc, t.s.pub.apiPrefix, events.BucketTurnState, kvKey(t.id))
				cancel()
				if gerr == nil && bytes.Equal(cur, b) {
					return rev, nil
				}
			}
			return 0, err
		}
		if t.s.root.Err() != nil || time.Now().Add(backoff).After(deadline) {
			return 0, err
		}
		retried = true
		t.s.log.Warn("turn: write checkpoint; retrying", "turn_id", t.id, "err", err)
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// write stores st, a claim of the turn, with the expected revision (put).
// An error silences the run: a conflict (isConflict) means another
// replica owns the turn; any other error, that the bucket took no write
// for RetryTimeout. The caller answers the request.
func (t *turnRun) write(st *State) error {
	b, err := marshalState(st)
	if err != nil {
		t.silenced.Store(true)
		return err
	}
	return t.put(b, 0, false)
}
