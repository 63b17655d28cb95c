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

	"github.com/llmworker/llmworker/internal/jsread"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/worker"
)

// Status is where a turn stands in its checkpoint.
type Status string

const (
	StatusRunning   Status = "running"
	StatusPaused    Status = "paused"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusAborted   Status = "aborted"
	// StatusCancelled marks a turn id that was cancelled before any turn
	// had it: a submit of the id while the state lasts (Config.CancelTTL)
	// ends at once with llmw.turn.aborted.
	StatusCancelled Status = "cancelled"
)

// Finished reports whether the turn ended (completed, failed or aborted).
func (s Status) Finished() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusAborted
}

// StateVersion is the version of the State format written by this package.
const StateVersion = 1

// State is the value of a turn in KV LLMW_TURN_STATE (key = the turn id):
// the worker's checkpoint plus what the service needs to continue the turn
// on any replica. It is written with the expected revision at every step
// boundary.
type State struct {
	Version int    `json:"version"`
	Status  Status `json:"status"`
	// Owner is the instance that wrote the state last.
	Owner string `json:"owner,omitempty"`
	// Seq is the seq of the last worker event published before this state
	// was written (for a paused turn: of its llmw.turn.paused).
	Seq uint64 `json:"seq"`
	// Request is the turn's request without its messages (they are in the
	// checkpoint): model, system, tools and bounds for the continuation.
	Request *events.TurnRequest `json:"request,omitempty"`
	// RequestDigest is the SHA-256 (hex) of the submit's data: a submit
	// of the same id with the same data is a retried publish and is
	// ignored; one with other data is rejected (turn_exists).
	RequestDigest string `json:"request_digest,omitempty"`
	// SessionPrefix is the number of checkpoint messages that came from
	// the session's earlier transcript.
	SessionPrefix int `json:"session_prefix,omitempty"`
	// Checkpoint is the worker's state (nil once the turn finished).
	Checkpoint *worker.Checkpoint `json:"checkpoint,omitempty"`
	// Reason and Code say why a failed or aborted turn ended.
	Reason  string    `json:"reason,omitempty"`
	Code    string    `json:"code,omitempty"`
	Updated time.Time `json:"updated"`
}

// marshalState encodes a state as json.Marshal would (the checkpoint's
// key comes last): the checkpoint's transcript, written at every step
// boundary and growing with the turn, is written in one pass
// (events.MarshalWithMessages) instead of through encoding/json.
func marshalState(st *State) ([]byte, error) {
	if st.Checkpoint == nil {
		return json.Marshal(st)
	}
	head := *st
	head.Checkpoint = nil
	b, err := json.Marshal(&head)
	if err != nil {
		return nil, err
	}
	cp := *st.Checkpoint
	cp.Messages = nil
	b = append(b[:len(b)-1], `,"checkpoint":`...) // b is {…}, never {}: version is always written
	if b, err = events.AppendWithMessages(b, &cp, st.Checkpoint.Messages); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// Pending returns the tool calls a paused turn waits for decisions on.
func (s *State) Pending() []events.ToolCall {
	if s == nil || s.Checkpoint == nil {
		return nil
	}
	return s.Checkpoint.Awaiting()
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

// LoadState reads a turn's state from KV LLMW_TURN_STATE (for tools such as
// a CLI that lists the pending calls of a paused turn). ok is false when
// there is none. The bucket's stream leader answers, so a state written
// before LoadState was called is the one it returns, on any node of a
// cluster.
func LoadState(ctx context.Context, js jetstream.JetStream, turnID string) (st *State, ok bool, err error) {
	st, _, err = readState(ctx, js.Conn(), jsread.APIPrefix(js), turnID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false, nil
	}
	return st, err == nil, err
}

// Session is the value of a session in KV LLMW_SESSIONS (key = the
// session id): the transcript of its finished turns.
type Session struct {
	SessionID string           `json:"session_id"`
	Messages  []events.Message `json:"messages"`
	// LastTurn is the id of the turn that stored the transcript last.
	LastTurn string    `json:"last_turn,omitempty"`
	Updated  time.Time `json:"updated"`
}

// LoadSession reads a session's transcript; ok is false when there is
// none yet. The bucket's stream leader answers, as for LoadState: a
// transcript stored before LoadSession was called is the one it returns.
func LoadSession(ctx context.Context, js jetstream.JetStream, sessionID string) (s *Session, ok bool, err error) {
	s, _, err = readSession(ctx, js.Conn(), jsread.APIPrefix(js), sessionID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false, nil
	}
	return s, err == nil, err
}

// storeSession appends the messages of a finished turn to its session with
// the expected revision, re-reading on a conflict (another turn of the
// session finished meanwhile): the transcript never loses a turn. It
// reads from the leader (readSession): a lagging replica's old revision
// would only conflict, again at every retry that asked it.
func storeSession(ctx context.Context, nc *nats.Conn, apiPrefix string, kv jetstream.KeyValue, id, turnID string, added []events.Message) error {
	maxPayload := nc.MaxPayload()
	for attempt := 0; ; attempt++ {
		cur, rev, err := readSession(ctx, nc, apiPrefix, id)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			cur, rev = &Session{SessionID: id}, 0
		case errors.Is(err, ErrCorruptSession): // start over (at rev) rather than fail forever
			cur = &Session{SessionID: id}
		case err != nil:
			return fmt.Errorf("turn: read session %s: %w", id, err)
		}
		cur.Messages = append(cur.Messages, added...)
		cur.LastTurn, cur.Updated = turnID, time.Now().UTC()
		head := *cur
		head.Messages = nil
		b, err := events.MarshalWithMessages(&head, cur.Messages)
		if err != nil {
			return fmt.Errorf("turn: encode session %s: %w", id, err)
		}
		if maxPayload > 0 && int64(len(b)) > maxPayload-1024 {
			return fmt.Errorf("%w: the transcript of session %q is %d bytes, more than the %d bytes a session may have (the NATS max payload of %d bytes less 1024 for the message's headers); start a new session",
				ErrTooLarge, id, len(b), maxPayload-1024, maxPayload)
		}
		if rev == 0 {
			_, err = kv.Create(ctx, kvKey(id), b)
		} else {
			_, err = kv.Update(ctx, kvKey(id), b, rev)
		}
		if err == nil {
			return nil
		}
		if !isConflict(err) || attempt >= 20 {
			return fmt.Errorf("turn: store session %s: %w", id, err)
		}
	}
}
