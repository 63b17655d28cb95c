package quota

import (
	"strings"
	"testing"
)

// Waiters are served round-robin across sessions: one session's burst
// does not hold back another session's single call, and position says
// where each stands.
func TestQueueRoundRobin(t *testing.T) {
	var q rrQueue
	ws := map[string]*waiter{}
	for _, name := range []string{"a1", "a2", "a3", "b1", "c1", "c2"} {
		w := &waiter{session: name[:1]}
		ws[name] = w
		q.push(w)
	}
	want := []string{"a1", "b1", "c1", "a2", "c2", "a3"}
	for i, name := range want {
		if p := q.position(ws[name]); p != i+1 {
			t.Errorf("position of %s: %d, want %d", name, p, i+1)
		}
	}
	for i, w := range q.serveOrder(10) {
		if w != ws[want[i]] {
			t.Errorf("serveOrder[%d] is not %s", i, want[i])
		}
	}
	if n := len(q.serveOrder(4)); n != 4 {
		t.Errorf("serveOrder(4) returned %d waiters", n)
	}
	var got []string
	for w := q.peek(); w != nil; w = q.peek() {
		for name, x := range ws {
			if x == w {
				got = append(got, name)
			}
		}
		q.remove(w, true)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("served %v, want %v", got, want)
	}
	// A waiter that leaves does not move its session's place.
	q.push(ws["a1"])
	q.push(ws["b1"])
	q.push(ws["a2"])
	q.remove(ws["a1"], false)
	if q.peek() != ws["a2"] || q.len() != 2 {
		t.Fatalf("after a1 left: next is not a2 (len %d)", q.len())
	}
}
