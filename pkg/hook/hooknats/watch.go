package hooknats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// WatchOptions configures Watch. The zero value watches LLMW_HOOKS with the
// request source /llmw/turn/<random> and logs to slog.Default().
type WatchOptions struct {
	// Config is used for every remote hook the watcher creates.
	Config
	// Bucket is the registry bucket ("" = events.BucketHooks).
	Bucket string
	// Logger receives skipped registrations and chain conflicts.
	Logger *slog.Logger
}

// Watcher keeps a hook.Chain in sync with the registry. It is safe for
// concurrent use.
type Watcher struct {
	kv     jetstream.KeyValue
	kw     jetstream.KeyWatcher
	nc     *nats.Conn
	chain  *hook.Chain
	cfg    Config
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	cond  *sync.Cond
	owned map[string]uint64 // hooks this watcher put in the chain → revision
	rev   uint64            // highest registry revision applied
	err   error             // why the watch ended early, if it did
	ended bool
}

// Watch loads the registry into chain and keeps it in sync until Stop or
// until ctx ends: every valid registration becomes a remote hook (see
// Remote) at its hook point, ordered by priority, then by the revision of
// its registry entry (Options.Seq); a changed registration replaces its
// hook, a deleted one is removed. Runs of the chain take a snapshot at each
// hook point, so changes reach running turns at their next hook point.
//
// Watch returns once the registrations present at the call are in the
// chain. A value that is not a valid registration (stored by a client
// that does not validate: Register refuses it) becomes a hook that fails
// every call, under the value's failure policy (fail_closed when it has
// none it can read), at the value's event, matching with its matcher when
// that compiles and every call of the event when not (BrokenOf): a guard
// with a typo refuses what it may have been meant to guard instead of
// letting it through. A value whose event is no hook point guards
// nothing. Each is logged once per revision. A name already used in the
// chain by a hook the watcher did not add (an in-process hook) keeps
// that hook; the registration is logged and skipped. Errors match
// ErrRegistry.
func Watch(ctx context.Context, js jetstream.JetStream, chain *hook.Chain, o WatchOptions) (*Watcher, error) {
	bucket := o.Bucket
	if bucket == "" {
		bucket = events.BucketHooks
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("%w: bucket %s: %w", ErrRegistry, bucket, err)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg := o.Config
	cfg.Source = cfg.source() // one source for every hook of this watcher
	wctx, cancel := context.WithCancel(ctx)
	kw, err := kv.WatchAll(wctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%w: watch %s: %w", ErrRegistry, bucket, err)
	}
	w := &Watcher{
		kv: kv, kw: kw, nc: js.Conn(), chain: chain, cfg: cfg, log: log, cancel: cancel,
		done: make(chan struct{}), owned: map[string]uint64{},
	}
	w.cond = sync.NewCond(&w.mu)
	for {
		select {
		case <-ctx.Done():
			w.abandon()
			return nil, ctx.Err()
		case kve, ok := <-kw.Updates():
			if !ok {
				w.abandon()
				return nil, fmt.Errorf("%w: watch %s closed before the initial values", ErrRegistry, bucket)
			}
			if kve == nil {
				go w.run(wctx)
				return w, nil
			}
			w.apply(kve)
		}
	}
}

// abandon undoes a Watch that failed while loading.
func (w *Watcher) abandon() {
	w.cancel()
	_ = w.kw.Stop()
	w.removeOwned()
}

func (w *Watcher) run(ctx context.Context) {
	defer close(w.done)
	updates := w.kw.Updates()
	for {
		select {
		case <-ctx.Done():
			_ = w.kw.Stop()
			w.end(ctx.Err())
			return
		case kve, ok := <-updates:
			if !ok {
				// Cancelling the watch's context (Stop) also closes the
				// updates; only a close without it is an error.
				if err := ctx.Err(); err != nil {
					w.end(err)
				} else {
					w.end(fmt.Errorf("%w: watch closed", ErrRegistry))
				}
				return
			}
			if kve != nil {
				w.apply(kve)
			}
		}
	}
}

func (w *Watcher) end(err error) {
	w.mu.Lock()
	w.ended, w.err = true, err
	w.cond.Broadcast()
	w.mu.Unlock()
}

// apply brings the chain in line with one registry entry.
func (w *Watcher) apply(kve jetstream.KeyValueEntry) {
	key, rev := kve.Key(), kve.Revision()
	defer func() {
		w.mu.Lock()
		w.rev = max(w.rev, rev)
		w.cond.Broadcast()
		w.mu.Unlock()
	}()
	w.mu.Lock()
	_, owned := w.owned[key]
	w.mu.Unlock()

	if kve.Operation() != jetstream.KeyValuePut {
		if owned {
			w.chain.Remove(key)
			w.forget(key)
		}
		return
	}
	reg, err := decodeEntry(kve)
	if err != nil {
		w.applyBroken(key, rev, owned, reg, err)
		return
	}
	r, err := New(w.nc, reg, w.cfg)
	if err == nil {
		if !owned && w.inChain(key) {
			w.log.Warn("hook registry: name already used by an in-process hook; registration skipped", "hook", key, "revision", rev)
			return
		}
		err = r.AddTo(w.chain, int64(rev))
	}
	if err != nil {
		w.log.Error("hook registry: registration not applied", "hook", key, "revision", rev, "err", err)
		if owned {
			w.chain.Remove(key)
			w.forget(key)
		}
		return
	}
	w.own(key, rev)
}

// applyBroken puts the failing hook of a registration that does not
// decode or validate into the chain (BrokenOf says what it guards) and
// logs it: apply runs once per revision of a key, so once per value
// written, not once per call.
func (w *Watcher) applyBroken(key string, rev uint64, owned bool, reg events.HookRegistration, err error) {
	b := BrokenOf(reg, err)
	log := w.log.With("hook", key, "revision", rev, "event", reg.Event, "failure", b.Failure, "err", err)
	if !owned && w.inChain(key) {
		log.Error("hook registry: broken registration named like an in-process hook; the in-process hook stays")
		return
	}
	added, aerr := addBroken(w.chain, key, reg.Priority, int64(rev), b)
	if aerr != nil || !added {
		if owned {
			w.chain.Remove(key)
			w.forget(key)
		}
		if aerr != nil {
			log.Error("hook registry: broken registration not applied", "add_err", aerr)
			return
		}
	} else {
		w.own(key, rev)
	}
	if b.Event != "" && b.Failure == events.FailOpen {
		log.Warn("hook registry: broken registration: " + b.Effect())
		return
	}
	log.Error("hook registry: broken registration: " + b.Effect())
}

func (w *Watcher) own(key string, rev uint64) {
	w.mu.Lock()
	w.owned[key] = rev
	w.mu.Unlock()
}

func (w *Watcher) inChain(name string) bool {
	for _, i := range w.chain.List() {
		if i.Name == name {
			return true
		}
	}
	return false
}

func (w *Watcher) forget(key string) {
	w.mu.Lock()
	delete(w.owned, key)
	w.mu.Unlock()
}

func (w *Watcher) removeOwned() {
	w.mu.Lock()
	names := make([]string, 0, len(w.owned))
	for n := range w.owned {
		names = append(names, n)
	}
	clear(w.owned)
	w.mu.Unlock()
	for _, n := range names {
		w.chain.Remove(n)
	}
}

// Hooks returns the names of the hooks the watcher currently keeps in the
// chain, with the revisions they were registered at.
func (w *Watcher) Hooks() map[string]uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]uint64, len(w.owned))
	for k, v := range w.owned {
		out[k] = v
	}
	return out
}

