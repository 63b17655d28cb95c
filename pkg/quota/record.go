package quota

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"time"
)

// record is the shared state of one limit: the value of its key in the
// bucket, changed only by compare-and-set on the key's revision.
type record struct {
	// Leases are the running calls, by lease id.
	Leases map[string]leaseRec `json:"leases,omitempty"`
	// Slots count the requests and tokens of the last window in
	// slotsPerWindow slots, oldest first.
	Slots []slot `json:"slots,omitempty"`
	// CoolUntil (unix ms) stops every call until then: a provider's 429.
	CoolUntil int64 `json:"cool_until,omitempty"`
}

type leaseRec struct {
	// Owner is the replica holding the lease.
	Owner string `json:"owner"`
	// Exp (unix ms) is when the lease ends unless renewed.
	Exp int64 `json:"exp"`
}

type slot struct {
	Start  int64 `json:"s"` // unix ms, a multiple of the slot width
	Req    int64 `json:"r"`
	Tokens int64 `json:"t"`
	// Res and ResTok are requests and tokens a replica reserved in this
	// slot for calls it may start without a write (its credit); they
	// count against the limits as Req and Tokens do.
	Res    int64 `json:"rr,omitempty"`
	ResTok int64 `json:"rt,omitempty"`
}

func stateKey(key string) string {
	// Limit keys hold ':' and '.', which a KV key cannot or should not.
	return stateKeyPrefix + base64.RawURLEncoding.EncodeToString([]byte(key))
}

