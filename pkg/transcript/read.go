package transcript

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
)

// Range says which items of a transcript to read.
type Range struct {
	// Upto names the transcript: its items [From, Upto.Len) are read.
	Upto Ref
	// From is the first position read.
	From int
	// First is the position of the transcript's first item in the
	// stream: positions before it are kept elsewhere (a session stored
	// inline before its first append). From below First reads from
	// First.
	First int
	// Start is a stream sequence at or before the first message of item
	// From, where the read begins (0: the subject's first message): a
	// caller that keeps one reads no earlier messages.
	Start uint64
}

// node is one stored message of a transcript.
type node struct {
	seq      uint64 // the stream sequence of the message
	pos      int
	prev     uint64
	part, of int // 1/1 for an item in one message
	data     []byte
}

// decodeNode reads a stored message's headers.
func decodeNode(h nats.Header, data []byte) (node, error) {
	n := node{part: 1, of: 1, data: data}
	var err error
	if n.pos, err = strconv.Atoi(h.Get(HeaderPos)); err != nil || n.pos < 0 {
		return n, fmt.Errorf("%w: %s %q", ErrCorrupt, HeaderPos, h.Get(HeaderPos))
	}
	if p := h.Get(HeaderPrev); p != "" {
		if n.prev, err = strconv.ParseUint(p, 10, 64); err != nil || n.prev == 0 {
			return n, fmt.Errorf("%w: %s %q", ErrCorrupt, HeaderPrev, p)
		}
	}
	if p := h.Get(HeaderPart); p != "" {
		i, of, ok := strings.Cut(p, "/")
		a, err1 := strconv.Atoi(i)
		b, err2 := strconv.Atoi(of)
		if !ok || err1 != nil || err2 != nil || a < 1 || b < 2 || a > b {
			return n, fmt.Errorf("%w: %s %q", ErrCorrupt, HeaderPart, p)
		}
		n.part, n.of = a, b
	}
	return n, nil
}

// decodeItem joins the chunks of one item (in order) and decodes it.
func decodeItem(chunks []node) (events.Message, error) {
	var m events.Message
	if len(chunks) == 0 {
		return m, fmt.Errorf("%w: an item of no messages", ErrCorrupt)
	}
	pos, of := chunks[0].pos, chunks[0].of
	if len(chunks) != of {
		return m, fmt.Errorf("%w: item %d has %d of its %d parts", ErrCorrupt, pos, len(chunks), of)
	}
	data := chunks[0].data
	if of > 1 {
		size := 0
		for i, c := range chunks {
			if c.pos != pos || c.of != of || c.part != i+1 {
				return m, fmt.Errorf("%w: item %d: part %d/%d of item %d where part %d/%d belongs", ErrCorrupt, pos, c.part, c.of, c.pos, i+1, of)
			}
			size += len(c.data)
		}
		data = make([]byte, 0, size)
		for _, c := range chunks {
			data = append(data, c.data...)
		}
	}
	if err := m.UnmarshalJSON(data); err != nil {
		return m, fmt.Errorf("%w: item %d: %w", ErrCorrupt, pos, err)
	}
	return m, nil
}

// Items yields the items [r.From, r.Upto.Len) of the transcript r.Upto
// names, in order; an error is yielded once, last. The messages are read
// with an ordered consumer filtered on the transcript's subject from
// r.Start to r.Upto.Seq, and the chain (see the package doc) is walked
// back from r.Upto.Seq before the first item is yielded, so a read holds
// the encoded range in memory once.
func (s *Store) Items(ctx context.Context, kind Kind, key string, r Range) iter.Seq2[events.Message, error] {
	return func(yield func(events.Message, error) bool) {
		items, err := s.chain(ctx, kind, key, r)
		if err != nil {
			yield(events.Message{}, err)
			return
		}
		for _, chunks := range items {
			m, err := decodeItem(chunks)
			if !yield(m, err) || err != nil {
				return
			}
		}
	}
}

