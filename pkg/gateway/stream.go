package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
)

// item is one stored event of the followed turn.
type item struct {
	ev      events.WorkerEvent
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
	cons, err := g.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{g.subj.Events(session, turnID, "*")}, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		writeError(w, err)
		return
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(pullBuffer))
	if err != nil {
		writeError(w, err)
		return
	}
	items := make(chan item)
	quit := make(chan struct{})
	exited := make(chan struct{})
	go read(it, items, quit, exited)
	defer func() {
		close(quit)
		it.Stop()
		<-exited
	}()

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
	m := NewMapper()
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
		case x := <-items:
			if x.err != nil {
				g.cfg.Logger.Warn("gateway: read events", "turn_id", turnID, "err", x.err)
				end(Chunk{Type: PartError, ErrorText: "reading the turn's events: " + x.err.Error()})
				return
			}
			if x.ev == nil {
				continue
			}
			chunks = m.Map(chunks[:0], x.ev)
			if x.seq > after {
				for i := range chunks {
					buf = chunks[i].AppendSSE(buf)
				}
			}
			switch {
			case m.Ended():
				end()
				return
			case m.Paused() && x.pending == 0 && x.seq > after:
				// Waiting for a person: the stream ends, the answer (the
				// next POST) resumes the turn.
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

// read delivers the consumer's events until it is stopped.
func read(it jetstream.MessagesContext, out chan<- item, quit <-chan struct{}, exited chan<- struct{}) {
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
