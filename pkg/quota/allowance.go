package quota

import "time"

// A replica that keeps calling a limit reserves some of it in the record
// ahead of its calls: places (leases no call holds yet) and credit
// (requests and tokens charged to the current slot). A call that finds
// both starts at once, without a write; its request is recorded when it
// ends, in the write that gives its lease back, which also keeps the
// lease ready for the next call while this replica has calls running.
// The record counts what is reserved as it counts calls, so N replicas
// still never exceed the limit; a replica reserves only while the limit
// is at most half used, gives everything back when its last call of the
// limit ends, and credit of a past slot with its next write.
const (
	// maxReady bounds the places one replica keeps ready per limit.
	maxReady = 8
	// maxCredit bounds the requests one replica reserves per limit.
	maxCredit = 32
)

// reservation is what a write should reserve.
type reservation struct {
	places int
	reqs   int64
}

// wanted is what the loop's next write reserves: more places and credit
// while this replica has calls of the limit running (demand: more wait
// now); a lone call reserves nothing. l.mu is held.
func (ks *keyState) wanted(lim Limit, demand bool) reservation {
	if lim.Key == "" || ks.inflight == 0 {
		return reservation{}
	}
	var w reservation
	if n := maxReady - len(ks.ready) - ks.keeping; n > 0 && (demand || len(ks.ready) < maxReady/2) {
		w.places = n
	}
	if w.places == 0 && len(ks.ready)+ks.keeping == 0 {
		return reservation{}
	}
	if (lim.RequestsPerMinute > 0 || lim.TokensPerMinute > 0) && (demand || ks.credit.reqs < maxCredit/2) {
		w.reqs = maxCredit - ks.credit.reqs
	}
	return w
}

// takeReady starts a call on a ready place and the current slot's
// credit, when this replica has both and the record last seen has no
// cooldown and is not over the limit (limits changed). l.mu is held.
func (ks *keyState) takeReady(lim Limit, window time.Duration, tokens int64, now time.Time) (part, bool) {
	if len(ks.ready) == 0 {
		return part{}, false
	}
	if ks.raw != nil {
		ks.rec, ks.raw = decodeRecord(ks.raw), nil
	}
	t := ms(now)
	r := &ks.rec
	if r.CoolUntil > t || (lim.Concurrent > 0 && len(r.Leases) > lim.Concurrent) {
		return part{}, false
	}
	p := part{ks: ks, slotStart: t - t%slotWidth(window), estimate: tokens, fast: true}
	if lim.RequestsPerMinute > 0 || lim.TokensPerMinute > 0 {
		c := &ks.credit
		if c.start != p.slotStart || c.reqs < 1 || (lim.TokensPerMinute > 0 && c.tokens < tokens) {
			return part{}, false
		}
		var reqs, toks int64
		for _, s := range r.Slots {
			reqs += s.Req + s.Res
			toks += s.Tokens + s.ResTok
		}
		if (lim.RequestsPerMinute > 0 && reqs > int64(lim.RequestsPerMinute)) || (lim.TokensPerMinute > 0 && toks > lim.TokensPerMinute) {
			return part{}, false
		}
		if lim.TokensPerMinute > 0 {
			p.creditTokens = tokens
		}
		c.reqs--
		c.tokens -= p.creditTokens
		p.credited = true
	}
	p.id = ks.ready[len(ks.ready)-1]
	ks.ready = ks.ready[:len(ks.ready)-1]
	ks.held[p.id] = p
	return p, true
}

// takeRefunds returns the credits to give back with the next write: the
// current credit too once its slot has passed. l.mu is held.
func (ks *keyState) takeRefunds(window time.Duration, now time.Time) []credit {
	t := ms(now)
	if c := ks.credit; (c.reqs > 0 || c.tokens > 0) && c.start != t-t%slotWidth(window) {
		ks.refunds = append(ks.refunds, c)
		ks.credit = credit{}
	}
	rf := ks.refunds
	ks.refunds = nil
	return rf
}

// giveBack ends a call's part: its lease stays ready for the next call
// (rel.keep) while this replica has other calls of the limit running,
// none waits, and the record last seen is at most half full; the last
// call's end gives back every ready place and the credit. l.mu is held.
func (l *Limiter) giveBack(rel *pendingRelease) {
	ks := rel.p.ks
	if ks.inflight > 0 {
		ks.inflight--
	}
	lim, ok := l.effective().limit(ks.key)
	if ks.raw != nil {
		ks.rec, ks.raw = decodeRecord(ks.raw), nil
	}
	rel.keep = ok && !l.closed && ks.inflight > 0 && ks.q.len() == 0 && len(ks.ready)+ks.keeping < maxReady &&
		(lim.Concurrent == 0 || len(ks.rec.Leases) <= lim.Concurrent/2)
	if rel.keep {
		ks.keeping++
	} else {
		delete(ks.held, rel.p.id)
	}
	if ks.inflight == 0 {
		ks.dropReady()
	}
}

// dropReady gives back the ready places and the credit with the next
// write. l.mu is held.
func (ks *keyState) dropReady() {
	for _, id := range ks.ready {
		delete(ks.held, id)
		ks.releases = append(ks.releases, &pendingRelease{p: part{ks: ks, id: id}, used: -1, done: make(chan error, 1)})
	}
	ks.ready = nil
	if ks.credit.reqs > 0 || ks.credit.tokens > 0 {
		ks.refunds = append(ks.refunds, ks.credit)
		ks.credit = credit{}
	}
}

// applyRelease writes one release into r: the call's request and tokens
// (settled, for a call started on credit; corrected otherwise), and its
// lease ended, or renewed until exp when rel.keep and the record still
// has it. It reports whether the lease was kept.
func (l *Limiter) applyRelease(r *record, rel *pendingRelease, exp int64) bool {
	p := rel.p
	if p.fast {
		r.settle(p, rel.used)
	} else {
		r.correct(p.slotStart, p.estimate, rel.used)
	}
	if _, ok := r.Leases[p.id]; ok && rel.keep {
		r.Leases[p.id] = leaseRec{Owner: l.owner, Exp: exp}
		return true
	}
	delete(r.Leases, p.id)
	return false
}

// settled makes the kept leases of a written pass ready. l.mu is held.
func (ks *keyState) settled(rels []*pendingRelease, kept []bool, err error, closed bool) {
	for i, rel := range rels {
		if !rel.keep {
			continue
		}
		ks.keeping--
		if err == nil && kept[i] && !closed {
			ks.ready = append(ks.ready, rel.p.id)
			ks.held[rel.p.id] = part{ks: ks, id: rel.p.id}
		} else {
			delete(ks.held, rel.p.id)
		}
	}
	if ks.inflight == 0 && (len(ks.ready) > 0 || ks.credit.reqs > 0) {
		ks.dropReady()
	}
}

// reserved keeps what a written pass reserved. l.mu is held.
func (ks *keyState) reserved(placed []string, got credit) {
	for _, id := range placed {
		ks.ready = append(ks.ready, id)
		ks.held[id] = part{ks: ks, id: id}
	}
	if got.reqs == 0 && got.tokens == 0 {
		return
	}
	if ks.credit.start == got.start {
		ks.credit.reqs += got.reqs
		ks.credit.tokens += got.tokens
		return
	}
	if ks.credit.reqs > 0 || ks.credit.tokens > 0 {
		ks.refunds = append(ks.refunds, ks.credit)
	}
	ks.credit = got
}
