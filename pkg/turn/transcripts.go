package turn

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/transcript"
)

// StateTranscript is where a state's checkpoint messages are in
// LLMW_TRANSCRIPTS: the session's items [Checkpoint.Base, Session.Len) on
// P.transcript.session.<key>, then the turn's own [0, Turn.Len) on
// P.transcript.turn.<key>. A state with it stores its checkpoint's
// messages as []; one without it (the inline format) has them in the
// checkpoint.
type StateTranscript struct {
	// Session is the session's transcript the turn started from (zero
	// for a turn without a session, or one continued from the inline
	// format, whose messages are all the turn's own).
	Session transcript.Ref `json:"session"`
	// SessionStart is a stream sequence at or before the first message
	// of the session's item Checkpoint.Base, where a read of the
	// checkpoint's session items begins (0: the subject's first).
	SessionStart uint64 `json:"session_start,omitempty"`
	// Turn is the turn's own messages: its input, and what its steps
	// added.
	Turn transcript.Ref `json:"turn"`
}

// appendAttempts bounds how often a run appends its messages again after
// another writer's append moved the subject's tail (a replica that had
// lost the turn, or a run of the same id that stopped before its state
// was created): the state write that follows decides who owns the turn.
const appendAttempts = 3

// appendOwn stores the turn's messages not stored yet, own[t.tx.turn.Len:]
// (own are the turn's own messages, all of them), and returns the state's
// transcript. The input's large media parts are in LLMW_MEDIA already
// (fresh offloads them); the messages the worker added are stored as
// they are, since the worker still reads them (an item above a message
// is stored in chunks); w.mu held, or the run not started. The first append of a run
// reads the subject's tail from the stream's leader: items a run that
// lost the turn appended after the state it continues from lie there,
// off the transcript's chain.
func (t *turnRun) appendOwn(ctx context.Context, own []events.Message) (*StateTranscript, error) {
	if len(own) < t.tx.turn.Len {
		return nil, fmt.Errorf("turn: the checkpoint of turn %q has %d messages of its own, fewer than the %d stored", t.id, len(own), t.tx.turn.Len)
	}
	if added := own[t.tx.turn.Len:]; len(added) > 0 {
		key := kvKey(t.id)
		for attempt := 1; ; attempt++ {
			if !t.tx.tailKnown {
				tail, err := t.s.tx.Tail(ctx, transcript.KindTurn, key)
				if err != nil {
					return nil, err
				}
				t.tx.tail, t.tx.tailKnown = tail, true
			}
			ref, err := t.s.tx.Append(ctx, transcript.KindTurn, key, t.tx.turn, t.tx.tail, added)
			if err == nil {
				t.tx.turn, t.tx.tail = ref, ref.Seq
				break
			}
			t.tx.tailKnown = false
			if !errors.Is(err, transcript.ErrConflict) || attempt == appendAttempts {
				return nil, err
			}
		}
	}
	return t.stateTranscript(), nil
}

// stateTranscript is the run's transcript as a state names it.
func (t *turnRun) stateTranscript() *StateTranscript {
	return &StateTranscript{Session: t.tx.sess, SessionStart: t.tx.start, Turn: t.tx.turn}
}

// checkpointState is a checkpoint's state for store: the messages cp
// added since the run's last write appended first, so that a stored
// state never names what is not stored (w.mu held).
func (t *turnRun) checkpointState(st *State) ([]byte, error) {
	cp := st.Checkpoint
	n := t.tx.sess.Len - cp.Base // the session's items the checkpoint holds
	if n < 0 || len(cp.Messages) < n {
		return nil, fmt.Errorf("turn: the checkpoint of turn %q has %d messages from position %d, fewer than the %d of its session", t.id, len(cp.Messages), cp.Base, t.tx.sess.Len)
	}
	ctx, cancel := kvContext(t.s.root)
	tx, err := t.appendOwn(ctx, cp.Messages[n:])
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errTranscriptWrite, err)
	}
	st.Transcript = tx
	t.tx.compaction = cp.Compaction
	return t.s.encodeState(st)
}

// errTranscriptWrite marks a failed transcript append (commit hands the
// turn off, as for a state the bucket did not take).
var errTranscriptWrite = errors.New("turn: transcript not stored")

