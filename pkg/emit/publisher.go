package emit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
)

// PublisherOptions configures a Publisher. The zero value publishes under
// events.DefaultPrefix with source /llmw/turn/<random instance>.
type PublisherOptions struct {
	// Prefix is the subject prefix P.
	Prefix string
	// Service and Instance make the source /llmw/<service>/<instance>
	// ("" = "turn" and a random id).
	Service, Instance string
	// RetryTimeout bounds how long the worker events of a turn are
	// retried when LLMW_EVENTS does not acknowledge them (no leader during
	// an election, a lost connection) before the publisher gives up with
	// ErrEventsUnavailable; 0 = DefaultRetryTimeout.
	RetryTimeout time.Duration
	// KeepDeltas stores every llmw.block.delta as its own event, as the
	// provider sent it. By default a delta published while the turn's
	// earlier events still wait for their acknowledgement joins the queued
	// delta of the same block before it (see EventPublisher): a UI sees
	// the same text in fewer, larger deltas, and a turn streaming faster
	// than the stream stores is not held to one stored write per token.
	KeepDeltas bool
	// NoAtomicBatches stores every event with a fenced publish of its
	// own, even where LLMW_EVENTS takes atomic batches (see
	// EventPublisher): for comparing the two, or to leave the server's
	// limit of atomic batches in flight (50 per stream by default) to
	// other publishers.
	NoAtomicBatches bool
}

// DefaultRetryTimeout is PublisherOptions.RetryTimeout's default: longer
// than a JetStream leader election.
const DefaultRetryTimeout = 30 * time.Second

// Publisher publishes CloudEvents in binary content mode: Publish with a
// core NATS publish that a stream of docs/protocol.md captures, and the
// worker events of a turn through Turn's fenced EventPublisher. It is safe
// for concurrent use.
type Publisher struct {
	nc         *nats.Conn
	js         jetstream.JetStream
	subjects   events.Subjects
	source     string
	retry      time.Duration
	ackTimeout time.Duration
	apiPrefix  string
	keepDeltas bool

	// batching is how the sender stores a queue of several events: one of
	// the batch* constants; batchUnknown until LLMW_EVENTS was read.
	batching atomic.Int32
	// readAfter (Unix nanoseconds) is when a failed read of LLMW_EVENTS'
	// config may be tried again.
	readAfter atomic.Int64
}

// NewPublisher returns a Publisher on nc.
func NewPublisher(nc *nats.Conn, o PublisherOptions) *Publisher {
	if o.Service == "" {
		o.Service = "turn"
	}
	if o.Instance == "" {
		o.Instance = nuid.Next()
	}
	if o.RetryTimeout <= 0 {
		o.RetryTimeout = DefaultRetryTimeout
	}
	js, _ := jetstream.New(nc) // errors only for options, and there are none
	p := &Publisher{nc: nc, js: js, subjects: events.NewSubjects(o.Prefix), source: events.Source(o.Service, o.Instance),
		retry: o.RetryTimeout, ackTimeout: min(o.RetryTimeout, 5*time.Second), apiPrefix: jetstream.DefaultAPIPrefix,
		keepDeltas: o.KeepDeltas}
	if o.NoAtomicBatches {
		p.batching.Store(batchNever)
	}
	return p
}

// Source is the source attribute this publisher stamps.
func (p *Publisher) Source() string { return p.source }

// Subjects is the subject builder of the publisher's prefix.
func (p *Publisher) Subjects() events.Subjects { return p.subjects }

// RetryTimeout is how long the publisher retries the worker events of a
// turn (PublisherOptions.RetryTimeout, its default filled in).
func (p *Publisher) RetryTimeout() time.Duration { return p.retry }

// APIPrefix is the JetStream API prefix the publisher reads LLMW_EVENTS
// under.
func (p *Publisher) APIPrefix() string { return p.apiPrefix }

// Publish sends e to subject in binary content mode. An empty e.Source is
// filled with the publisher's source, an empty id and time likewise.
func (p *Publisher) Publish(subject string, e *events.Envelope) error {
	if e.Source == "" {
		e.Source = p.source
	}
	if err := p.nc.PublishMsg(cenats.NewMsg(subject, e)); err != nil {
		return fmt.Errorf("turn: publish %s: %w", subject, err)
	}
	return nil
}

