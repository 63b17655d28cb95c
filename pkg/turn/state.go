package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/transcript"
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
	// SessionPrefix is the length of the session's transcript the turn
	// started from: positions [0, SessionPrefix) are the session's, the
	// turn's own follow. The checkpoint holds those from its Base on.
	SessionPrefix int `json:"session_prefix,omitempty"`
	// SessionCompaction is the session's compaction setting when the
	// turn started (SessionRecord.CompactionConfig): the turn compacts
	// with the service's default, then this, then the request's.
	SessionCompaction *events.CompactionConfig `json:"session_compaction,omitempty"`
	// SubAgents are the sub-agents of the turn's agent, NAME@REV as they
	// were when the turn started: the tools its model is offered
	// whatever the registry holds later (children.go).
	SubAgents []string `json:"sub_agents,omitempty"`
	// Children are the child turns the checkpoint's calls wait for
	// (children.go): a cancel of the turn cancels them.
	Children []ChildRef `json:"children,omitempty"`
	// SubAgentCalls numbers the turn's sub-agent calls by call id, from
	// 1, in the order they came (children.go): Config.MaxChildren counts
	// them, those a compaction took out of the transcript too.
	SubAgentCalls map[string]int `json:"sub_agent_calls,omitempty"`
	// Remote is the A2A task of a turn of a remote agent (remote.go),
	// which runs it instead of the model loop.
	Remote *RemoteRun `json:"remote,omitempty"`
	// Checkpoint is the worker's state (nil once the turn finished). Its
	// messages are [] when Transcript names them.
	Checkpoint *worker.Checkpoint `json:"checkpoint,omitempty"`
	// Transcript is where the checkpoint's messages are stored
	// (LLMW_TRANSCRIPTS); absent in the inline format, whose checkpoint
	// holds them.
	Transcript *StateTranscript `json:"transcript,omitempty"`
	// Reason and Code say why a failed or aborted turn ended.
	Reason  string    `json:"reason,omitempty"`
	Code    string    `json:"code,omitempty"`
	Updated time.Time `json:"updated"`
}

