package quota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"gopkg.in/yaml.v3"

	"github.com/llmworker/llmworker/pkg/events"
)

// Config configures a Limiter. The zero value works: a random replica
// name, no limits of its own (the bucket's config key may set some) and
// slog.Default.
type Config struct {
	// Replica names this replica in the leases it holds ("" = random).
	Replica string
	// Limits apply while the bucket has no config key (a file or flags).
	Limits Limits
	// Logger receives what goes wrong with the bucket (nil = slog.Default()).
	Logger *slog.Logger
}

// Request is one call that asks for its limits.
type Request struct {
	// Provider and Model are the two halves of the model string.
	Provider, Model string
	// Session is the unit of fairness: waiting calls are served
	// round-robin across sessions ("" is one session of its own).
	Session string
	// Tokens is the call's estimate of the tokens it uses, charged to the
	// tokens-per-minute limits until Lease.Release corrects it.
	Tokens int64
	// Queued, if set, is called once when the call has to wait, with its
	// place in this replica's queue (1 = next).
	Queued func(position int)
}

// Limiter holds calls to the limits that every replica shares through the
// LLMW_QUOTA bucket. Its methods are safe for concurrent use.
type Limiter struct {
	kv    jetstream.KeyValue
	owner string
	log   *slog.Logger
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup

	mu     sync.Mutex
	local  Limits
	shared *Limits // the config key's, while it exists
	keys   map[string]*keyState
	closed bool
}

// keyState is what this replica knows of one limit.
type keyState struct {
	key, kvKey string
	rec        record // the latest value seen (watch or own write)
	raw        []byte // that value undecoded, when the watch brought it
	rev        uint64
	known      bool
	q          rrQueue
	running    bool          // a loop serves q
	kick       chan struct{} // news for the loop: a release, a change, a waiter left
	held       map[string]part
	releases   []*pendingRelease // for the loop's next write
}

// part is a lease on one limit.
type part struct {
	ks        *keyState
	id        string
	slotStart int64
	estimate  int64
}

// New opens the LLMW_QUOTA bucket and follows it: the config key and the
// limits' records. It returns once it has read what the bucket holds.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Limiter, error) {
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, events.BucketQuota)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotProvisioned, events.BucketQuota)
	}
	if err != nil {
		return nil, fmt.Errorf("quota: open %s: %w", events.BucketQuota, err)
	}
	if cfg.Replica == "" {
		cfg.Replica = nuid.Next()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Limiter{kv: kv, owner: cfg.Replica, log: cfg.Logger, local: cfg.Limits, keys: map[string]*keyState{}}
	l.ctx, l.stop = context.WithCancel(context.Background())
	w, err := kv.WatchAll(l.ctx)
	if err != nil {
		l.stop()
		return nil, fmt.Errorf("quota: watch %s: %w", events.BucketQuota, err)
	}
	ready := make(chan struct{})
	l.wg.Add(2)
	go l.watch(w, ready)
	go l.renew()
	select {
	case <-ready:
	case <-ctx.Done():
		l.Close()
		return nil, ctx.Err()
	}
	return l, nil
}

// Limits returns the limits in force: the config key's when it exists,
// else Config.Limits or the last SetLimits.
func (l *Limiter) Limits() Limits {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.effective()
}

func (l *Limiter) effective() Limits {
	if l.shared != nil {
		return l.shared.withDefaults()
	}
	return l.local.withDefaults()
}

// SetLimits replaces this replica's own limits (a reloaded file); the
// config key, while it exists, still wins.
func (l *Limiter) SetLimits(lim Limits) error {
	if err := lim.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	l.local = lim
	l.kickAll()
	l.mu.Unlock()
	return nil
}

// PutLimits writes lim to the bucket's config key, which every replica
// follows at once in place of its own limits.
func PutLimits(ctx context.Context, js jetstream.JetStream, lim Limits) error {
	if err := lim.Validate(); err != nil {
		return err
	}
	kv, err := js.KeyValue(ctx, events.BucketQuota)
	if err != nil {
		return fmt.Errorf("quota: open %s: %w", events.BucketQuota, err)
	}
	b, err := yaml.Marshal(lim)
	if err != nil {
		return fmt.Errorf("quota: encode limits: %w", err)
	}
	_, err = kv.Put(ctx, ConfigKey, b)
	return err
}