// Position is where a turn's event stream stands: Seq is the seq of its
// last worker event and StreamSeq that event's sequence in LLMW_EVENTS. The
// zero Position is a turn without events.
type Position struct {
	Seq, StreamSeq uint64
}

// Turn returns the EventPublisher of one turn whose event stream stands at
// last (the zero Position for a new turn; LastEvent reads it for a turn
// that has events), so that seq goes on without a gap or a repeat and the
// first publish is fenced on the last stored event.
func (p *Publisher) Turn(turnID, sessionID string, last Position) *EventPublisher {
	ep := &EventPublisher{p: p, turnID: turnID, sessionID: sessionID, seq: last.Seq, stored: last.Seq, fence: last.StreamSeq,
		filter: p.subjects.Events(sessionID, turnID, "*"),
		w:      cenats.NewWriter(events.Envelope{Source: p.source, Subject: turnID, TurnID: turnID, SessionID: sessionID}, cenats.Options{})}
	ep.filterHdr[0] = ep.filter
	for i, ch := range channels {
		ep.subjects[i] = p.subjects.Emit(sessionID, turnID, ch)
	}
	return ep
}

var channels = [...]events.Channel{
	events.ChannelTurn, events.ChannelText, events.ChannelThinking,
	events.ChannelTool, events.ChannelHook, events.ChannelUsage,
}

// EventPublisher publishes the worker events of one turn on
// P.events.<session>.<turn>.<channel>, stamping source, turnid, sessionid,
// subject (= the turn id) and a seq that counts per turn across channels.
// It is safe for concurrent use; seq order equals publish order.
//
// Events are JetStream publishes on P.emit.<session>.<turn>.<channel>,
// which LLMW_EVENTS stores as P.events.… and then republishes there.
// They are fenced: Publish queues an event and returns, and a sender
// goroutine publishes what is queued in order, each event expecting the
// turn's last stored event (Nats-Expected-Last-Subject-Sequence on the
// filter P.events.<session>.<turn>.*) to be the one this publisher stored
// before it. If anyone else stored an event of the turn meanwhile — a
// replica that took the turn over — the server refuses it, nobody sees it,
// and every later Publish and Flush returns ErrFenced. Transient failures
// (no stream leader during an election, a timeout) are retried for
// PublisherOptions.RetryTimeout.
//
// Events that queue while the sender waits go out together as a JetStream
// atomic batch where LLMW_EVENTS allows atomic publish (nats-server ≥ 2.12;
// provision sets it): one round trip instead of one per event, the fence on
// the batch's first event, and the server stores the batch whole or
// refuses it whole, so the fence covers every event of it. On a stream the
// server stages batches for in a file store (file storage, one replica)
// only a queue of at least 16 events goes as a batch; a batch the server
// will not take (too many in flight, atomic publish off) is stored event
// by event instead. PublisherOptions.NoAtomicBatches turns batches off.
//
// Deltas are coalesced under backpressure: a llmw.block.delta published
// while the event before it is still queued (the sender waits for the
// acknowledgement of an earlier one) and that continues the same block —
// same step, index and kind — is appended to that queued delta instead
// of becoming an event of its own (up to MaxCoalescedDelta bytes). The
// concatenated text is what a UI would have assembled from the separate
// deltas, so nothing is lost; what changes is that one stored write (and
// its fsync) carries many tokens when tokens come faster than the stream
// stores them, while a delta that finds the sender idle goes out at once,
// alone. PublisherOptions.KeepDeltas turns this off.
type EventPublisher struct {
	p                 *Publisher
	turnID, sessionID string
	subjects          [len(channels)]string
	filter            string

	mu      sync.Mutex
	seq     uint64   // last seq given out
	stored  uint64   // seq of the last event stored
	fence   uint64   // stream sequence of the turn's last stored event
	queue   []queued // events waiting for the sender
	arena   []byte   // their data
	sending bool     // a sender goroutine runs
	// advanced, made by a waiting FlushTo, is closed when the sender
	// stored a batch, failed or stopped (advance).
	advanced chan struct{}
	err      error // sticky: ErrFenced or ErrEventsUnavailable

	// The sender's own: what it sends, the writer and the fence headers.
	batch       []queued
	batchArena  []byte
	w           *cenats.Writer
	fenceHdr    [1]string
	filterHdr   [1]string
	batchIDHdr  [1]string
	batchSeqHdr [1]string
}

