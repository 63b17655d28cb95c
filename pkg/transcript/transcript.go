package transcript

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/events"
)

// Kind says whose transcript a subject holds.
type Kind string

const (
	// KindTurn is one turn's own messages (its input and what it added),
	// keyed by the turn's KV key.
	KindTurn Kind = "turn"
	// KindSession is a session's finished turns, keyed by the session's
	// KV key.
	KindSession Kind = "session"
)

// The headers of a stored item.
const (
	// HeaderPos is the item's position in its transcript.
	HeaderPos = "Llmw-Transcript-Pos"
	// HeaderPrev is the stream sequence of the message before this one
	// in the transcript (the previous item's last chunk, or the previous
	// chunk of this item); absent for the first.
	HeaderPrev = "Llmw-Transcript-Prev"
	// HeaderPart is "i/n" on the chunks of an item stored in n > 1
	// messages (i from 1).
	HeaderPart = "Llmw-Transcript-Part"
)

// MessageOverhead is what Append leaves of the connection's max payload
// for a message's subject and headers: an item whose JSON is larger is
// stored in chunks.
const MessageOverhead = 1024

// Ref is a transcript as a writer stored it.
type Ref struct {
	// Len is the number of items: positions 0..Len-1.
	Len int `json:"len"`
	// Seq is the stream sequence of the last item's last message; 0
	// while the stream holds none of the transcript's items.
	Seq uint64 `json:"seq,omitempty"`
}

// Store reads and appends transcripts in LLMW_TRANSCRIPTS. The zero value
// is not usable; New makes one.
type Store struct {
	js        jetstream.JetStream
	nc        *nats.Conn
	subjects  events.Subjects
	apiPrefix string
	// maxChunk is the most bytes of an item one message carries (0: the
	// connection's max payload less MessageOverhead).
	maxChunk int
	// observe is told what each read fetched (SetReadObserver).
	observe atomic.Pointer[func(subject string, messages, bytes int)]
}

// SetReadObserver has f told, after each read of a subject, how many
// stream messages it fetched and their data's bytes (nil: no one is
// told): what a read costs, which a caller that reads from a Range.Start
// keeps independent of the transcript's length.
func (s *Store) SetReadObserver(f func(subject string, messages, bytes int)) {
	if f == nil {
		s.observe.Store(nil)
		return
	}
	s.observe.Store(&f)
}

// New returns a Store for the transcripts under prefix ("" =
// events.DefaultPrefix), through js (its connection, API prefix or
// domain).
func New(js jetstream.JetStream, prefix string) *Store {
	return &Store{js: js, nc: js.Conn(), subjects: events.NewSubjects(prefix), apiPrefix: jsread.APIPrefix(js)}
}

// Subject is P.transcript.<kind>.<key>.
func (s *Store) Subject(kind Kind, key string) string {
	return s.subjects.Transcript(string(kind), key)
}

func (s *Store) subject(kind Kind, key string) (string, error) {
	if kind != KindTurn && kind != KindSession {
		return "", fmt.Errorf("%w: kind %q (turn or session)", ErrInvalid, kind)
	}
	if !validKey(key) {
		return "", fmt.Errorf("%w: key %q is not a subject token", ErrInvalid, key)
	}
	return s.Subject(kind, key), nil
}

// Tail returns the stream sequence of the last message on the
// transcript's subject as the stream's leader has it, 0 when there is
// none: what an append expects.
func (s *Store) Tail(ctx context.Context, kind Kind, key string) (uint64, error) {
	subj, err := s.subject(kind, key)
	if err != nil {
		return 0, err
	}
	m, err := jsread.LastMsg(ctx, s.nc, s.apiPrefix, events.StreamTranscripts, subj)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("transcript: last message of %s: %w", subj, err)
	}
	return m.Sequence, nil
}

func (s *Store) chunkSize() int {
	if s.maxChunk > 0 {
		return s.maxChunk
	}
	if mp := s.nc.MaxPayload(); mp > 2*MessageOverhead {
		return int(mp) - MessageOverhead
	}
	return 64 << 10
}

// Append stores msgs at positions at.Len, at.Len+1, … of the transcript
// at names, the subject's last message expected at stream sequence tail
// (Tail; at.Seq when the caller's own append was the last), and returns
// the Ref of the longer transcript. ErrConflict: the subject's last
// message was elsewhere, so nothing of msgs was stored by this call's
// first publish; a conflict after the first (a second writer between two
// items) leaves the items stored so far off any Ref the caller records.
func (s *Store) Append(ctx context.Context, kind Kind, key string, at Ref, tail uint64, msgs []events.Message) (Ref, error) {
	subj, err := s.subject(kind, key)
	if err != nil {
		return at, err
	}
	if at.Len < 0 {
		return at, fmt.Errorf("%w: ref length %d", ErrInvalid, at.Len)
	}
	chunk := s.chunkSize()
	prev, first := at.Seq, at.Len
	var buf []byte
	for i := range msgs {
		pos := first + i
		if buf, err = msgs[i].AppendJSON(buf[:0]); err != nil {
			return at, fmt.Errorf("transcript: encode item %d of %s: %w", pos, subj, err)
		}
		n := (len(buf) + chunk - 1) / chunk
		for part := 1; part <= n; part++ {
			data := buf[(part-1)*chunk : min(part*chunk, len(buf))]
			m := &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
			m.Header.Set(HeaderPos, strconv.Itoa(pos))
			if prev > 0 {
				m.Header.Set(HeaderPrev, strconv.FormatUint(prev, 10))
			}
			if n > 1 {
				m.Header.Set(HeaderPart, strconv.Itoa(part)+"/"+strconv.Itoa(n))
			}
			ack, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(tail))
			if err != nil {
				if isWrongLast(err) {
					return at, fmt.Errorf("%w: %s (position %d, expected its last message at stream sequence %d): %w", ErrConflict, subj, pos, tail, err)
				}
				return at, fmt.Errorf("transcript: append item %d to %s: %w", pos, subj, err)
			}
			prev, tail = ack.Sequence, ack.Sequence
		}
		at = Ref{Len: pos + 1, Seq: prev}
	}
	return at, nil
}

// validKey is events.ValidToken without its length limit: a key is an
// id's KV key, which for an id of 256 bytes that are not all key
// characters is its longer base64url encoding.
func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c == '.' || c == '*' || c == '>' || c == 0x7f {
			return false
		}
	}
	return true
}

func isWrongLast(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Read returns the items [from, upto.Len) of the transcript upto names
// (Items collected). ErrMissing and ErrCorrupt say the stream does not
// hold the transcript; a read cut off before the last item (no message
// for a while: a stream member out of reach) matches nats.ErrTimeout
// and may be made again.
func (s *Store) Read(ctx context.Context, kind Kind, key string, r Range) ([]events.Message, error) {
	out := make([]events.Message, 0, max(r.Upto.Len-r.From, 0))
	for m, err := range s.Items(ctx, kind, key, r) {
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
