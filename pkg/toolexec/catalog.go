package toolexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/events"
)

// Catalog reads and writes the tool catalog, KV bucket LLMW_TOOLS
// (docs/protocol.md §6): key <tool name> = the tool's entry
// (events.ToolCatalogEntry JSON), and key <tool name>.<host id> = the claim
// of one live host of the tool. Tool names contain no '.', so the entries
// are exactly the keys of one token.
type Catalog struct {
	js jetstream.JetStream
	kv jetstream.KeyValue
}

// OpenCatalog opens LLMW_TOOLS (Provision creates it).
func OpenCatalog(ctx context.Context, js jetstream.JetStream) (*Catalog, error) {
	kv, err := js.KeyValue(ctx, events.BucketTools)
	if err != nil {
		return nil, fmt.Errorf("toolexec: bucket %s: %w", events.BucketTools, err)
	}
	return &Catalog{js: js, kv: kv}, nil
}

// MinCatalogTTL is the shortest TTL Claim accepts: JetStream counts
// per-message TTLs in whole seconds and refuses less than one.
const MinCatalogTTL = time.Second

// releaseMarkerTTL is how long the purge marker Release leaves on a key
// stays: long enough for every watcher to see it, short enough that the
// markers of stopped hosts (a new host id per process) do not pile up.
const releaseMarkerTTL = time.Minute

// hostIDPattern is what a host id may be: one KV key token.
var hostIDPattern = regexp.MustCompile(`^[-_=A-Za-z0-9]{1,64}$`)

// claimKey is the key of host's claim of a tool: <tool>.<host>.
func claimKey(toolName, host string) string { return toolName + "." + host }

// Claim says that host serves e's tool, for ttl: it writes the host's claim
// (key <name>.<host>) and then the entry (key <name>), both with a per-key
// TTL of ttl. A host claims on start and again every ttl/3 (its
// heartbeat): the entry stays while any host of the tool claims it and
// expires ttl after the last one stopped claiming (a host that died). The
// claim goes first so that Release, which reads the entry and then the
// claims, never misses a host that wrote the entry.
func (c *Catalog) Claim(ctx context.Context, e events.ToolCatalogEntry, host string, ttl time.Duration) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("toolexec: catalog entry: %w", err)
	}
	if !hostIDPattern.MatchString(host) {
		return fmt.Errorf("%w: host id %q must match %s", ErrInvalidClaim, host, hostIDPattern)
	}
	if ttl < MinCatalogTTL {
		return fmt.Errorf("%w: TTL %v is under %v", ErrInvalidClaim, ttl, MinCatalogTTL)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	claim := claimKey(e.Name, host)
	if err := c.putTTL(ctx, claim, []byte(host), ttl); err != nil {
		return fmt.Errorf("toolexec: catalog claim %s: %w", claim, err)
	}
	if err := c.putTTL(ctx, e.Name, b, ttl); err != nil {
		return fmt.Errorf("toolexec: catalog put %s: %w", e.Name, err)
	}
	return nil
}

// putTTL is a KV put with a per-key TTL (the KV API has none): a
// JetStream publish on $KV.<bucket>.<key> with a Nats-TTL header.
func (c *Catalog) putTTL(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	m := &nats.Msg{Subject: "$KV." + events.BucketTools + "." + key, Data: value}
	_, err := c.js.PublishMsg(ctx, m, jetstream.WithMsgTTL(ttl))
	return err
}

// Release withdraws host's claim of a tool, and the tool's entry with it
// when no other host claims the tool: a host that stops cleanly leaves the
// catalog at once instead of after its TTL. The entry is purged only at the
// revision read before the claims were listed, so a host that claims the
// tool meanwhile (its claim then its entry, see Claim) keeps it listed.
func (c *Catalog) Release(ctx context.Context, toolName, host string) error {
	claim := claimKey(toolName, host)
	if err := c.kv.Purge(ctx, claim, jetstream.PurgeTTL(releaseMarkerTTL)); err != nil {
		return fmt.Errorf("toolexec: catalog release %s: %w", claim, err)
	}
	// The revision from the bucket's leader: a replica that is behind
	// would give one the purge then conflicts with, leaving the entry
	// listed until its TTL.
	_, rev, err := jsread.KVLast(ctx, c.js.Conn(), jsread.APIPrefix(c.js), events.BucketTools, toolName)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("toolexec: catalog get %s: %w", toolName, err)
	}
	others, err := c.claimed(ctx, toolName)
	if err != nil || others {
		return err
	}
	err = c.kv.Purge(ctx, toolName, jetstream.LastRevision(rev), jetstream.PurgeTTL(releaseMarkerTTL))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return nil // written again since: a host claims it
	}
	if err != nil {
		return fmt.Errorf("toolexec: catalog purge %s: %w", toolName, err)
	}
	return nil
}