// marshalState encodes a state as json.Marshal would. A state with
// Transcript has its checkpoint's messages in LLMW_TRANSCRIPTS and is
// written with "messages": []. One in the inline format (a state read
// from the inline format and claimed, before the run's first checkpoint
// stores its messages) writes the checkpoint's messages in one pass
// (events.AppendWithMessages) instead of through encoding/json.
func marshalState(st *State) ([]byte, error) {
	if st.Checkpoint == nil {
		return json.Marshal(st)
	}
	if st.Transcript != nil {
		head := *st
		cp := *st.Checkpoint
		cp.Messages = []events.Message{}
		head.Checkpoint = &cp
		return json.Marshal(&head)
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

// LoadState reads a turn's state from KV LLMW_TURN_STATE (for tools such as
// a CLI that lists the pending calls of a paused turn). ok is false when
// there is none. The bucket's stream leader answers, so a state written
// before LoadState was called is the one it returns, on any node of a
// cluster. The checkpoint's messages are [] when st.Transcript names
// them in LLMW_TRANSCRIPTS (pkg/transcript reads them).
func LoadState(ctx context.Context, js jetstream.JetStream, turnID string) (st *State, ok bool, err error) {
	st, _, err = readState(ctx, js.Conn(), jsread.APIPrefix(js), turnID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false, nil
	}
	return st, err == nil, err
}

// Session is a session's transcript as LoadSession returns it: every
// message of its finished turns, and where the transcript stands in
// LLMW_TRANSCRIPTS.
type Session struct {
	SessionID string           `json:"session_id"`
	Messages  []events.Message `json:"messages"`
	// Transcript is the transcript's length and the stream sequence of
	// its last item on P.transcript.session.<key> (Len counts the
	// messages of a record in today's inline format too, Seq is 0 then).
	Transcript transcript.Ref `json:"transcript"`
	// Compaction is the session's active compaction: what the model of
	// its next turn reads instead of positions [0, Compaction.To).
	Compaction *events.Compaction `json:"compaction,omitempty"`
	// CompactionConfig is the session's compaction setting, which its
	// turns merge over the service's default.
	CompactionConfig *events.CompactionConfig `json:"compaction_config,omitempty"`
	// LastTurn is the id of the turn that stored the transcript last.
	LastTurn string    `json:"last_turn,omitempty"`
	Updated  time.Time `json:"updated"`
}

// SessionRecord is the value of a session in KV LLMW_SESSIONS (key = the
// session id's kvKey): where its transcript stands in LLMW_TRANSCRIPTS,
// not the messages, so that it stays a few hundred bytes however long
// the session runs. A record with Messages (and no Transcript) is in the
// inline format, which is read as it is and moved to the stream by the
// session's next turn (storeSession).
type SessionRecord struct {
	SessionID string `json:"session_id"`
	// Messages is the whole transcript of a record in the inline format;
	// empty in a record with Transcript.
	Messages []events.Message `json:"messages,omitempty"`
	// Transcript is the session's transcript on
	// P.transcript.session.<key>.
	Transcript *transcript.Ref `json:"transcript,omitempty"`
	// Compaction is the session's active compaction, the final one of
	// the turn that stored it: the session's next turn starts from it
	// and reads only the originals from Compaction.To on.
	Compaction *events.Compaction `json:"compaction,omitempty"`
	// CompactionStart is a stream sequence at or before the first
	// message of item Compaction.To on the session's subject, where a
	// turn's read of the originals from Compaction.To on begins (0: the
	// subject's first message).
	CompactionStart uint64 `json:"compaction_start,omitempty"`
	// CompactionConfig is the session's compaction setting: the
	// requests of its turns that set compaction merged in order
	// (events.CompactionConfig.Merge). A turn of the session compacts
	// with the service's default, then this, then its request's.
	CompactionConfig *events.CompactionConfig `json:"compaction_config,omitempty"`
	// LastTurn is the id of the turn that stored the transcript last.
	LastTurn string    `json:"last_turn,omitempty"`
	Updated  time.Time `json:"updated"`
}

// ref is where the record's transcript stands in the stream (zero for
// the inline format, whose messages are not there).
func (r *SessionRecord) ref() transcript.Ref {
	if r.Transcript == nil {
		return transcript.Ref{}
	}
	return *r.Transcript
}

// LoadSession reads a session's transcript, whole; ok is false when there
// is none yet. The bucket's stream leader answers, as for LoadState: a
// transcript stored before LoadSession was called is the one it returns.
func LoadSession(ctx context.Context, js jetstream.JetStream, sessionID string) (s *Session, ok bool, err error) {
	rec, _, err := readSession(ctx, js.Conn(), jsread.APIPrefix(js), sessionID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	s = &Session{SessionID: rec.SessionID, Compaction: rec.Compaction, CompactionConfig: rec.CompactionConfig, LastTurn: rec.LastTurn, Updated: rec.Updated}
	var tx *transcript.Store
	if rec.Transcript != nil {
		prefix, err := transcriptPrefix(ctx, js)
		if err != nil {
			return nil, false, err
		}
		tx = transcript.New(js, prefix)
	}
	if s.Messages, s.Transcript, err = sessionMessages(ctx, tx, sessionID, rec); err != nil {
		return nil, false, err
	}
	return s, true, nil
}

// transcriptPrefix is the subject prefix P of the installation whose
// LLMW_TRANSCRIPTS js reaches (its subjects are P.transcript.>): the
// session record names a transcript by key, and LoadSession is given no
// prefix.
func transcriptPrefix(ctx context.Context, js jetstream.JetStream) (string, error) {
	st, err := js.Stream(ctx, events.StreamTranscripts)
	if err != nil {
		return "", fmt.Errorf("%w: stream %s: %w", ErrTranscriptUnavailable, events.StreamTranscripts, err)
	}
	for _, subj := range st.CachedInfo().Config.Subjects {
		if p, ok := strings.CutSuffix(subj, ".transcript.>"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: stream %s carries %q, no P.transcript.>", ErrTranscriptUnavailable, events.StreamTranscripts, st.CachedInfo().Config.Subjects)
}

// sessionMessages returns a record's whole transcript and its Ref.
func sessionMessages(ctx context.Context, tx *transcript.Store, id string, rec *SessionRecord) ([]events.Message, transcript.Ref, error) {
	if rec.Transcript == nil {
		return rec.Messages, transcript.Ref{Len: len(rec.Messages)}, nil
	}
	msgs, err := tx.Read(ctx, transcript.KindSession, kvKey(id), transcript.Range{Upto: *rec.Transcript})
	if err != nil {
		return nil, *rec.Transcript, fmt.Errorf("%w: session %q: %w", ErrTranscriptUnavailable, id, err)
	}
	return msgs, *rec.Transcript, nil
}

// sessionAttempts bounds how often storeSession starts over after another
// turn of the session stored first.
const sessionAttempts = 20

// sessionEnd is what a finished turn stores in its session.
type sessionEnd struct {
	turnID string
	// added are the turn's own messages.
	added []events.Message
	// from is the session's length the turn started from, base the
	// position of the first session item it read, start the
	// CompactionStart it read from and seqs the stream sequences of the
	// first messages of items [base, from).
	from, base int
	start      uint64
	seqs       []uint64
	// compaction is the turn's final active compaction (nil: none).
	compaction *events.Compaction
	// config is the turn request's compaction setting (nil: unset).
	config *events.CompactionConfig
}

// compactionStart decides whether the turn's compaction becomes the
// session's, over cur's (the record the write replaces, of curLen
// messages; tail is the subject's last message before the turn's
// items), and returns its CompactionStart. It must replace a prefix of
// the merged transcript (it covers only what the turn read of the
// session, To ≤ from, or no other turn of the session stored since the
// turn started) and reach further than cur's. So of two turns of one
// session that end at once, the compaction that reaches further over the
// merged transcript is kept, and one made over a transcript that another
// turn's messages now interleave is dropped: the session's next turn
// compacts again if it needs to.
func (e *sessionEnd) compactionStart(cur *SessionRecord, curLen int, tail uint64) (uint64, bool) {
	c := e.compaction
	if c == nil || cur.Compaction != nil && (c.ID == cur.Compaction.ID || c.To <= cur.Compaction.To) {
		return 0, false
	}
	switch {
	case c.To >= e.from && curLen == e.from:
		return tail + 1, true // item To is the turn's, after tail
	case c.To > e.from:
		return 0, false
	case c.To == e.base:
		return e.start, true
	case c.To < e.base || c.To-e.base > len(e.seqs):
		return 0, false
	case c.To < e.from:
		return e.seqs[c.To-e.base], true
	default: // c.To == e.from: after item from-1's first message
		return e.seqs[len(e.seqs)-1] + 1, true
	}
}

// storeSession appends the messages of a finished turn to its session:
// the messages to P.transcript.session.<key> after the stream's tail,
// then the record, with the expected revision, naming the longer
// transcript, the session's active compaction (compactionStart) and its
// compaction setting (the request's merged over the record's). A
// conflict at either (another turn of the session finished meanwhile)
// starts over from the record, so the transcript never loses a turn:
// items appended by an attempt whose record was not written are off the
// transcript's chain (pkg/transcript) and never read. It reads from the
// leader (readSession): a lagging replica's old revision would only
// conflict, again at every retry that asked it. A record in the inline
// format has its messages appended first, ahead of the turn's.
func storeSession(ctx context.Context, nc *nats.Conn, apiPrefix string, kv jetstream.KeyValue, tx *transcript.Store, id string, e *sessionEnd) error {
	key := kvKey(id)
	for attempt := 0; ; attempt++ {
		cur, rev, err := readSession(ctx, nc, apiPrefix, id)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			cur, rev = &SessionRecord{SessionID: id}, 0
		case errors.Is(err, ErrCorruptSession): // start over (at rev) rather than fail forever
			cur = &SessionRecord{SessionID: id}
		case err != nil:
			return fmt.Errorf("turn: read session %s: %w", id, err)
		}
		pending, curLen := e.added, cur.ref().Len
		if cur.Transcript == nil && len(cur.Messages) > 0 {
			pending = append(append(make([]events.Message, 0, len(cur.Messages)+len(e.added)), cur.Messages...), e.added...)
			curLen = len(cur.Messages)
		}
		tail, err := tx.Tail(ctx, transcript.KindSession, key)
		if err != nil {
			return fmt.Errorf("turn: store session %s: %w", id, err)
		}
		ref, err := tx.Append(ctx, transcript.KindSession, key, cur.ref(), tail, pending)
		if errors.Is(err, transcript.ErrConflict) && attempt < sessionAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("turn: store session %s: %w", id, err)
		}
		rec := SessionRecord{SessionID: id, Transcript: &ref, Compaction: cur.Compaction, CompactionStart: cur.CompactionStart,
			CompactionConfig: cur.CompactionConfig, LastTurn: e.turnID, Updated: time.Now().UTC()}
		if start, ok := e.compactionStart(cur, curLen, tail); ok {
			rec.Compaction, rec.CompactionStart = e.compaction, start
		}
		if e.config != nil {
			var merged events.CompactionConfig
			if cur.CompactionConfig != nil {
				merged = *cur.CompactionConfig
			}
			merged = merged.Merge(e.config)
			rec.CompactionConfig = &merged
		}
		b, err := json.Marshal(&rec)
		if err != nil {
			return fmt.Errorf("turn: encode session %s: %w", id, err)
		}
		if rev == 0 {
			_, err = kv.Create(ctx, key, b)
		} else {
			_, err = kv.Update(ctx, key, b, rev)
		}
		if err == nil {
			return nil
		}
		if !isConflict(err) || attempt >= sessionAttempts {
			return fmt.Errorf("turn: store session %s: %w", id, err)
		}
	}
}
