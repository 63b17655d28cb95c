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
		reqs += s.Req
		toks += s.Tokens
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
	if used < 0 {
		return
	}
	for i := range r.Slots {
		if r.Slots[i].Start == slotStart {
			r.Slots[i].Tokens = max(r.Slots[i].Tokens+used-estimate, 0)
		}
	}
}
