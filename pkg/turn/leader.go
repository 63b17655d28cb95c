package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/jsread"
	"github.com/llmworker/llmworker/pkg/events"
)

// readState reads a turn's state and revision from the leader of
// LLMW_TURN_STATE's stream (jsread), for every read a conditional write or
// an answer follows: a claim, a resume, a cancel, the check whether a run
// still owns its turn. getState (kv.Get, a direct get that any replica may
// answer) would give what a lagging replica has: a resume of a paused
// turn rejected as unknown, a claim expecting an old revision that
// conflicts again at every redelivery while the turn's end stays
// unrecorded. A deleted, purged or expired key is
// jetstream.ErrKeyNotFound, as for kv.Get.
func readState(ctx context.Context, nc *nats.Conn, apiPrefix, turnID string) (*State, uint64, error) {
	b, rev, err := leaderValue(ctx, nc, apiPrefix, events.BucketTurnState, "state of", turnID)
	if err != nil {
		return nil, 0, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, rev, fmt.Errorf("turn: state of %s: %w", turnID, err)
	}
	return &st, rev, nil
}

// readSession reads a session's transcript and revision from the leader
// of LLMW_SESSIONS' stream. A turn of the session starts from it, and a
// client that saw the session's previous turn end expects this turn to
// know it: a replica that has not applied that turn's write yet (right
// after it, or after a partition) would answer with the transcript
// before it, and the model would answer without the last exchange.
// A missing key is jetstream.ErrKeyNotFound.
func readSession(ctx context.Context, nc *nats.Conn, apiPrefix, id string) (*Session, uint64, error) {
	b, rev, err := leaderValue(ctx, nc, apiPrefix, events.BucketSessions, "session", id)
	if err != nil {
		return nil, 0, err
	}
	var s Session
	if err := events.UnmarshalWithMessages(b, &s, &s.Messages); err != nil {
		return nil, rev, fmt.Errorf("%w: session %q (key %s of %s, revision %d): %w; start a new session, or delete the key",
			ErrCorruptSession, id, kvKey(id), events.BucketSessions, rev, err)
	}
	return &s, rev, nil
}

// leaderValue is the value and revision of id's key in bucket as the
// leader has it: jetstream.ErrKeyNotFound as it is, any other error
// naming what was read ("state of" the turn, "session") and the bucket.
func leaderValue(ctx context.Context, nc *nats.Conn, apiPrefix, bucket, what, id string) ([]byte, uint64, error) {
	b, rev, err := jsread.KVLast(ctx, nc, apiPrefix, bucket, kvKey(id))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		err = fmt.Errorf("turn: %s %s in bucket %s: %w", what, id, bucket, err)
	}
	return b, rev, err
}

// leaderState is readState on the service's connection.
func (s *Service) leaderState(ctx context.Context, turnID string) (*State, uint64, error) {
	return readState(ctx, s.nc, s.pub.apiPrefix, turnID)
}