// loadCheckpoint reads the messages of a state's checkpoint from
// LLMW_TRANSCRIPTS (nothing for the inline format, whose checkpoint has
// them): a run continuing the turn, or the on_abort hooks of a paused
// turn cancelled, reads them. The session's items are read from the
// checkpoint's Base on, from SessionStart; seqs are the stream sequences
// of their first messages (what the turn's end needs to store its
// compaction, sessionEnd).
func (s *Service) loadCheckpoint(ctx context.Context, st *State) (seqs []uint64, err error) {
	if st.Transcript == nil || st.Checkpoint == nil {
		return nil, nil
	}
	ctx, cancel := kvContext(ctx)
	defer cancel()
	tx := st.Transcript
	base := st.Checkpoint.Base
	msgs := make([]events.Message, 0, max(tx.Session.Len-base, 0)+tx.Turn.Len)
	if tx.Session.Len > base && st.Request != nil {
		r := transcript.Range{Upto: tx.Session, From: base, Start: tx.SessionStart}
		sm, sq, err := s.tx.ReadSeqs(ctx, transcript.KindSession, kvKey(st.Request.SessionID), r)
		if err != nil {
			return nil, fmt.Errorf("%w: session %q of turn %q: %w", ErrTranscriptUnavailable, st.Request.SessionID, st.Request.TurnID, err)
		}
		msgs, seqs = append(msgs, sm...), sq
	}
	own, err := s.tx.Read(ctx, transcript.KindTurn, kvKey(st.Checkpoint.TurnID), transcript.Range{Upto: tx.Turn})
	if err != nil {
		return nil, fmt.Errorf("%w: turn %q: %w", ErrTranscriptUnavailable, st.Checkpoint.TurnID, err)
	}
	st.Checkpoint.Messages = append(msgs, own...)
	return seqs, nil
}

// sessionView is what a turn of a session starts from: the originals
// from the session's active compaction on.
type sessionView struct {
	// msgs are the session's items [base, ref.Len); seqs the stream
	// sequences of their first messages, read from start.
	msgs       []events.Message
	seqs       []uint64
	ref        transcript.Ref
	base       int
	start      uint64
	compaction *events.Compaction
	config     *events.CompactionConfig
}

// sessionStart reads the transcript a turn of session id starts from:
// the items from the record's compaction's To on, read from its
// CompactionStart, so that what a turn reads does not grow with the
// session. A record in the inline format is moved to the stream first
// (storeSession with nothing added), so that the turn's state can name
// it by ref.
func (s *Service) sessionStart(id string) (sessionView, error) {
	ctx, cancel := kvContext(s.root)
	defer cancel()
	rec, _, err := readSession(ctx, s.nc, s.pub.APIPrefix(), id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return sessionView{}, nil
	}
	if err != nil {
		return sessionView{}, err
	}
	if rec.Transcript == nil && len(rec.Messages) > 0 {
		if err := storeSession(ctx, s.nc, s.pub.APIPrefix(), s.sessionKV, s.tx, id, &sessionEnd{turnID: rec.LastTurn}); err != nil {
			return sessionView{}, err
		}
		if rec, _, err = readSession(ctx, s.nc, s.pub.APIPrefix(), id); err != nil {
			return sessionView{}, err
		}
	}
	v := sessionView{ref: rec.ref(), config: rec.CompactionConfig}
	switch c := rec.Compaction; {
	case c == nil || c.To > v.ref.Len:
	case c.Native() != "":
		// A model of another provider reads the originals instead
		// (compact.Project): the turn holds them all.
		v.compaction = c
	default:
		v.base, v.start, v.compaction = c.To, rec.CompactionStart, c
	}
	if v.ref.Len > v.base {
		r := transcript.Range{Upto: v.ref, From: v.base, Start: v.start}
		if v.msgs, v.seqs, err = s.tx.ReadSeqs(ctx, transcript.KindSession, kvKey(id), r); err != nil {
			return v, fmt.Errorf("%w: session %q: %w", ErrTranscriptUnavailable, id, err)
		}
	}
	return v, nil
}

// storeEnd appends the messages of the turn's last step (those after its
// last checkpoint) to its transcript, so that the finished turn's state
// names all of it. A failure is logged: the completed event and the
// session carry the messages too.
func (t *turnRun) storeEnd(msgs []events.Message) {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	n := t.tx.sess.Len - t.tx.base // msgs are the transcript from tx.base on
	if t.w.err != nil || n < 0 || len(msgs) < n {
		return
	}
	ctx, cancel := kvContext(t.s.root)
	defer cancel()
	if _, err := t.appendOwn(ctx, msgs[n:]); err != nil {
		t.s.log.Warn("turn: store the turn's last messages in its transcript", "turn_id", t.id, "err", err)
	}
}

// encodeState marshals a state and checks it fits into a KV value: the
// transcript is in LLMW_TRANSCRIPTS (State.Transcript), so what can be too
// large is the rest (the request's system prompt and tools, the pending
// calls' outputs).
func (s *Service) encodeState(st *State) ([]byte, error) {
	b, err := marshalState(st)
	if err != nil {
		return nil, fmt.Errorf("turn: encode checkpoint: %w", err)
	}
	if limit := s.nc.MaxPayload(); limit > 0 && int64(len(b)) > limit-1024 {
		return nil, fmt.Errorf("%w: the state of turn %q is %d bytes without its transcript, more than the %d bytes a state may have (the NATS max payload of %d bytes less 1024 for the message's headers); a smaller system prompt, fewer tools or smaller tool results fit",
			ErrTooLarge, st.Request.TurnID, len(b), limit-1024, limit)
	}
	return b, nil
}