// Close stops following the bucket and gives back the leases this replica
// still holds, so that the others need not wait for them to expire.
// Acquire returns ErrClosed afterwards.
func (l *Limiter) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	var held []part
	for _, ks := range l.keys {
		for _, p := range ks.held {
			held = append(held, p)
		}
	}
	l.mu.Unlock()
	l.stop()
	l.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var rels []*pendingRelease
	l.mu.Lock()
	for _, ks := range l.keys {
		rels = append(rels, ks.releases...)
		ks.releases = nil
	}
	l.mu.Unlock()
	for _, p := range held {
		rels = append(rels, &pendingRelease{p: p, used: -1, done: make(chan error, 1)})
	}
	for _, rel := range rels {
		_ = l.releaseNow(ctx, rel)
	}
	return nil
}

// keyState returns the state of key, made on first use. l.mu is held.
func (l *Limiter) keyState(key string) *keyState {
	ks := l.keys[key]
	if ks == nil {
		ks = &keyState{key: key, kvKey: stateKey(key), kick: make(chan struct{}, 1), held: map[string]part{}}
		l.keys[key] = ks
	}
	return ks
}

func (ks *keyState) wake() {
	select {
	case ks.kick <- struct{}{}:
	default:
	}
}

func (l *Limiter) kickAll() {
	for _, ks := range l.keys {
		ks.wake()
	}
}

// Acquire waits until every limit that covers req lets it through and
// returns the lease that holds them; Release it when the call ends. A call
// no limit covers gets an empty lease at once. It fails with ErrQueueFull
// when a queue is full, ErrQueueTimeout after Limits.MaxWait, ctx's error
// when ctx ends first, and the bucket's error when the bucket cannot be
// read or written.
func (l *Limiter) Acquire(ctx context.Context, req Request) (*Lease, error) {
	l.mu.Lock()
	lims := l.effective()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	lease := &Lease{l: l}
	set := lims.For(req.Provider, req.Model)
	if len(set) == 0 {
		return lease, nil
	}
	deadline := time.Now().Add(lims.MaxWait)
	var once sync.Once
	queued := func(pos int) {
		if req.Queued != nil {
			once.Do(func() { req.Queued(pos) })
		}
	}
	for _, lim := range set {
		p, err := l.acquire(ctx, lim.Key, req, deadline, lims.MaxQueue, queued)
		if err != nil {
			lease.Release(context.WithoutCancel(ctx), 0)
			return nil, err
		}
		lease.parts = append(lease.parts, p)
	}
	return lease, nil
}

func (l *Limiter) acquire(ctx context.Context, key string, req Request, deadline time.Time, maxQueue int, queued func(int)) (part, error) {
	w := &waiter{session: req.Session, tokens: req.Tokens, done: make(chan grant, 1), queued: queued}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return part{}, ErrClosed
	}
	ks := l.keyState(key)
	if ks.q.len() >= maxQueue {
		l.mu.Unlock()
		return part{}, fmt.Errorf("%w: %d calls wait for limit %q on this replica", ErrQueueFull, maxQueue, key)
	}
	ahead := ks.q.len() > 0
	ks.q.push(w)
	pos := ks.q.position(w)
	l.startLoop(ks)
	l.mu.Unlock()
	if ahead {
		queued(pos)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var err error
	select {
	case g := <-w.done:
		return g.part, g.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("%w: limit %q", ErrQueueTimeout, key)
	case <-l.ctx.Done():
		err = ErrClosed
	}
	l.mu.Lock()
	removed := ks.q.remove(w, false)
	ks.wake()
	l.mu.Unlock()
	if !removed { // served meanwhile: give it back
		if g := <-w.done; g.err == nil {
			_ = l.releasePart(context.WithoutCancel(ctx), g.part, 0)
		}
	}
	return part{}, err
}