func keyOf(kvKey string) (string, bool) {
	if len(kvKey) <= len(stateKeyPrefix) || kvKey[:len(stateKeyPrefix)] != stateKeyPrefix {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(kvKey[len(stateKeyPrefix):])
	return string(b), err == nil
}

func decodeRecord(b []byte) record {
	var r record
	_ = json.Unmarshal(b, &r) // a record nobody can read counts as empty
	return r
}

func (r record) encode() []byte {
	b, _ := json.Marshal(r)
	return b
}

func (r record) clone() record {
	r.Leases = maps.Clone(r.Leases)
	r.Slots = slices.Clone(r.Slots)
	return r
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// prune drops the expired leases and the slots that left the window.
func (r *record) prune(now int64, window time.Duration) {
	for id, l := range r.Leases {
		if l.Exp <= now {
			delete(r.Leases, id)
		}
	}
	width := slotWidth(window)
	r.Slots = slices.DeleteFunc(r.Slots, func(s slot) bool { return s.Start+width <= now-window.Milliseconds() })
}

func slotWidth(window time.Duration) int64 { return max(window.Milliseconds()/slotsPerWindow, 1) }

// admit decides whether a call estimated at tokens may start at now under
// lim. When it may, it records the call (a lease id until exp, a request
// and the tokens in the current slot); when not, wait is how long until it
// may be worth trying again without news from other replicas. The window
// counts whole slots, so a slot that is partly outside still counts: the
// requests of any window-long span are never more than the limit.
func (r *record) admit(now int64, lim Limit, window time.Duration, tokens int64, id, owner string, exp int64) (ok bool, wait time.Duration) {
	r.prune(now, window)
	if r.CoolUntil > now {
		return false, time.Duration(r.CoolUntil-now) * time.Millisecond
	}
	width := slotWidth(window)
	var reqs, toks int64
	for _, s := range r.Slots {
		reqs += s.Req + s.Res
		toks += s.Tokens + s.ResTok
	}
	// The oldest slot leaves the window at:
	slotOut := func() time.Duration {
		if len(r.Slots) == 0 {
			return time.Duration(width) * time.Millisecond
		}
		return time.Duration(r.Slots[0].Start+width+window.Milliseconds()-now) * time.Millisecond
	}
	if lim.Concurrent > 0 && len(r.Leases) >= lim.Concurrent {
		next := int64(-1)
		for _, l := range r.Leases {
			if next < 0 || l.Exp < next {
				next = l.Exp
			}
		}
		return false, time.Duration(next-now) * time.Millisecond
	}
	if lim.RequestsPerMinute > 0 && reqs >= int64(lim.RequestsPerMinute) {
		return false, slotOut()
	}
	// A call larger than the whole budget goes alone into an empty window
	// rather than never.
	if lim.TokensPerMinute > 0 && toks > 0 && toks+tokens > lim.TokensPerMinute {
		return false, slotOut()
	}
	if r.Leases == nil {
		r.Leases = map[string]leaseRec{}
	}
	r.Leases[id] = leaseRec{Owner: owner, Exp: exp}
	start := now - now%width
	if n := len(r.Slots); n > 0 && r.Slots[n-1].Start == start {
		r.Slots[n-1].Req++
		r.Slots[n-1].Tokens += tokens
	} else {
		r.Slots = append(r.Slots, slot{Start: start, Req: 1, Tokens: tokens})
	}
	return true, 0
}

// release ends lease id and corrects the tokens its call was charged in
// the slot of start: estimate becomes used.
func (r *record) release(id string, slotStart, estimate, used int64) {
	delete(r.Leases, id)
	r.correct(slotStart, estimate, used)
}

// correct turns the estimate a call was charged in the slot of
// slotStart into used (used < 0 keeps it).
func (r *record) correct(slotStart, estimate, used int64) {
	if used < 0 {
		return
	}
	for i := range r.Slots {
		if r.Slots[i].Start == slotStart {
			r.Slots[i].Tokens = max(r.Slots[i].Tokens+used-estimate, 0)
		}
	}
}

// settle records a call that started on this replica's credit (part.fast)
// in the slot it started in: one request and the tokens it used (used < 0:
// its estimate) move from the reservation to the counts.
func (r *record) settle(p part, used int64) {
	if used < 0 {
		used = p.estimate
	}
	for i := range r.Slots {
		s := &r.Slots[i]
		if s.Start != p.slotStart {
			continue
		}
		if p.credited {
			s.Res, s.ResTok = max(s.Res-1, 0), max(s.ResTok-p.creditTokens, 0)
		}
		s.Req++
		s.Tokens += used
		return
	}
	if p.credited {
		return // the slot left the window: so did the call's request
	}
	// A limit without per-minute limits reserves no slot: the call's
	// slot is made here, in order, while it is in the window.
	i := len(r.Slots)
	for i > 0 && r.Slots[i-1].Start > p.slotStart {
		i--
	}
	r.Slots = slices.Insert(r.Slots, i, slot{Start: p.slotStart, Req: 1, Tokens: used})
}

// unreserve gives back what is left of a credit.
func (r *record) unreserve(c credit) {
	for i := range r.Slots {
		if s := &r.Slots[i]; s.Start == c.start {
			s.Res, s.ResTok = max(s.Res-c.reqs, 0), max(s.ResTok-c.tokens, 0)
		}
	}
}

// reserve takes, while the limit is at most half used, up to leases
// places (lease ids of owner until exp, for calls to come) and, for a
// limit with per-minute limits, up to reqs requests of perCall tokens
// each in the slot of now: what this replica may then start without a
// write. Half the limit stays for the other replicas, so that a replica's
// reservation never makes another wait.
func (r *record) reserve(now int64, lim Limit, window time.Duration, ids []string, owner string, exp int64, reqs, perCall int64) (placed []string, c credit) {
	r.prune(now, window)
	if r.CoolUntil > now {
		return nil, credit{}
	}
	n := len(ids)
	if lim.Concurrent > 0 {
		n = min(n, lim.Concurrent/2-len(r.Leases))
	}
	for _, id := range ids[:max(n, 0)] {
		if r.Leases == nil {
			r.Leases = map[string]leaseRec{}
		}
		r.Leases[id] = leaseRec{Owner: owner, Exp: exp}
		placed = append(placed, id)
	}
	if lim.RequestsPerMinute == 0 && lim.TokensPerMinute == 0 {
		return placed, credit{}
	}
	var used, toks int64
	for _, s := range r.Slots {
		used += s.Req + s.Res
		toks += s.Tokens + s.ResTok
	}
	if lim.RequestsPerMinute > 0 {
		reqs = min(reqs, int64(lim.RequestsPerMinute)/2-used)
	}
	perCall = max(perCall, 1)
	if lim.TokensPerMinute > 0 {
		reqs = min(reqs, (lim.TokensPerMinute/2-toks)/perCall)
	}
	if reqs <= 0 {
		return placed, credit{}
	}
	width := slotWidth(window)
	c = credit{start: now - now%width, reqs: reqs}
	if lim.TokensPerMinute > 0 {
		c.tokens = reqs * perCall
	}
	if n := len(r.Slots); n > 0 && r.Slots[n-1].Start == c.start {
		r.Slots[n-1].Res += c.reqs
		r.Slots[n-1].ResTok += c.tokens
	} else {
		r.Slots = append(r.Slots, slot{Start: c.start, Res: c.reqs, ResTok: c.tokens})
	}
	return placed, c
}

// credit is what a replica reserved in one slot and has not used yet.
type credit struct {
	start, reqs, tokens int64
}
