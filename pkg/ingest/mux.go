package ingest

import (
	"sync"

	"github.com/nats-io/nats.go"
)

// minMuxBuffer is the least capacity of the channel that a Client's stream
// subscriptions share. Only the route goroutine reads it, and it does no
// more per message than a map look-up and an append, so the channel fills
// only when that goroutine is not scheduled while the connection's reader
// delivers this many messages; it is one allocation per Client (64 KiB).
const minMuxBuffer = 8192

// streamMux gives every open stream of a Client its own subscription (so
// that the server sends a replica only the streams it asked for) but one
// shared delivery channel: the route goroutine moves each message to its
// stream's queue, which grows with the messages waiting in it. A stream
// blocked mid-answer — the common state of a turn waiting on its model —
// then holds a few hundred bytes instead of a channel sized for its worst
// burst (Buffer pointers, 8 KiB at the turn service's default).
//
// The route goroutine runs only while streams are open, so a Client needs
// no Close.
type streamMux struct {
	size int // capacity of ch

	mu      sync.Mutex
	ch      chan *nats.Msg // allocated by the first subscribe
	queues  map[*nats.Subscription]*msgQueue
	running bool          // the route goroutine runs
	wake    chan struct{} // the last stream went away
}

func newStreamMux(buffer int) *streamMux {
	return &streamMux{
		size:   max(minMuxBuffer, buffer),
		queues: map[*nats.Subscription]*msgQueue{},
		wake:   make(chan struct{}, 1),
	}
}

// subscribe subscribes to subj; the stream's messages are queued on the
// returned queue, at most limit of them (more are dropped, which the
// reader sees as a seq gap).
func (x *streamMux) subscribe(nc *nats.Conn, subj string, limit int) (*nats.Subscription, *msgQueue, error) {
	q := &msgQueue{limit: limit, ready: make(chan struct{}, 1)}
	// Held across the subscription so that route cannot take a message of
	// it before its queue is registered.
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ch == nil {
		x.ch = make(chan *nats.Msg, x.size)
	}
	sub, err := nc.ChanSubscribe(subj, x.ch)
	if err != nil {
		return nil, nil, err
	}
	x.queues[sub] = q
	if !x.running {
		x.running = true
		go x.route()
	}
	return sub, q, nil
}

// unsubscribe ends sub. Once Unsubscribe returns the connection delivers
// nothing more to it, so messages of sub still in the shared channel are
// dropped by route.
func (x *streamMux) unsubscribe(sub *nats.Subscription) {
	_ = sub.Unsubscribe()
	x.mu.Lock()
	delete(x.queues, sub)
	last := len(x.queues) == 0
	x.mu.Unlock()
	if last {
		select {
		case x.wake <- struct{}{}:
		default:
		}
	}
}

func (x *streamMux) route() {
	for {
		select {
		case m := <-x.ch:
			x.mu.Lock()
			q := x.queues[m.Sub]
			x.mu.Unlock()
			if q != nil {
				q.push(m)
			}
		case <-x.wake:
			x.mu.Lock()
			if len(x.queues) == 0 {
				// Every subscription is gone: what is left in the
				// channel is theirs.
				for len(x.ch) > 0 {
					<-x.ch
				}
				x.running = false
				x.mu.Unlock()
				return
			}
			x.mu.Unlock()
		}
	}
}

// msgQueue holds the messages of one stream that its reader has not taken
// yet. Its slice grows only while messages wait and is dropped once a
// burst is read, so a stream's memory follows its backlog.
type msgQueue struct {
	limit int
	ready chan struct{} // capacity 1: messages arrived since the reader last looked

	mu   sync.Mutex
	msgs []*nats.Msg // msgs[head:] wait
	head int
}

// keepCap is the capacity of a drained queue's slice that is kept for the
// next messages; a larger one (left by a burst) is released.
const keepCap = 16

func (q *msgQueue) push(m *nats.Msg) {
	q.mu.Lock()
	if len(q.msgs)-q.head >= q.limit {
		q.mu.Unlock()
		return // the reader sees the gap in seq
	}
	if len(q.msgs) == cap(q.msgs) && q.head > 0 {
		n := copy(q.msgs, q.msgs[q.head:])
		clear(q.msgs[n:])
		q.msgs, q.head = q.msgs[:n], 0
	}
	q.msgs = append(q.msgs, m)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// pop takes the oldest waiting message; false when none waits.
func (q *msgQueue) pop() (*nats.Msg, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.msgs) {
		return nil, false
	}
	m := q.msgs[q.head]
	q.msgs[q.head] = nil
	q.head++
	if q.head == len(q.msgs) {
		q.head = 0
		if cap(q.msgs) > keepCap {
			q.msgs = nil
		} else {
			q.msgs = q.msgs[:0]
		}
	}
	return m, true
}
