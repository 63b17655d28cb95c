package natsrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
)

// Catalog reads and writes the tool catalog, KV bucket LLMW_TOOLS (key =
// tool name, value = events.ToolCatalogEntry JSON).
type Catalog struct {
	kv jetstream.KeyValue
}

// OpenCatalog opens LLMW_TOOLS (Provision creates it).
func OpenCatalog(ctx context.Context, js jetstream.JetStream) (*Catalog, error) {
	kv, err := js.KeyValue(ctx, events.BucketTools)
	if err != nil {
		return nil, fmt.Errorf("natsrt: bucket %s: %w", events.BucketTools, err)
	}
	return &Catalog{kv: kv}, nil
}

// Put stores e unless the stored value is already equal (replicas of the
// same tool all publish it; equal writes would only add revisions).
func (c *Catalog) Put(ctx context.Context, e events.ToolCatalogEntry) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("natsrt: catalog entry: %w", err)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if cur, err := c.kv.Get(ctx, e.Name); err == nil && string(cur.Value()) == string(b) {
		return nil
	}
	if _, err := c.kv.Put(ctx, e.Name, b); err != nil {
		return fmt.Errorf("natsrt: catalog put %s: %w", e.Name, err)
	}
	return nil
}

// Delete removes a tool from the catalog.
func (c *Catalog) Delete(ctx context.Context, name string) error {
	if err := c.kv.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("natsrt: catalog delete %s: %w", name, err)
	}
	return nil
}

// Get returns one entry; ErrNotFound when the tool is not in the catalog.
func (c *Catalog) Get(ctx context.Context, name string) (events.ToolCatalogEntry, error) {
	kve, err := c.kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return events.ToolCatalogEntry{}, fmt.Errorf("%w: tool %q", ErrNotFound, name)
	}
	if err != nil {
		return events.ToolCatalogEntry{}, fmt.Errorf("natsrt: catalog get %s: %w", name, err)
	}
	return decodeEntry(kve.Value())
}

func decodeEntry(b []byte) (events.ToolCatalogEntry, error) {
	e, err := events.Decode[events.ToolCatalogEntry](b)
	if err != nil {
		return events.ToolCatalogEntry{}, fmt.Errorf("natsrt: catalog entry: %w", err)
	}
	return e, nil
}

// List returns every valid entry, sorted by name (invalid values are
// skipped: one bad writer must not hide every tool).
func (c *Catalog) List(ctx context.Context) ([]events.ToolCatalogEntry, error) {
	w, err := c.Watch(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	return w.Entries(), nil
}

// Watch starts following the catalog; it returns once the current entries
// are loaded. Stop it when done (or cancel ctx).
func (c *Catalog) Watch(ctx context.Context) (*CatalogWatcher, error) {
	kw, err := c.kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("natsrt: catalog watch: %w", err)
	}
	w := &CatalogWatcher{kw: kw, entries: map[string]events.ToolCatalogEntry{}, done: make(chan struct{})}
	// Load the initial values (a nil entry marks the end of them).
	for {
		select {
		case <-ctx.Done():
			_ = kw.Stop()
			return nil, ctx.Err()
		case kve, ok := <-kw.Updates():
			if !ok {
				return nil, fmt.Errorf("natsrt: catalog watch closed")
			}
			if kve == nil {
				go w.run()
				return w, nil
			}
			w.apply(kve)
		}
	}
}

// CatalogWatcher is a live view of the catalog. It is safe for concurrent
// use.
type CatalogWatcher struct {
	kw      jetstream.KeyWatcher
	mu      sync.RWMutex
	entries map[string]events.ToolCatalogEntry
	version uint64
	done    chan struct{}
}

func (w *CatalogWatcher) run() {
	defer close(w.done)
	for kve := range w.kw.Updates() {
		if kve != nil {
			w.apply(kve)
		}
	}
}

func (w *CatalogWatcher) apply(kve jetstream.KeyValueEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.version++
	if kve.Operation() != jetstream.KeyValuePut {
		delete(w.entries, kve.Key())
		return
	}
	e, err := decodeEntry(kve.Value())
	if err != nil || e.Name != kve.Key() {
		delete(w.entries, kve.Key())
		return
	}
	w.entries[e.Name] = e
}

// Entries returns the current entries sorted by name.
func (w *CatalogWatcher) Entries() []events.ToolCatalogEntry {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]events.ToolCatalogEntry, 0, len(w.entries))
	for _, e := range w.entries {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b events.ToolCatalogEntry) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Get returns the current entry of a tool.
func (w *CatalogWatcher) Get(name string) (events.ToolCatalogEntry, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	e, ok := w.entries[name]
	return e, ok
}

// Version counts the changes seen so far; it lets a caller cheaply tell
// whether to rebuild what it derived from Entries.
func (w *CatalogWatcher) Version() uint64 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.version
}

// Stop ends the watch and waits for its goroutine.
func (w *CatalogWatcher) Stop() error {
	err := w.kw.Stop()
	<-w.done
	return err
}