// Revision returns the highest registry revision applied to the chain.
func (w *Watcher) Revision() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rev
}

// WaitRevision blocks until the change at registry revision rev (as
// returned by Register) is in the chain, ctx ends, or the watch ends.
func (w *Watcher) WaitRevision(ctx context.Context, rev uint64) error {
	stop := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.cond.Broadcast()
		w.mu.Unlock()
	})
	defer stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.rev < rev {
		if err := ctx.Err(); err != nil {
			return err
		}
		if w.ended {
			if w.err != nil {
				return w.err
			}
			return fmt.Errorf("%w: watch stopped", ErrRegistry)
		}
		w.cond.Wait()
	}
	return nil
}

// Sync blocks until every change made to the registry before the call
// (including deletes, which return no revision) is in the chain. Errors
// match ErrRegistry or are ctx's.
func (w *Watcher) Sync(ctx context.Context) error {
	st, err := w.kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("%w: status: %w", ErrRegistry, err)
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return fmt.Errorf("%w: unexpected bucket status %T", ErrRegistry, st)
	}
	return w.WaitRevision(ctx, bs.StreamInfo().State.LastSeq)
}

// Stop ends the watch, waits for its goroutine and removes the hooks it
// added from the chain. Call it after the turns using the chain are done
// (a turn running then would stop calling the remote hooks).
func (w *Watcher) Stop() error {
	w.cancel()
	<-w.done
	w.removeOwned()
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}
