package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
)

// item is one stored event of the followed turn or of one of its child
// turns.
type item struct {
	ev      events.WorkerEvent
	turn    string // the turn whose subject it is on
	seq     uint64 // stream sequence in LLMW_EVENTS
	pending uint64 // stored events not yet delivered
	err     error
}

// flushAt is how much of a replayed backlog is written before a flush;
// live events are flushed one by one.
const flushAt = 16 << 10

// pullBuffer is how many events a stream's consumer holds: small, so that
// an idle stream costs little memory.
const pullBuffer = 32

// stream answers with the UI message stream of turnID (of session): every
// event stored in LLMW_EVENTS from the first, then live, until the turn
// ends or pauses. Events with a stream sequence up to after are mapped
// (the mapper's ids depend on them) but not written: the client has
// them. rejected delivers the turn service's refusal of the request that
// started this stream (nil for none). A client that goes away leaves the
// turn running.
func (g *Gateway) stream(w http.ResponseWriter, r *http.Request, session, turnID string, after uint64, rejected <-chan events.TurnRejected) {
	if !g.open() {
		w.Header().Set("Retry-After", "1")
		writeError(w, ErrShuttingDown)
		return
	}
	defer g.streams.Done()
	ctx, cancel := context.WithTimeout(r.Context(), g.cfg.MaxStreamDuration)
	defer cancel()
	tr := g.newTree(session, turnID)
	if err := tr.start(ctx, 1); err != nil {
		writeError(w, err)
		return
	}
	defer tr.stop()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	h.Set(HeaderStream, StreamVersion)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(now().Add(g.cfg.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	start := Chunk{Type: PartStart, MessageID: turnID}
	buf := start.AppendSSE(make([]byte, 0, 512))
	if !write(buf) {
		return
	}
	buf = buf[:0]
	m := NewTreeMapper(turnID)
	var chunks []Chunk
	keep := time.NewTicker(g.cfg.KeepAlive)
	defer keep.Stop()
	end := func(cs ...Chunk) {
		for i := range cs {
			buf = cs[i].AppendSSE(buf)
		}
		buf = append(buf, Done...)
		write(buf)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.done:
			return
		case <-keep.C:
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		case rj, ok := <-rejected:
			if !ok {
				rejected = nil
				continue
			}
			end(Chunk{Type: PartError, ErrorText: "turn " + rj.TurnID + " not run: " + rj.Code + ": " + rj.Reason}, Chunk{Type: PartFinish, FinishReason: "error"})
			return
		case x := <-tr.items:
			if x.err != nil {
				g.cfg.Logger.Warn("gateway: read events", "turn_id", turnID, "err", x.err)
				end(Chunk{Type: PartError, ErrorText: "reading the turn's events: " + x.err.Error()})
				return
			}
			if x.ev == nil || !tr.fresh(x) {
				continue
			}
			chunks = m.MapOf(chunks[:0], x.turn, x.ev)
			if x.seq > after {
				for i := range chunks {
					buf = chunks[i].AppendSSE(buf)
				}
			}
			if m.Ended() {
				end()
				return
			}
			if found := m.Found(); len(found) > 0 {
				// The child turns' events follow from here, and those
				// stored before their parent named them.
				if err := tr.add(ctx, x.seq, found); err != nil {
					g.cfg.Logger.Warn("gateway: follow child turns", "turn_id", turnID, "err", err)
					end(Chunk{Type: PartError, ErrorText: "following the turn's sub-agents: " + err.Error()})
					return
				}
				x.pending = 0 // the restarted reader counts anew: flush
			} else if m.Waiting() && x.pending == 0 && x.seq > after {
				// Waiting for a person: the stream ends, the answer (the
				// next POST) resumes the paused turn.
				end(Chunk{Type: PartFinish})
				return
			}
			if len(buf) > 0 && (x.pending == 0 || len(buf) >= flushAt) {
				if !write(buf) {
					return
				}
				buf = buf[:0]
			}
		}
	}
}

// tree reads the stored events of a turn and of the child turns its
// events name, in one order every reader of the same stored events
// takes: by stream sequence, a child's events from its parent's first
// llmw.tool.child on (its earlier ones, if any, right after that event).
// One ordered consumer reads the subjects of every turn known so far;
// a new child restarts it with the child's subjects added.
type tree struct {
	g       *Gateway
	filters []string
	seen    map[string]uint64 // per turn, the last stream sequence mapped
	items   chan item
	it      jetstream.MessagesContext
	quit    chan struct{}
	exited  chan struct{}
}

func (g *Gateway) newTree(session, turnID string) *tree {
	return &tree{g: g, filters: []string{g.subj.Events(session, turnID, "*")}, seen: map[string]uint64{}}
}

// start reads the tree's subjects from stream sequence from on.
func (t *tree) start(ctx context.Context, from uint64) error {
	cons, err := t.g.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: t.filters, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: max(from, 1),
	})
	if err != nil {
		return err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(pullBuffer))
	if err != nil {
		return err
	}
	t.it, t.items, t.quit, t.exited = it, make(chan item), make(chan struct{}), make(chan struct{})
	go read(t.g.subj.P(), it, t.items, t.quit, t.exited)
	return nil
}

// stop ends the reader and waits for it.
func (t *tree) stop() {
	if t.it == nil {
		return
	}
	close(t.quit)
	t.it.Stop()
	<-t.exited
	t.it = nil
}

// fresh reports whether x is an event not mapped yet (a restarted reader
// delivers again what it had), and records it.
func (t *tree) fresh(x item) bool {
	if x.seq <= t.seen[x.turn] {
		return false
	}
	t.seen[x.turn] = x.seq
	return true
}

// add follows the child turns found at stream sequence at: from the
// sequence after it, or from a child's first event when that is earlier.
func (t *tree) add(ctx context.Context, at uint64, found []Child) error {
	from := at + 1
	for _, c := range found {
		f := t.g.subj.Events(c.SessionID, c.TurnID, "*")
		t.filters = append(t.filters, f)
		first, err := t.g.events.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(f))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return fmt.Errorf("first event of %s: %w", c.TurnID, err)
		case first.Sequence < from:
			from = first.Sequence
		}
	}
	t.stop()
	return t.start(ctx, from)
}

// read delivers the consumer's events until it is stopped.
func read(p string, it jetstream.MessagesContext, out chan<- item, quit <-chan struct{}, exited chan<- struct{}) {
	defer close(exited)
	for {
		m, err := it.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return
		}
		var x item
		if err != nil {
			x.err = err
		} else {
			_, x.turn = subjectIDs(p, m.Subject())
			env, err := events.DecodeEnvelope(m.Headers(), m.Data())
			if err == nil {
				x.ev, err = events.DecodeWorkerEnvelope(env)
				if errors.Is(err, events.ErrUnknownType) {
					err = nil
				}
			}
			x.err = err
			if md, err := m.Metadata(); err == nil {
				x.seq, x.pending = md.Sequence.Stream, md.NumPending
			}
		}
		select {
		case out <- x:
		case <-quit:
			return
		}
		if x.err != nil {
			return
		}
	}
}
