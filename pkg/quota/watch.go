package quota

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// watch follows the bucket: the config key and every limit's record.
func (l *Limiter) watch(w jetstream.KeyWatcher, ready chan struct{}) {
	defer l.wg.Done()
	defer func() { _ = w.Stop() }()
	initial := true
	for {
		var e jetstream.KeyValueEntry
		var ok bool
		select {
		case e, ok = <-w.Updates():
		case <-l.ctx.Done():
			return
		}
		if !ok {
			return
		}
		if e == nil {
			if initial {
				initial = false
				close(ready)
			}
			continue
		}
		put := e.Operation() == jetstream.KeyValuePut
		if e.Key() == ConfigKey {
			l.applyShared(e.Value(), put)
			continue
		}
		key, isState := keyOf(e.Key())
		if !isState {
			continue
		}
		raw := []byte{} // a deleted record is an empty one
		if put {
			raw = e.Value()
		}
		l.mu.Lock()
		ks := l.keyState(key)
		if e.Revision() > ks.rev || !ks.known {
			ks.rec, ks.raw, ks.rev, ks.known = record{}, raw, e.Revision(), true
		}
		ks.wake()
		l.mu.Unlock()
	}
}

func (l *Limiter) applyShared(b []byte, put bool) {
	var shared *Limits
	if put {
		lim, err := Parse(b)
		if err != nil {
			l.log.Error("quota: config key ignored, the limits in force stay", "key", ConfigKey, "err", err)
			return
		}
		shared = &lim
	}
	l.mu.Lock()
	l.shared = shared
	l.kickAll()
	l.mu.Unlock()
	l.log.Info("quota: limits changed", "from_bucket", shared != nil)
}

// renew extends this replica's leases every third of a lease, so that a
// running call keeps its place and a dead replica's calls expire.
func (l *Limiter) renew() {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		ttl := l.effective().LeaseTTL
		l.mu.Unlock()
		t := time.NewTimer(ttl / 3)
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		l.mu.Lock()
		var keys []*keyState
		for _, ks := range l.keys {
			if len(ks.held) > 0 {
				keys = append(keys, ks)
			}
		}
		l.mu.Unlock()
		for _, ks := range keys {
			err := l.mutate(l.ctx, ks, func(r *record, now time.Time) bool {
				l.mu.Lock()
				defer l.mu.Unlock()
				if len(ks.held) == 0 {
					return false
				}
				if r.Leases == nil {
					r.Leases = map[string]leaseRec{}
				}
				// A lease that expired meanwhile (a stalled replica) is
				// written back: its call still runs.
				for id := range ks.held {
					r.Leases[id] = leaseRec{Owner: l.owner, Exp: ms(now.Add(ttl))}
				}
				return true
			})
			if err != nil && l.ctx.Err() == nil {
				l.log.Warn("quota: renew leases", "limit", ks.key, "err", err)
			}
		}
	}
}

// Usage is what a limit's record holds now.
type Usage struct {
	// Running counts the unexpired leases by replica.
	Running map[string]int
	// Requests and Tokens are the window's counts.
	Requests, Tokens int64
	// CoolUntil is the end of a cooldown; zero when none.
	CoolUntil time.Time
}

// Usage reads the shared record of the limit named key.
func (l *Limiter) Usage(ctx context.Context, key string) (Usage, error) {
	u := Usage{Running: map[string]int{}}
	e, err := l.kv.Get(ctx, stateKey(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return u, nil
	}
	if err != nil {
		return u, err
	}
	r := decodeRecord(e.Value())
	l.mu.Lock()
	window := l.effective().Window
	l.mu.Unlock()
	now := time.Now()
	r.prune(ms(now), window)
	for _, x := range r.Leases {
		u.Running[x.Owner]++
	}
	for _, s := range r.Slots {
		u.Requests += s.Req
		u.Tokens += s.Tokens
	}
	if r.CoolUntil > ms(now) {
		u.CoolUntil = time.UnixMilli(r.CoolUntil)
	}
	return u, nil
}

// Lease holds a call's limits until Release.
type Lease struct {
	l     *Limiter
	parts []part
	once  sync.Once
}

// Release gives the limits back and charges the call the tokens it used
// (used < 0: keep the estimate). It is safe to call more than once; only
// the first counts.
func (s *Lease) Release(ctx context.Context, used int64) {
	if s == nil {
		return
	}
	s.once.Do(func() {
		for _, p := range s.parts {
			if err := s.l.releasePart(ctx, p, used); err != nil {
				s.l.log.Warn("quota: release; the lease expires on its own", "limit", p.ks.key, "err", err)
			}
		}
	})
}

// Cooldown stops the calls of this lease's limits on every replica for d
// (see Limiter.Cooldown).
func (s *Lease) Cooldown(ctx context.Context, d time.Duration) error {
	if s == nil || len(s.parts) == 0 {
		return nil
	}
	s.l.mu.Lock()
	lims := s.l.effective()
	s.l.mu.Unlock()
	if d <= 0 {
		d = lims.Cooldown
	}
	d = min(d, MaxCooldown)
	var errs []error
	for _, p := range s.parts {
		errs = append(errs, s.l.cool(ctx, p.ks, d))
	}
	return errors.Join(errs...)
}

// RetryAfterer is implemented by provider errors that carry the
// provider's Retry-After.
type RetryAfterer interface {
	RetryAfter() time.Duration
}

// RetryAfter returns the Retry-After an error carries (RetryAfterer), 0
// when none.
func RetryAfter(err error) time.Duration {
	var ra RetryAfterer
	if errors.As(err, &ra) {
		return ra.RetryAfter()
	}
	return 0
}