// chain reads the messages of r and returns the chunks of each item
// [max(r.From, r.First), r.Upto.Len), in order.
func (s *Store) chain(ctx context.Context, kind Kind, key string, r Range) ([][]node, error) {
	subj, err := s.subject(kind, key)
	if err != nil {
		return nil, err
	}
	from := max(r.From, r.First)
	if r.Upto.Len < 0 || from < 0 {
		return nil, fmt.Errorf("%w: range %+v", ErrInvalid, r)
	}
	if from >= r.Upto.Len {
		return nil, nil
	}
	if r.Upto.Seq == 0 {
		return nil, fmt.Errorf("%w: %s: items %d to %d are counted, and the stream holds none", ErrMissing, subj, from, r.Upto.Len-1)
	}
	// The subject's last message, from the leader: a subject that ends
	// before the ref (purged, or aged out whole) is missing at once,
	// without waiting for messages that will not come.
	tail, err := s.Tail(ctx, kind, key)
	if err != nil {
		return nil, err
	}
	if tail < r.Upto.Seq {
		return nil, fmt.Errorf("%w: %s: the subject's last message is at stream sequence %d, before the transcript's last item at %d", ErrMissing, subj, tail, r.Upto.Seq)
	}
	nodes, err := s.scan(ctx, subj, r.Start, r.Upto.Seq)
	if err != nil {
		return nil, err
	}
	items := make([][]node, r.Upto.Len-from)
	seq := r.Upto.Seq
	for next := r.Upto.Len - 1; next >= from; {
		n, ok := nodes[seq]
		if !ok {
			return nil, fmt.Errorf("%w: %s: stream sequence %d, on the chain to item %d, is not there (read from %d)", ErrMissing, subj, seq, next, r.Start)
		}
		if n.pos != next {
			return nil, fmt.Errorf("%w: %s: stream sequence %d holds item %d where item %d belongs", ErrCorrupt, subj, seq, n.pos, next)
		}
		i := next - from
		items[i] = append(items[i], n)
		if n.part == 1 {
			next--
			slicesReverse(items[i])
		}
		if n.prev == 0 && next >= from {
			return nil, fmt.Errorf("%w: %s: the chain to item %d begins at item %d (stream sequence %d)", ErrMissing, subj, r.Upto.Len-1, n.pos, seq)
		}
		seq = n.prev
	}
	return items, nil
}

// ReadSeqs is Read that also returns, for each item returned, the
// stream sequence of its first message: a Range.Start from which a later
// read of the items from that one on reads no earlier message.
func (s *Store) ReadSeqs(ctx context.Context, kind Kind, key string, r Range) ([]events.Message, []uint64, error) {
	items, err := s.chain(ctx, kind, key, r)
	if err != nil {
		return nil, nil, err
	}
	msgs, seqs := make([]events.Message, len(items)), make([]uint64, len(items))
	for i, chunks := range items {
		if msgs[i], err = decodeItem(chunks); err != nil {
			return nil, nil, err
		}
		seqs[i] = chunks[0].seq
	}
	return msgs, seqs, nil
}

func slicesReverse(s []node) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// fetchWait bounds the wait for the next message when the stream said
// more are pending (the consumer's NumPending), and for the first.
const fetchWait = 5 * time.Second

// scan reads the messages of subj from stream sequence start to upto.
func (s *Store) scan(ctx context.Context, subj string, start, upto uint64) (map[uint64]node, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if start > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	}
	oc, err := s.js.OrderedConsumer(ctx, events.StreamTranscripts, cfg)
	if err != nil {
		return nil, fmt.Errorf("transcript: read %s: %w", subj, err)
	}
	it, err := oc.Messages()
	if err != nil {
		return nil, fmt.Errorf("transcript: read %s: %w", subj, err)
	}
	defer it.Stop()
	nodes := map[uint64]node{}
	count, size := 0, 0
	if f := s.observe.Load(); f != nil {
		defer func() { (*f)(subj, count, size) }()
	}
	for {
		m, err := it.Next(jetstream.NextMaxWait(fetchWait))
		if errors.Is(err, nats.ErrTimeout) {
			// The subject's last message is at upto or later (chain read
			// its tail first), so a read that stops short of it was cut
			// off (a stream member out of reach, a starved client), not
			// given a transcript with a hole: a missing item in the middle
			// still lets the later ones come. The caller may read again.
			return nil, fmt.Errorf("transcript: read %s: stream sequence %d not reached (%d messages read, none more within %s): %w", subj, upto, count, fetchWait, err)
		}
		if err != nil {
			return nil, fmt.Errorf("transcript: read %s: %w", subj, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return nil, fmt.Errorf("transcript: read %s: %w", subj, err)
		}
		seq := md.Sequence.Stream
		if seq > upto {
			return nodes, nil
		}
		n, err := decodeNode(m.Headers(), m.Data())
		if err != nil {
			return nil, fmt.Errorf("%s, stream sequence %d: %w", subj, seq, err)
		}
		n.seq = seq
		count++
		size += len(m.Data())
		nodes[seq] = n
		if seq == upto || md.NumPending == 0 {
			return nodes, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}