// claimed reports whether any host claims the tool.
func (c *Catalog) claimed(ctx context.Context, toolName string) (bool, error) {
	kl, err := c.kv.ListKeysFiltered(ctx, claimKey(toolName, "*"))
	if err != nil {
		return false, fmt.Errorf("toolexec: catalog claims of %s: %w", toolName, err)
	}
	defer func() { _ = kl.Stop() }()
	for range kl.Keys() {
		return true, nil
	}
	return false, nil
}

// Put stores e without a TTL, unless the stored value is already equal
// (equal writes would only add revisions): an entry that stays until
// deleted, for a tool whose host does not claim it (hosts use Claim).
func (c *Catalog) Put(ctx context.Context, e events.ToolCatalogEntry) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("toolexec: catalog entry: %w", err)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	// Compared with the leader's value: a replica that is behind may still
	// have an equal entry that the leader has replaced or deleted.
	if cur, _, err := jsread.KVLast(ctx, c.js.Conn(), jsread.APIPrefix(c.js), events.BucketTools, e.Name); err == nil && string(cur) == string(b) {
		return nil
	}
	if _, err := c.kv.Put(ctx, e.Name, b); err != nil {
		return fmt.Errorf("toolexec: catalog put %s: %w", e.Name, err)
	}
	return nil
}

// Delete removes a tool from the catalog.
func (c *Catalog) Delete(ctx context.Context, name string) error {
	if err := c.kv.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("toolexec: catalog delete %s: %w", name, err)
	}
	return nil
}

// Get returns one entry as the leader of the bucket's stream has it;
// ErrNotFound when the tool is not in the catalog. A turn asks it for a
// tool its catalog watcher has not seen (yet) and fails when it is not
// found, so a replica that is behind must not answer.
func (c *Catalog) Get(ctx context.Context, name string) (events.ToolCatalogEntry, error) {
	b, _, err := jsread.KVLast(ctx, c.js.Conn(), jsread.APIPrefix(c.js), events.BucketTools, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return events.ToolCatalogEntry{}, fmt.Errorf("%w: tool %q", ErrNotFound, name)
	}
	if err != nil {
		return events.ToolCatalogEntry{}, fmt.Errorf("toolexec: catalog get %s: %w", name, err)
	}
	return decodeEntry(b)
}

