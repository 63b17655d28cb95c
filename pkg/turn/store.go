package turn

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/events"
)

// kvTimeout bounds one KV operation of the service.
const kvTimeout = 10 * time.Second

// kvContext bounds one KV operation (or read of a stream's last message)
// made under parent by kvTimeout: every such call of the package takes
// its context from here.
func kvContext(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, kvTimeout)
}

// casState is the one place a turn's state is written (KV
// LLMW_TURN_STATE, key kvKey(id), through casKey): a compare-and-set, created when rev is
// 0, else expecting revision rev, so that of two replicas that read one
// revision only one writes the next; with a per-key TTL when ttl > 0
// (ended turns, see Config.FinishedTTL), so the bucket forgets them. A
// lost race is an error isConflict reports. A run writes through
// turnRun.queue and turnRun.queueEnd (checkpoint.go), one write at a time
// and in order, with turnRun.casRetry's retries.
//
// jetstream.KeyValue.Update takes no TTL: an update with one is the
// publish Update makes ($KV.<bucket>.<key>, expecting the key's last
// revision) with the TTL header added (store_internal_test.go pins
// what the server does with it).
func (s *Service) casState(ctx context.Context, id string, b []byte, rev uint64, ttl time.Duration) (uint64, error) {
	return s.casKey(ctx, kvKey(id), b, rev, ttl)
}

// casKey is casState for a key of the bucket: a turn's (kvKey) or
// its cancel request's (cancelKey).
func (s *Service) casKey(ctx context.Context, key string, b []byte, rev uint64, ttl time.Duration) (uint64, error) {
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

// leaderRead is leaderState within kvTimeout.
func (s *Service) leaderRead(id string) (*State, uint64, error) {
	ctx, cancel := kvContext(s.root)
	defer cancel()
	return s.leaderState(ctx, id)
}

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
	return readState(ctx, s.nc, s.pub.APIPrefix(), turnID)
}

// kvKey maps an id (a NATS subject token) to a KV key: ids made of KV key
// characters are used as they are, others are base64url-encoded behind
// "b64_" (as are ids that start with "b64_" themselves).
func kvKey(id string) string {
	if strings.HasPrefix(id, "b64_") { // would collide with an encoded id
		return "b64_" + base64.RawURLEncoding.EncodeToString([]byte(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '=') {
			return "b64_" + base64.RawURLEncoding.EncodeToString([]byte(id))
		}
	}
	return id
}

// readSession reads a session's transcript and revision from the leader
// of LLMW_SESSIONS' stream. A turn of the session starts from it, and a
// client that saw the session's previous turn end expects this turn to
// know it: a replica that has not applied that turn's write yet (right
// after it, or after a partition) would answer with the transcript
// before it, and the model would answer without the last exchange.
// A missing key is jetstream.ErrKeyNotFound.
func readSession(ctx context.Context, nc *nats.Conn, apiPrefix, id string) (*SessionRecord, uint64, error) {
	b, rev, err := leaderValue(ctx, nc, apiPrefix, events.BucketSessions, "session", id)
	if err != nil {
		return nil, 0, err
	}
	var s SessionRecord
	if err := events.UnmarshalWithMessages(b, &s, &s.Messages); err != nil {
		return nil, rev, fmt.Errorf("%w: session %q (key %s of %s, revision %d): %w; start a new session, or delete the key",
			ErrCorruptSession, id, kvKey(id), events.BucketSessions, rev, err)
	}
	return &s, rev, nil
}
