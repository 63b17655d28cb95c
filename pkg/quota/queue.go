package quota

import "slices"

// waiter is one call waiting for a limit on this replica.
type waiter struct {
	session string
	tokens  int64
	done    chan grant // buffered: the loop never blocks on it
	queued  func(position int)
}

type grant struct {
	part part
	err  error
}

// rrQueue holds the waiters of one limit, served round-robin across
// sessions: a session with many calls waiting gets one turn in each round,
// so it cannot starve a session with one call.
type rrQueue struct {
	order     []string // sessions that have waiters; order[0] is served next
	bySession map[string][]*waiter
	n         int
}

func (q *rrQueue) len() int { return q.n }

func (q *rrQueue) push(w *waiter) {
	if q.bySession == nil {
		q.bySession = map[string][]*waiter{}
	}
	if len(q.bySession[w.session]) == 0 {
		q.order = append(q.order, w.session)
	}
	q.bySession[w.session] = append(q.bySession[w.session], w)
	q.n++
}

// peek returns the waiter served next, nil when none waits.
func (q *rrQueue) peek() *waiter {
	if len(q.order) == 0 {
		return nil
	}
	return q.bySession[q.order[0]][0]
}

// remove takes w out and reports whether it was there. served moves w's
// session to the end of the round; a waiter that gave up leaves its
// session's place alone.
func (q *rrQueue) remove(w *waiter, served bool) bool {
	ws := q.bySession[w.session]
	i := slices.Index(ws, w)
	if i < 0 {
		return false
	}
	ws = slices.Delete(ws, i, i+1)
	q.n--
	oi := slices.Index(q.order, w.session)
	if len(ws) == 0 {
		delete(q.bySession, w.session)
		q.order = slices.Delete(q.order, oi, oi+1)
		return true
	}
	q.bySession[w.session] = ws
	if served && oi == 0 {
		q.order = append(q.order[1:], w.session)
	}
	return true
}

// position is w's place (1 = next) in the order the queue would serve
// its waiters if nothing else arrived; 0 when w is not queued.
func (q *rrQueue) position(w *waiter) int {
	ws := q.bySession[w.session]
	i := slices.Index(ws, w)
	if i < 0 {
		return 0
	}
	k := slices.Index(q.order, w.session)
	before := i
	for j, s := range q.order {
		n := len(q.bySession[s])
		switch {
		case j < k:
			before += min(n, i+1)
		case j > k:
			before += min(n, i)
		}
	}
	return before + 1
}

// serveOrder returns up to n waiters in the order the queue serves them.
func (q *rrQueue) serveOrder(n int) []*waiter {
	var out []*waiter
	for round := 0; len(out) < min(n, q.n); round++ {
		for _, s := range q.order {
			if ws := q.bySession[s]; round < len(ws) && len(out) < n {
				out = append(out, ws[round])
			}
		}
	}
	return out
}
