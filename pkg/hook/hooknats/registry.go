package hooknats

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/events"
)

// Bucket opens the hook registry, KV bucket LLMW_HOOKS (provision.Provision
// creates it). Its Get asks the leader of the bucket's stream: Register
// decides on what Get returns whether to write at all, and a replica that
// is behind (right after a write, or back from a partition) would have it
// skip a write the registry needs — a hook re-registered after it was
// unregistered or changed stays missing or changed. A KeyValue opened
// with js.KeyValue reads any replica. Errors match ErrRegistry.
func Bucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, events.BucketHooks)
	if err != nil {
		return nil, fmt.Errorf("%w: bucket %s: %w", ErrRegistry, events.BucketHooks, err)
	}
	return jsread.KeyValue(js, kv), nil
}

// Entry is a registration as stored in the registry.
type Entry struct {
	events.HookRegistration
	// Revision is the KV revision of the stored value: the hook's place
	// among hooks of equal priority (see Register).
	Revision uint64
	// Err is why the stored value is not a valid registration (it matches
	// ErrInvalidRegistration and names the field), nil when it is one.
	// A broken entry holds what could be read of the value, under the
	// key's name; Watch makes it a hook that fails (see there).
	Err error
}

func encode(reg events.HookRegistration) ([]byte, error) {
	if err := reg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRegistration, err)
	}
	return json.Marshal(reg)
}

// Register stores reg under its name and returns the revision that orders
// it among hooks of equal priority.
//
// kv should come from Bucket (see there why). Order is registration
// order: a new name is created (kv.Create), so its
// revision is higher than every hook registered before. Re-registering a
// name with an identical value writes nothing and keeps the hook's place
// (replicas of one responder can all register on start). Registering a
// name with a changed value updates it, and the update's revision moves
// the hook after the hooks registered so far among its priority — the
// registry keeps one revision per key, so a "first created" revision
// cannot be kept across changes; use priorities when the order of changed
// hooks matters. Errors match ErrInvalidRegistration or ErrRegistry.
func Register(ctx context.Context, kv jetstream.KeyValue, reg events.HookRegistration) (uint64, error) {
	b, err := encode(reg)
	if err != nil {
		return 0, err
	}
	rev, _, err := put(ctx, kv, reg.Name, b, 0)
	return rev, err
}

// put writes b under key unless it is stored already with a revision above
// after; it reports whether it wrote.
func put(ctx context.Context, kv jetstream.KeyValue, key string, b []byte, after uint64) (uint64, bool, error) {
	for range 8 {
		cur, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			rev, err := kv.Create(ctx, key, b)
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // another replica registered it meanwhile: compare again
			}
			if err != nil {
				return 0, false, fmt.Errorf("%w: create %s: %w", ErrRegistry, key, err)
			}
			return rev, true, nil
		case err != nil:
			return 0, false, fmt.Errorf("%w: get %s: %w", ErrRegistry, key, err)
		}
		if bytes.Equal(cur.Value(), b) && cur.Revision() > after {
			return cur.Revision(), false, nil
		}
		rev, err := kv.Update(ctx, key, b, cur.Revision())
		if err != nil {
			if errors.Is(err, jetstream.ErrKeyExists) { // wrong last revision: raced
				continue
			}
			return 0, false, fmt.Errorf("%w: update %s: %w", ErrRegistry, key, err)
		}
		return rev, true, nil
	}
	return 0, false, fmt.Errorf("%w: %s keeps changing under concurrent writers", ErrRegistry, key)
}

// RegisterOrdered registers regs so that their revisions increase in the
// order given (the order a config file lists them): a registration stored
// identically and after the previous one is left alone, anything else is
// written again. Running it again with the same list writes nothing, so
// replicas of one responder starting together agree; after a list was
// reordered, the hooks from the first one out of order on are rewritten.
// It returns the revisions in the order of regs.
func RegisterOrdered(ctx context.Context, kv jetstream.KeyValue, regs ...events.HookRegistration) ([]uint64, error) {
	bodies := make([][]byte, len(regs))
	seen := map[string]bool{}
	for i, reg := range regs {
		b, err := encode(reg)
		if err != nil {
			return nil, fmt.Errorf("registration %d (%s): %w", i, reg.Name, err)
		}
		if seen[reg.Name] {
			return nil, fmt.Errorf("%w: two registrations named %q", ErrInvalidRegistration, reg.Name)
		}
		seen[reg.Name] = true
		bodies[i] = b
	}
	revs := make([]uint64, len(regs))
	var last uint64
	for i, reg := range regs {
		rev, _, err := put(ctx, kv, reg.Name, bodies[i], last)
		if err != nil {
			return nil, err
		}
		revs[i], last = rev, rev
	}
	return revs, nil
}

// Unregister deletes the hook named name from the registry (a missing name
// is not an error). Watchers remove it from their chains.
func Unregister(ctx context.Context, kv jetstream.KeyValue, name string) error {
	if err := kv.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%w: delete %s: %w", ErrRegistry, name, err)
	}
	return nil
}

// List returns the registrations, grouped by hook point in the order a
// turn reaches them and within one in the order they run (priority, then
// revision). Values that are not valid registrations are listed too, with
// Err saying why (Watch treats them as failing hooks); those of an
// unknown event come last.
func List(ctx context.Context, kv jetstream.KeyValue) ([]Entry, error) {
	kw, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: watch: %w", ErrRegistry, err)
	}
	defer func() { _ = kw.Stop() }()
	var out []Entry
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case kve, ok := <-kw.Updates():
			if !ok {
				return nil, fmt.Errorf("%w: watch closed", ErrRegistry)
			}
			if kve == nil {
				SortEntries(out)
				return out, nil
			}
			if kve.Operation() == jetstream.KeyValuePut {
				reg, err := decodeEntry(kve)
				out = append(out, Entry{HookRegistration: reg, Revision: kve.Revision(), Err: err})
			}
		}
	}
}

// SortEntries sorts entries in run order: by hook point (as
// events.HookEvents lists them, unknown events last), priority, then
// revision.
func SortEntries(es []Entry) {
	point := func(e events.HookEvent) int {
		if i := slices.Index(events.HookEvents, e); i >= 0 {
			return i
		}
		return len(events.HookEvents)
	}
	slices.SortStableFunc(es, func(a, b Entry) int {
		return cmp.Or(
			cmp.Compare(point(a.Event), point(b.Event)),
			cmp.Compare(a.Priority, b.Priority),
			cmp.Compare(a.Revision, b.Revision))
	})
}

// decodeEntry decodes a put entry; the key must be the registration's
// name. On an error (ErrInvalidRegistration, naming the field) the
// registration holds what could be read of the value, named by the key:
// encoding/json fills the fields it can read and reports the first it
// cannot, and Validate looks only at what was read.
func decodeEntry(kve jetstream.KeyValueEntry) (events.HookRegistration, error) {
	reg, err := events.Decode[events.HookRegistration](kve.Value())
	switch {
	case err != nil:
		err = fmt.Errorf("%w in %s: key %s: %w", ErrInvalidRegistration, kve.Bucket(), kve.Key(), err)
	case reg.Name != kve.Key():
		err = fmt.Errorf("%w in %s: key %s holds a registration named %q", ErrInvalidRegistration, kve.Bucket(), kve.Key(), reg.Name)
	}
	if err != nil {
		reg.Name = kve.Key()
	}
	return reg, err
}