// maxBatch bounds the waiters one write admits.
const maxBatch = 64

// startLoop makes sure a loop serves ks. l.mu is held.
func (l *Limiter) startLoop(ks *keyState) {
	if ks.running {
		ks.wake()
		return
	}
	ks.running = true
	l.wg.Add(1)
	go l.loop(ks)
}

// loop serves ks while it has waiters or releases: each pass writes the
// record once, by compare-and-set, with every release that came in and as
// many waiters, in their round-robin order, as the limit lets through, so
// that the writes per limit stay few however many calls start and end.
// When the limit is reached it sleeps until the record changes (another
// replica's release, a config change) or the limit's own clock frees
// something (a window slot, a lease expiry, a cooldown's end).
func (l *Limiter) loop(ks *keyState) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		rels := ks.releases
		ks.releases = nil
		waiters := ks.q.serveOrder(maxBatch)
		if l.closed || (len(rels) == 0 && len(waiters) == 0) {
			ks.releases = append(rels, ks.releases...) // Close gives them back
			ks.running = false
			l.mu.Unlock()
			return
		}
		lims := l.effective()
		lim, _ := lims.limit(ks.key) // a limit removed meanwhile lets everything through
		l.mu.Unlock()

		var (
			admitted []part
			wait     time.Duration
		)
		err := l.mutate(l.ctx, ks, func(r *record, now time.Time) bool {
			admitted, wait = admitted[:0], 0
			for _, rel := range rels {
				r.release(rel.p.id, rel.p.slotStart, rel.p.estimate, rel.used)
			}
			t, exp := ms(now), ms(now.Add(lims.LeaseTTL))
			for _, w := range waiters {
				id := nuid.Next()
				ok, wt := r.admit(t, lim, lims.Window, w.tokens, id, l.owner, exp)
				if !ok {
					wait = max(wt, time.Millisecond)
					break
				}
				admitted = append(admitted, part{ks: ks, id: id, slotStart: t - t%slotWidth(lims.Window), estimate: w.tokens})
			}
			return len(rels) > 0 || len(admitted) > 0
		})
		for _, rel := range rels {
			rel.done <- err
		}
		if err != nil {
			admitted = nil
			if l.ctx.Err() != nil {
				continue // closed: the next pass ends the loop
			}
			l.log.Warn("quota: bucket", "limit", ks.key, "err", err)
			wait = 200 * time.Millisecond
		}
		var late []part
		l.mu.Lock()
		for i, p := range admitted {
			ks.held[p.id] = p
			if w := waiters[i]; ks.q.remove(w, true) {
				w.done <- grant{part: p}
			} else {
				late = append(late, p) // the waiter gave up meanwhile
			}
		}
		for _, p := range late {
			delete(ks.held, p.id)
			ks.releases = append(ks.releases, &pendingRelease{p: p, used: 0, done: make(chan error, 1)})
		}
		type note struct {
			w   *waiter
			pos int
		}
		var notes []note
		if wait > 0 {
			for _, w := range waiters[len(admitted):] {
				if pos := ks.q.position(w); pos > 0 {
					notes = append(notes, note{w, pos})
				}
			}
		}
		more := len(ks.releases) > 0 || (wait == 0 && ks.q.len() > 0)
		l.mu.Unlock()
		for _, n := range notes {
			n.w.queued(n.pos)
		}
		if more || wait == 0 {
			continue
		}
		// Without news the limit is tried again at the latest after a
		// third of a lease: a missed watch update costs no more.
		wait = min(wait, lims.LeaseTTL/3)
		t := time.NewTimer(wait)
		select {
		case <-ks.kick:
		case <-t.C:
		case <-l.ctx.Done():
		}
		t.Stop()
	}
}

// pendingRelease is a lease given back, waiting for its key's next write.
type pendingRelease struct {
	p    part
	used int64
	done chan error // buffered
}

