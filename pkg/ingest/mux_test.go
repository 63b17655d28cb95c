package ingest

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/natstest"
)

func msg(i int) *nats.Msg { return &nats.Msg{Data: []byte(strconv.Itoa(i))} }

func popAll(q *msgQueue) []string {
	var out []string
	for {
		m, ok := q.pop()
		if !ok {
			return out
		}
		out = append(out, string(m.Data))
	}
}

// A queue keeps at most limit waiting messages, in order, and drops the
// rest; room frees as the reader takes them.
func TestMsgQueueLimitAndOrder(t *testing.T) {
	q := &msgQueue{limit: 3, ready: make(chan struct{}, 1)}
	for i := 1; i <= 5; i++ {
		q.push(msg(i))
	}
	if got := popAll(q); len(got) != 3 || got[0] != "1" || got[1] != "2" || got[2] != "3" {
		t.Fatalf("got %v, want [1 2 3] (4 and 5 dropped)", got)
	}
	// A steady backlog below the limit never drops nor grows without end.
	q = &msgQueue{limit: 3, ready: make(chan struct{}, 1)}
	q.push(msg(0))
	next := 0
	for i := 1; i <= 1000; i++ {
		q.push(msg(i))
		m, ok := q.pop()
		if !ok || string(m.Data) != strconv.Itoa(next) {
			t.Fatalf("pop %d: got %v %v, want %d", i, m, ok, next)
		}
		next++
		if cap(q.msgs) > 8 {
			t.Fatalf("a backlog of 1–2 messages grew the queue to %d", cap(q.msgs))
		}
	}
	if got := popAll(q); len(got) != 1 || got[0] != "1000" {
		t.Fatalf("rest = %v, want [1000]", got)
	}
	// A drained burst releases its memory.
	q = &msgQueue{limit: 1000, ready: make(chan struct{}, 1)}
	for i := range 100 {
		q.push(msg(i))
	}
	popAll(q)
	if q.msgs != nil {
		t.Errorf("a drained queue keeps capacity %d", cap(q.msgs))
	}
}

// Every stream gets its own messages, in order, whatever the
// interleaving on the shared channel, and the route goroutine stops once
// the last stream is gone and starts again for the next.
func TestStreamMuxRoutes(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	x := newStreamMux(0)
	const streams, per = 20, 50
	subs := make([]*nats.Subscription, streams)
	queues := make([]*msgQueue, streams)
	for i := range streams {
		var err error
		subs[i], queues[i], err = x.subscribe(e.NC, "mux.test."+strconv.Itoa(i), per)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := e.NC.Flush(); err != nil { // the subscriptions are live
		t.Fatal(err)
	}
	pub := e.Connect(t)
	for j := range per {
		for i := range streams {
			if err := pub.Publish("mux.test."+strconv.Itoa(i), []byte(strconv.Itoa(i)+"/"+strconv.Itoa(j))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			q := queues[i]
			for j := range per {
				var m *nats.Msg
				for {
					var ok bool
					if m, ok = q.pop(); ok {
						break
					}
					select {
					case <-q.ready:
					case <-time.After(10 * time.Second):
						t.Errorf("stream %d: message %d never came", i, j)
						return
					}
				}
				if want := strconv.Itoa(i) + "/" + strconv.Itoa(j); string(m.Data) != want {
					t.Errorf("stream %d got %q, want %q", i, m.Data, want)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, s := range subs {
		x.unsubscribe(s)
	}
	waitStopped(t, x)
	// The next stream starts the goroutine again.
	sub, q, err := x.subscribe(e.NC, "mux.test.again", 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish("mux.test.again", []byte("x")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-q.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("no message after the route goroutine restarted")
	}
	if m, ok := q.pop(); !ok || string(m.Data) != "x" {
		t.Fatalf("got %v %v", m, ok)
	}
	x.unsubscribe(sub)
	waitStopped(t, x)
}

func waitStopped(t *testing.T, x *streamMux) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		x.mu.Lock()
		running := x.running
		x.mu.Unlock()
		if !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the route goroutine still runs with no stream open")
		}
		time.Sleep(time.Millisecond)
	}
}