// queued is one event waiting to be sent: its channel, type, seq and data
// (arena[off:end]). A delta also keeps what identifies its block, and
// where its escaped content ends (arena[contentEnd:end] is the closing
// quote, the step and the closing brace), so that a later delta of the
// same block can be spliced in.
type queued struct {
	ch       uint8
	typ      string
	seq      uint64
	off, end int

	delta      bool
	kind       events.DeltaKind
	index      int
	step       int
	contentEnd int
}

// MaxCoalescedDelta bounds the data of a delta that later deltas of its
// block are appended to while it waits in the queue: a UI still gets the
// text of a long burst in pieces it can render as they come.
const MaxCoalescedDelta = 16 << 10

// TurnID is the turn the publisher belongs to.
func (ep *EventPublisher) TurnID() string { return ep.turnID }

// Seq returns the seq of the last event published (queued or stored).
func (ep *EventPublisher) Seq() uint64 {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.seq
}

func (ep *EventPublisher) channel(ch events.Channel) uint8 {
	for i, c := range channels {
		if c == ch {
			return uint8(i)
		}
	}
	return 0
}

// headerRoom is what the CloudEvents and JetStream headers of one event
// take at most, for the max payload check.
const headerRoom = 1024

// Publish queues ev for its channel with its CloudEvent type and returns
// its seq. Deltas, one per streamed token, are encoded without
// reflection; a delta coalesced into the queued delta of its block
// returns that delta's seq. An event larger than the NATS max payload is refused at once
// (nats.ErrMaxPayload) without using a seq; after a refused or failed
// batch Publish returns that error (ErrFenced, ErrEventsUnavailable).
func (ep *EventPublisher) Publish(ev events.WorkerEvent) (uint64, error) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.err != nil {
		return 0, ep.err
	}
	off := len(ep.arena)
	d, isDelta := ev.(events.WorkerBlockDelta)
	if isDelta {
		if seq, ok := ep.coalesce(d); ok {
			return seq, nil
		}
		ep.arena = d.AppendJSON(ep.arena)
	} else {
		b, err := events.MarshalWorkerEvent(ev)
		if err != nil {
			return 0, fmt.Errorf("turn: marshal %s: %w", ev.WorkerType(), err)
		}
		ep.arena = append(ep.arena, b...)
	}
	if limit := ep.p.nc.MaxPayload(); limit > 0 && int64(len(ep.arena)-off+headerRoom) > limit {
		n := len(ep.arena) - off
		ep.arena = ep.arena[:off]
		return 0, fmt.Errorf("turn: %s of %d bytes: %w", ev.WorkerType(), n, nats.ErrMaxPayload)
	}
	ep.seq++
	q := queued{ch: ep.channel(ev.Channel()), typ: ev.WorkerType(), seq: ep.seq, off: off, end: len(ep.arena)}
	if isDelta {
		q.delta, q.kind, q.index, q.step = true, d.Kind, d.Index, d.Step
		q.contentEnd = q.end - len(`","step":}`) - digits(d.Step)
	}
	ep.queue = append(ep.queue, q)
	if !ep.sending {
		ep.sending = true
		go ep.send()
	}
	return ep.seq, nil
}

// coalesce appends d to the last queued event when that is a delta of
// the same block still waiting for the sender, and returns its seq. The
// arena's last bytes are that delta's (nothing is queued after it), so
// the content is spliced in place: the tail after the content (closing
// quote, step, brace) is saved, the escaped content appended, the tail
// put back.
func (ep *EventPublisher) coalesce(d events.WorkerBlockDelta) (uint64, bool) {
	if ep.p.keepDeltas || len(ep.queue) == 0 {
		return 0, false
	}
	q := &ep.queue[len(ep.queue)-1]
	if !q.delta || q.kind != d.Kind || q.index != d.Index || q.step != d.Step || q.end != len(ep.arena) {
		return 0, false
	}
	var tail [32]byte
	n := copy(tail[:], ep.arena[q.contentEnd:q.end])
	if n != q.end-q.contentEnd {
		return 0, false
	}
	grown := events.AppendJSONEscaped(ep.arena[:q.contentEnd], d.Content)
	if size := len(grown) + n - q.off; size > MaxCoalescedDelta ||
		(ep.p.nc.MaxPayload() > 0 && int64(size+headerRoom) > ep.p.nc.MaxPayload()) {
		// Too big to grow: restore the queued delta and queue d alone.
		ep.arena = append(ep.arena[:q.contentEnd], tail[:n]...)
		return 0, false
	}
	q.contentEnd = len(grown)
	ep.arena = append(grown, tail[:n]...)
	q.end = len(ep.arena)
	return q.seq, true
}