func decodeEntry(b []byte) (events.ToolCatalogEntry, error) {
	e, err := events.Decode[events.ToolCatalogEntry](b)
	if err != nil {
		return events.ToolCatalogEntry{}, fmt.Errorf("toolexec: catalog entry: %w", err)
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
	// "*": the entries only, not the host claims (<tool>.<host>) that
	// every host rewrites on each heartbeat.
	kw, err := c.kv.Watch(ctx, "*")
	if err != nil {
		return nil, fmt.Errorf("toolexec: catalog watch: %w", err)
	}
	w := &CatalogWatcher{kw: kw, entries: map[string]events.ToolCatalogEntry{}, raw: map[string]string{}, changed: make(chan struct{}), done: make(chan struct{})}
	// Load the initial values (a nil entry marks the end of them).
	for {
		select {
		case <-ctx.Done():
			_ = kw.Stop()
			return nil, ctx.Err()
		case kve, ok := <-kw.Updates():
			if !ok {
				return nil, fmt.Errorf("toolexec: catalog watch closed")
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
	raw     map[string]string // the stored value of each entry
	version uint64
	changed chan struct{} // closed and replaced at each version
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
	if kve.Operation() != jetstream.KeyValuePut {
		w.drop(kve.Key())
		return
	}
	if raw, ok := w.raw[kve.Key()]; ok && raw == string(kve.Value()) {
		return // a heartbeat rewrote the same entry: nothing changed
	}
	e, err := decodeEntry(kve.Value())
	if err != nil || e.Name != kve.Key() {
		w.drop(kve.Key())
		return
	}
	w.bump()
	w.entries[e.Name] = e
	w.raw[e.Name] = string(kve.Value())
}

// bump counts a change and wakes the callers of Changed (w.mu held).
func (w *CatalogWatcher) bump() {
	w.version++
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *CatalogWatcher) drop(key string) {
	if _, ok := w.entries[key]; ok {
		w.bump()
		delete(w.entries, key)
		delete(w.raw, key)
	}
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

// Changed returns a channel that is closed at the next change of the
// entries (when Version moves on), so that a caller can rebuild what it
// derived from them without polling.
func (w *CatalogWatcher) Changed() <-chan struct{} {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.changed
}

// Stop ends the watch and waits for its goroutine.
func (w *CatalogWatcher) Stop() error {
	err := w.kw.Stop()
	<-w.done
	return err
}

// heartbeat renews this replica's catalog claims every CatalogTTL/3 until
// ctx ends. A renewal also restores an entry that expired meanwhile (the
// replica was cut off for longer than the TTL).
//
// One renewal of every hosted tool waits at most CatalogTTL/9 for the
// bucket's acknowledgements, and one that fails is made again at once
// (renewRetry, doubling up to CatalogTTL/9) until it succeeds, not one
// beat later: a bucket without a leader (an election after a node loss)
// answers no write, and a node that goes and comes back makes two
// elections. Waiting a whole beat per tool and per failure would let two
// short elections in a row expire the claims of a replica that lives.
//
// Renewals that go unanswered (a timeout or no responders, not an error
// the bucket answers, and not one claim of the renewal acknowledged) for
// CatalogTTL/6 make the connection move to another server
// (nats.Conn.ForceReconnect; again when the server it reaches leaves them
// unanswered for CatalogTTL/6 from their first failure there): the
// node it is connected to may be cut off from its cluster, or answer its
// client but reach no quorum, which the connection's pings do not find
// (natsutil.Liveness) or find later.
func (s *Server) heartbeat(ctx context.Context) {
	defer s.beats.Done()
	every := s.cfg.CatalogTTL / 3
	wait := every / 3
	move := s.cfg.CatalogTTL / 6
	t := time.NewTimer(every)
	defer t.Stop()
	backoff := renewRetry
	failing := false
	var silent time.Time // start of the unanswered renewals on this connection
	var moves uint64     // the connection's reconnects when silent started
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		began := time.Now()
		renewed, err := s.renew(ctx, wait)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				s.log.Warn("toolexec: renew catalog claims; retrying until they are renewed", "err", err)
			}
			failing = true
			// A reconnect (by pings or a move) counts from its first
			// failure: the server it reached had no chance yet.
			reconnects := s.nc.Stats().Reconnects
			switch {
			case renewed > 0 || !unanswered(err):
				silent = time.Time{} // the bucket answers, if slowly
			case silent.IsZero():
				silent, moves = began, reconnects
			case reconnects != moves:
				silent, moves = time.Now(), reconnects
			}
			if !silent.IsZero() && time.Since(silent) >= move {
				s.log.Warn("toolexec: catalog claims unanswered; moving to another NATS server", "for", time.Since(silent).Round(time.Millisecond), "url", s.nc.ConnectedUrlRedacted())
				if err := s.nc.ForceReconnect(); err != nil {
					s.log.Warn("toolexec: reconnect", "err", err)
				}
				silent = time.Now()
			}
			t.Reset(backoff)
			backoff = min(2*backoff, wait)
			continue
		case failing:
			s.log.Info("toolexec: catalog claims renewed")
		}
		failing, backoff, silent = false, renewRetry, time.Time{}
		t.Reset(every)
	}
}

// unanswered reports whether a renewal failed for want of an answer (the
// server got no reply from the bucket in time, or knows no responder),
// not with one.
func unanswered(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return false
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// renewRetry is the first pause before a failed renewal of the catalog
// claims is made again.
const renewRetry = 100 * time.Millisecond

// renew claims every hosted tool again, within wait for all of them; it
// returns how many claims were acknowledged and the first error.
func (s *Server) renew(ctx context.Context, wait time.Duration) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var first error
	renewed := 0
	for _, h := range s.hostedNow() {
		err := s.cat.Claim(cctx, h.entry, s.host, s.cfg.CatalogTTL)
		switch {
		case err == nil:
			renewed++
		case first == nil:
			first = fmt.Errorf("tool %s: %w", h.entry.Name, err)
		}
	}
	return renewed, first
}

// release withdraws this replica's catalog claims (best effort: a claim
// that cannot be withdrawn expires after CatalogTTL).
func (s *Server) release() {
	s.releaseClaims(nil)
}

// releaseClaims withdraws the claims of hs (nil = of every tool hosted
// now, which needs s.mu free).
func (s *Server) releaseClaims(hs []*hosted) {
	if hs == nil {
		hs = s.hostedNow()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, h := range hs {
		if err := s.cat.Release(ctx, h.entry.Name, s.host); err != nil {
			s.log.Warn("toolexec: withdraw catalog claim", "tool", h.entry.Name, "err", err)
		}
	}
}