// mutate applies f to ks's record and writes it with compare-and-set,
// reading the record again after a lost race. f returns false to write
// nothing.
func (l *Limiter) mutate(ctx context.Context, ks *keyState, f func(r *record, now time.Time) bool) error {
	lost := false
	for attempt := range 64 {
		l.mu.Lock()
		if ks.raw != nil {
			// Decoded when used: most values the watch brings are
			// replaced before this replica writes again.
			ks.rec, ks.raw = decodeRecord(ks.raw), nil
		}
		rec, rev, known := ks.rec.clone(), ks.rev, ks.known
		l.mu.Unlock()
		// After a lost race the watch may still be behind: read the
		// record itself.
		if !known || lost {
			if attempt > 2 {
				// Many writers at once: spread them out.
				time.Sleep(time.Duration(rand.Int64N(int64(attempt) * int64(time.Millisecond) / 4)))
			}
			e, err := l.kv.Get(ctx, ks.kvKey)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
				rec, rev = record{}, 0
			case err != nil:
				return err
			default:
				rec, rev = decodeRecord(e.Value()), e.Revision()
			}
			l.store(ks, rec.clone(), rev) // f changes rec in place
		}
		if !f(&rec, time.Now()) {
			return nil
		}
		var nrev uint64
		var err error
		if rev == 0 {
			nrev, err = l.kv.Create(ctx, ks.kvKey, rec.encode())
		} else {
			nrev, err = l.kv.Update(ctx, ks.kvKey, rec.encode(), rev)
		}
		switch {
		case err == nil:
			l.store(ks, rec, nrev)
			return nil
		case errors.Is(err, jetstream.ErrKeyExists):
			lost = true
		default:
			return err
		}
	}
	return fmt.Errorf("quota: limit %q: too many concurrent writers", ks.key)
}

// store keeps rec at rev as ks's latest record unless a later one is known.
func (l *Limiter) store(ks *keyState, rec record, rev uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rev >= ks.rev || !ks.known {
		ks.rec, ks.raw, ks.rev, ks.known = rec, nil, rev, true
	}
}

// releasePart ends one lease with the key's next write; used < 0 keeps
// the tokens it was charged. It returns once the record is written.
func (l *Limiter) releasePart(ctx context.Context, p part, used int64) error {
	if p.ks == nil {
		return nil
	}
	rel := &pendingRelease{p: p, used: used, done: make(chan error, 1)}
	l.mu.Lock()
	delete(p.ks.held, p.id)
	if l.closed {
		l.mu.Unlock()
		return l.releaseNow(ctx, rel)
	}
	p.ks.releases = append(p.ks.releases, rel)
	l.startLoop(p.ks)
	l.mu.Unlock()
	select {
	case err := <-rel.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// releaseNow writes one release itself, without the key's loop.
func (l *Limiter) releaseNow(ctx context.Context, rel *pendingRelease) error {
	err := l.mutate(ctx, rel.p.ks, func(r *record, _ time.Time) bool {
		r.release(rel.p.id, rel.p.slotStart, rel.p.estimate, rel.used)
		return true
	})
	rel.done <- err
	return err
}

// cool stops key's calls for d on every replica.
func (l *Limiter) cool(ctx context.Context, ks *keyState, d time.Duration) error {
	return l.mutate(ctx, ks, func(r *record, now time.Time) bool {
		until := ms(now.Add(d))
		if until <= r.CoolUntil {
			return false
		}
		r.CoolUntil = until
		return true
	})
}

// Cooldown stops the calls of every limit that covers provider's model,
// on every replica, for d (0 = Limits.Cooldown; at most MaxCooldown): a
// provider answered 429 and said, or did not say, how long to wait.
func (l *Limiter) Cooldown(ctx context.Context, provider, model string, d time.Duration) error {
	l.mu.Lock()
	lims := l.effective()
	var keys []*keyState
	for _, lim := range lims.For(provider, model) {
		keys = append(keys, l.keyState(lim.Key))
	}
	l.mu.Unlock()
	if d <= 0 {
		d = lims.Cooldown
	}
	d = min(d, MaxCooldown)
	var errs []error
	for _, ks := range keys {
		errs = append(errs, l.cool(ctx, ks, d))
	}
	return errors.Join(errs...)
}