// digits is the length of n in decimal.
func digits(n int) int {
	if n < 0 {
		return 1 + digits(-n)
	}
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// Flush waits until every event published so far is stored in LLMW_EVENTS
// and returns nil, or the error that stopped them (ErrFenced,
// ErrEventsUnavailable). A nil Flush proves that no other replica stored
// an event of the turn before the last one of this publisher: the turn
// service calls it before every side effect outside the events stream.
// Events published while it waits are not waited for. Cancelling ctx
// stops the wait, not the sending.
func (ep *EventPublisher) Flush(ctx context.Context) error {
	return ep.FlushTo(ctx, math.MaxUint64)
}

// FlushTo is Flush for the events up to seq (at most the last published):
// it returns once they are stored, or with the error that stopped the
// sender (ErrFenced, ErrEventsUnavailable, also when they were stored
// before it). It proves what Flush proves up to the event of seq.
func (ep *EventPublisher) FlushTo(ctx context.Context, seq uint64) error {
	ep.mu.Lock()
	seq = min(seq, ep.seq)
	for ep.err == nil && ep.sending && seq > ep.stored {
		if ep.advanced == nil {
			ep.advanced = make(chan struct{})
		}
		advanced := ep.advanced
		ep.mu.Unlock()
		select {
		case <-advanced:
		case <-ctx.Done():
			return fmt.Errorf("turn: flush events of turn %s: %w", ep.turnID, context.Cause(ctx))
		}
		ep.mu.Lock()
	}
	defer ep.mu.Unlock()
	return ep.err
}

// StoredTo reports whether the events up to seq are stored (or the
// publisher failed, which FlushTo then returns): a FlushTo to seq would
// not wait.
func (ep *EventPublisher) StoredTo(seq uint64) bool {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.err != nil || !ep.sending || min(seq, ep.seq) <= ep.stored
}

// advance wakes the waiters of FlushTo: the sender stored a batch, failed
// or stopped. The caller holds ep.mu.
func (ep *EventPublisher) advance() {
	if ep.advanced != nil {
		close(ep.advanced)
		ep.advanced = nil
	}
}

// keepArena is the capacity of an event arena that is kept while the
// sender is idle; a larger one (grown by a burst of coalesced deltas, up
// to MaxCoalescedDelta per delta) is dropped.
const keepArena = 4 << 10

// send is the sender goroutine: it sends what is queued, batch after
// batch, until the queue is empty or a batch failed.
func (ep *EventPublisher) send() {
	for {
		ep.mu.Lock()
		if len(ep.queue) == 0 || ep.err != nil {
			ep.queue, ep.arena = ep.queue[:0], ep.arena[:0]
			// A turn spends most of its life waiting (on its model, a
			// tool, a hook) with nothing to send: meanwhile it holds
			// neither the writer's header map nor a burst's buffers.
			ep.w.Release()
			if cap(ep.arena) > keepArena {
				ep.arena = nil
			}
			if cap(ep.batchArena) > keepArena {
				ep.batchArena = nil
			}
			ep.sending = false
			ep.advance()
			ep.mu.Unlock()
			return
		}
		ep.batch, ep.queue = ep.queue, ep.batch[:0]
		ep.batchArena, ep.arena = ep.arena, ep.batchArena[:0]
		fence := ep.fence
		ep.mu.Unlock()

		fence, err := ep.store(fence)

		ep.mu.Lock()
		ep.fence, ep.err = fence, err
		if err == nil {
			ep.stored = ep.batch[len(ep.batch)-1].seq
		}
		ep.advance()
		ep.mu.Unlock()
	}
}

// store sends ep.batch in order and returns the stream sequence of the
// last event stored. Where LLMW_EVENTS takes atomic batches (batchMin),
// what is queued goes as one batch per maxAtomicBatch events, fenced on
// its first, stored whole or not at all; otherwise, and for a batch the
// server would not take (errNotBatched: nothing of it was stored), one
// fenced publish after the other, each expecting the one before it.
func (ep *EventPublisher) store(fence uint64) (uint64, error) {
	for rest := ep.batch; len(rest) > 0; {
		n := 1
		if len(rest) > 1 {
			if m := ep.p.batchMin(); m > 0 && len(rest) >= m {
				if n = batchLen(rest); n < m {
					n = 1 // cut short by size below where a batch pays
				}
			}
		}
		f, err := ep.storeRetrying(rest[:n], fence)
		if errors.Is(err, errNotBatched) {
			for i := range n {
				if f, err = ep.storeRetrying(rest[i:i+1], fence); err != nil {
					break
				}
				fence = f
			}
		}
		if err != nil {
			return f, err
		}
		fence, rest = f, rest[n:]
	}
	return fence, nil
}

// storeRetrying stores qs (one event, or an atomic batch), retrying
// transient failures for the publisher's RetryTimeout with backoff.
func (ep *EventPublisher) storeRetrying(qs []queued, fence uint64) (uint64, error) {
	deadline := time.Now().Add(ep.p.retry)
	backoff := 10 * time.Millisecond
	last := qs[len(qs)-1].seq
	for {
		seq, err := ep.storeOnce(qs, fence)
		if err == nil {
			return seq, nil
		}
		var wrong *wrongLastError
		switch {
		case errors.Is(err, errNotBatched):
			return fence, err
		case errors.As(err, &wrong):
			// Refused, or stored and the acknowledgement lost: the turn's
			// last event says which (a batch is stored whole or not at
			// all, so its last event says it for all of them).
			pos, id, lerr := lastEvent(ep.p.nc, ep.p.apiPrefix, ep.filter, ep.p.retry)
			if lerr == nil && id == ep.w.ID(last) {
				return pos.StreamSeq, nil
			}
			switch {
			case lerr != nil:
				err = lerr
			case pos.StreamSeq != fence:
				return fence, fmt.Errorf("%w (turn %s: seq %d expected the turn's last event at stream sequence %d; the stream has seq %d at %d)",
					ErrFenced, ep.turnID, qs[0].seq, fence, pos.Seq, pos.StreamSeq)
			}
			// Otherwise nobody published after us, yet the publish was
			// refused: a leader that had not applied the turn's last event
			// yet (seen right after a node restart). The fence still
			// holds, and the retry still carries it.
		case !transient(err):
			return fence, fmt.Errorf("%w: turn %s: %w", ErrEventsUnavailable, ep.turnID, err)
		}
		if time.Now().Add(backoff).After(deadline) {
			return fence, fmt.Errorf("%w: turn %s, seq %d not acknowledged within %s: %w",
				ErrEventsUnavailable, ep.turnID, last, ep.p.retry, err)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// storeOnce publishes qs, the first expecting the turn's last stored
// event at stream sequence fence, and returns the stream sequence of the
// last. One event is one acknowledged publish; several are an atomic
// batch (Nats-Batch-Id, -Sequence, and -Commit on the last): the others
// go unacknowledged, the commit's acknowledgement answers for the batch,
// and the server checks the fence when it commits.
func (ep *EventPublisher) storeOnce(qs []queued, fence uint64) (uint64, error) {
	var m *nats.Msg
	for i, q := range qs {
		m = ep.w.Msg(ep.subjects[q.ch], q.typ, q.seq, ep.batchArena[q.off:q.end])
		if i == 0 {
			ep.fenceHdr[0] = strconv.FormatUint(fence, 10)
			m.Header[jetstream.ExpectedLastSubjSeqHeader] = ep.fenceHdr[:]
			m.Header[jetstream.ExpectedLastSubjSeqSubjHeader] = ep.filterHdr[:]
			if len(qs) == 1 {
				break
			}
			ep.batchIDHdr[0] = nuid.Next() // a retry starts a batch of its own
			m.Header[headerBatchID] = ep.batchIDHdr[:]
			defer deleteBatchHeaders(m.Header)
		} else if i == 1 {
			delete(m.Header, jetstream.ExpectedLastSubjSeqHeader)
			delete(m.Header, jetstream.ExpectedLastSubjSeqSubjHeader)
		}
		ep.batchSeqHdr[0] = strconv.Itoa(i + 1)
		m.Header[headerBatchSeq] = ep.batchSeqHdr[:]
		if i == len(qs)-1 {
			m.Header[headerBatchCommit] = commitHdr
			break
		}
		if err := ep.p.nc.PublishMsg(m); err != nil {
			return 0, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), ep.p.ackTimeout)
	defer cancel()
	ack, err := ep.p.js.PublishMsg(ctx, m, noPublishRetry...)
	if err != nil {
		err = publishError(err)
		if errors.Is(err, errBatchesOff) {
			ep.p.batching.Store(batchNever)
		}
		return 0, err
	}
	return ack.Sequence, nil
}

// noPublishRetry leaves the retries of a publish nobody answered to
// storeRetrying, which bounds them by RetryTimeout.
var noPublishRetry = []jetstream.PublishOpt{jetstream.WithRetryAttempts(0)}

// wrongLastError is the server's refusal of an expected last sequence.
type wrongLastError struct{ *jetstream.APIError }

func (e *wrongLastError) Unwrap() error { return e.APIError }

// publishError sorts an error of a fenced publish or a batch commit for
// storeRetrying: a refused fence (wrongLastError), a batch stored nowhere
// (errNotBatched, batchRefusal), a retryable answer (errStatus) or
// another error.
func publishError(err error) error {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return err
	}
	switch {
	case apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
		return &wrongLastError{apiErr}
	case apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant, apiErr.Code == 503:
		return fmt.Errorf("%w: %w", err, errStatus)
	}
	if kind := batchRefusal(apiErr.ErrorCode); kind != nil {
		return fmt.Errorf("%w: %w", err, kind)
	}
	return err
}

// errStatus marks a server answer that is worth retrying.
var errStatus = errors.New("retryable")

// errNotBatched marks an atomic batch the server refused before storing
// any of it: the sender stores its events one by one instead. One that
// is errBatchesOff also turns batches off for the publisher.
var (
	errNotBatched = errors.New("atomic batch not stored")
	errBatchesOff = fmt.Errorf("atomic batches unsupported: %w", errNotBatched)
)

func transient(err error) bool {
	return errors.Is(err, errStatus) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, context.DeadlineExceeded)
}

// lastEventTimeout bounds LastEvent when ctx has no deadline.
const lastEventTimeout = 10 * time.Second

// LastEvent returns where the event stream of a turn stands in
// LLMW_EVENTS (the zero Position when the turn has no events), read from
// the stream's leader, so that a replica continuing the turn goes on with
// the next seq and fences its first publish on that event.
func LastEvent(ctx context.Context, nc *nats.Conn, prefix, sessionID, turnID string) (Position, error) {
	timeout := lastEventTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	pos, _, err := lastEvent(nc, jetstream.DefaultAPIPrefix, events.NewSubjects(prefix).Events(sessionID, turnID, "*"), timeout)
	if err != nil {
		return Position{}, fmt.Errorf("turn: last event of turn %s: %w", turnID, err)
	}
	return pos, nil
}

// lastEvent reads the last message of filter in LLMW_EVENTS from the
// stream's leader (jsread.LastMsg) and returns its position and CloudEvents id.
func lastEvent(nc *nats.Conn, apiPrefix, filter string, timeout time.Duration) (Position, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	m, err := jsread.LastMsg(ctx, nc, apiPrefix, events.StreamEvents, filter)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Position{}, "", nil
	}
	if err != nil {
		return Position{}, "", err
	}
	pos := Position{StreamSeq: m.Sequence}
	if v := m.Header.Get(events.HeaderSeq); v != "" {
		if pos.Seq, err = strconv.ParseUint(v, 10, 64); err != nil {
			return Position{}, "", fmt.Errorf("stream message %d: bad seq %q: %w", m.Sequence, v, err)
		}
	}
	return pos, m.Header.Get(events.HeaderID), nil
}
