package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/events"
)

// Agent is one revision of a definition as the registry holds it.
type Agent struct {
	events.AgentDefinition
	// Revision is the KV revision: the version "NAME@REV" names.
	Revision uint64
	// Created is when the revision was put.
	Created time.Time
	// Deleted: this revision is the delete of the agent (History only;
	// the definition is empty).
	Deleted bool
}

// Ref is "NAME@REV".
func (a Agent) Ref() string { return events.AgentRef(a.Name, a.Revision) }

// PutOptions tune Put. The zero value refuses unknown sub-agents and
// cycles.
type PutOptions struct {
	// Force stores a definition whose agents name unknown agents or lead
	// back to it; the problems are returned as warnings.
	Force bool
}

// Registry reads and writes LLMW_AGENTS. Its zero value is not usable;
// New makes one, which opens the bucket on first use.
type Registry struct {
	js jetstream.JetStream

	mu sync.Mutex
	kv jetstream.KeyValue
}

// New returns the registry of the bucket LLMW_AGENTS on js. No I/O: the
// bucket is looked up by the first call that needs it (and again after a
// look-up that failed).
func New(js jetstream.JetStream) *Registry { return &Registry{js: js} }

func (r *Registry) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kv != nil {
		return r.kv, nil
	}
	kv, err := r.js.KeyValue(ctx, events.BucketAgents)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, ErrNotProvisioned
	}
	if err != nil {
		return nil, fmt.Errorf("agents: bucket %s: %w", events.BucketAgents, err)
	}
	r.kv = kv
	return kv, nil
}

// Put validates def, checks its sub-agents against the registry as it
// is (see PutOptions) and stores it under its name. It returns the new
// revision and, with Force, the problems it stored anyway. Errors match
// events.ErrInvalid (a field of def; the message names it),
// ErrUnknownSubAgent or ErrCycle.
func (r *Registry) Put(ctx context.Context, def events.AgentDefinition, o PutOptions) (rev uint64, warnings []error, err error) {
	if err := def.Validate(); err != nil {
		return 0, nil, err
	}
	kv, err := r.bucket(ctx)
	if err != nil {
		return 0, nil, err
	}
	if len(def.Agents) > 0 {
		all, err := r.List(ctx)
		if err != nil {
			return 0, nil, err
		}
		warnings = Check(def, all)
		if len(warnings) > 0 && !o.Force {
			return 0, nil, errors.Join(warnings...)
		}
	}
	b, err := json.Marshal(def)
	if err != nil {
		return 0, nil, err
	}
	rev, err = kv.Put(ctx, def.Name, b)
	if err != nil {
		return 0, nil, fmt.Errorf("agents: put %s: %w", def.Name, err)
	}
	return rev, warnings, nil
}

// Check reports the problems of def's sub-agents against the other
// definitions (those of def's name are replaced by def): each agent it
// names that is not among them (ErrUnknownSubAgent), and each path of
// sub-agents from def back to def through another agent (ErrCycle).
func Check(def events.AgentDefinition, others []Agent) []error {
	graph := map[string][]string{}
	for _, a := range others {
		graph[a.Name] = a.Agents
	}
	graph[def.Name] = def.Agents
	var problems []error
	for _, sub := range def.Agents {
		if _, ok := graph[sub]; !ok {
			problems = append(problems, fmt.Errorf("%w: agents names %q, which the registry does not hold", ErrUnknownSubAgent, sub))
		}
	}
	// A depth-first search from each sub-agent (but def itself) for a
	// path back to def.
	for _, sub := range def.Agents {
		if sub == def.Name {
			continue
		}
		if path := pathTo(graph, sub, def.Name, map[string]bool{}); path != nil {
			cycle := append([]string{def.Name}, path...)
			problems = append(problems, fmt.Errorf("%w: %s", ErrCycle, strings.Join(cycle, " → ")))
		}
	}
	return problems
}

// pathTo returns a path of sub-agents from "from" to "to" (from first, to
// last), nil when there is none.
func pathTo(graph map[string][]string, from, to string, seen map[string]bool) []string {
	if from == to {
		return []string{to}
	}
	if seen[from] {
		return nil
	}
	seen[from] = true
	for _, next := range graph[from] {
		if next == from {
			continue
		}
		if p := pathTo(graph, next, to, seen); p != nil {
			return append([]string{from}, p...)
		}
	}
	return nil
}

// Resolve returns the definition ref names: "NAME", its latest revision,
// or "NAME@REV", that revision, which resolves after later puts and after
// a delete while the history holds it. Errors match ErrUnknownAgent,
// events.ErrInvalid (ref is neither form) or ErrNotProvisioned.
func (r *Registry) Resolve(ctx context.Context, ref string) (Agent, error) {
	name, rev, err := events.ParseAgentRef(ref)
	if err != nil {
		return Agent{}, err
	}
	kv, err := r.bucket(ctx)
	if err != nil {
		return Agent{}, err
	}
	var e jetstream.KeyValueEntry
	if rev == 0 {
		e, err = kv.Get(ctx, name)
	} else {
		e, err = kv.GetRevision(ctx, name, rev)
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		// kv.Get and GetRevision are direct gets any replica answers: one
		// that is behind (just restarted, or cut off) lacks what the
		// leader holds, so an unknown agent is the leader's to say.
		e, err = r.leaderGet(ctx, kv, name, rev)
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		if rev == 0 {
			return Agent{}, fmt.Errorf("%w: no agent %q in %s", ErrUnknownAgent, name, events.BucketAgents)
		}
		return Agent{}, fmt.Errorf("%w: agent %q has no revision %d in %s (it keeps the last %d)", ErrUnknownAgent, name, rev, events.BucketAgents, events.AgentHistory)
	}
	if err != nil {
		return Agent{}, fmt.Errorf("agents: get %s: %w", ref, err)
	}
	return decodeEntry(e)
}

// leaderGet reads agent name's current entry (rev 0) or revision rev
// from the leader of the bucket's stream.
func (r *Registry) leaderGet(ctx context.Context, kv jetstream.KeyValue, name string, rev uint64) (jetstream.KeyValueEntry, error) {
	if rev == 0 {
		return jsread.KeyValue(r.js, kv).Get(ctx, name)
	}
	return jsread.KVRevision(ctx, r.js.Conn(), jsread.APIPrefix(r.js), events.BucketAgents, name, rev)
}

// decodeEntry reads a stored revision (a put).
func decodeEntry(e jetstream.KeyValueEntry) (Agent, error) {
	a := Agent{Revision: e.Revision(), Created: e.Created()}
	if e.Operation() != jetstream.KeyValuePut {
		a.Name, a.Deleted = e.Key(), true
		return a, nil
	}
	def, err := events.DecodeAgentDefinition(e.Value())
	if err != nil {
		return a, fmt.Errorf("%w: %s revision %d: %w", ErrCorrupt, e.Key(), e.Revision(), err)
	}
	if def.Name != e.Key() {
		return a, fmt.Errorf("%w: %s revision %d names %q", ErrCorrupt, e.Key(), e.Revision(), def.Name)
	}
	a.AgentDefinition = def
	return a, nil
}

// List returns the latest revision of every agent, by name.
func (r *Registry) List(ctx context.Context) ([]Agent, error) {
	kv, err := r.bucket(ctx)
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("agents: list: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var out []Agent
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("agents: list: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("agents: list: the watch ended")
			}
			if e == nil { // every current value was delivered
				sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
				return out, nil
			}
			a, err := decodeEntry(e)
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
	}
}

// History returns the revisions of name the bucket holds, oldest first,
// its deletes included (Agent.Deleted).
func (r *Registry) History(ctx context.Context, name string) ([]Agent, error) {
	if !events.ValidAgentName(name) {
		return nil, fmt.Errorf("%w: %q is not an agent name", ErrUnknownAgent, name)
	}
	kv, err := r.bucket(ctx)
	if err != nil {
		return nil, err
	}
	es, err := kv.History(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: no agent %q in %s", ErrUnknownAgent, name, events.BucketAgents)
	}
	if err != nil {
		return nil, fmt.Errorf("agents: history %s: %w", name, err)
	}
	out := make([]Agent, 0, len(es))
	for _, e := range es {
		a, err := decodeEntry(e)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return slices.Clip(out), nil
}

// Delete removes name: Resolve of NAME reports ErrUnknownAgent from then
// on, while its revisions still resolve as NAME@REV (the history is kept).
// It returns ErrUnknownAgent when there is no such agent.
func (r *Registry) Delete(ctx context.Context, name string) error {
	if !events.ValidAgentName(name) {
		return fmt.Errorf("%w: %q is not an agent name", ErrUnknownAgent, name)
	}
	kv, err := r.bucket(ctx)
	if err != nil {
		return err
	}
	e, err := kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%w: no agent %q in %s", ErrUnknownAgent, name, events.BucketAgents)
	}
	if err != nil {
		return fmt.Errorf("agents: get %s: %w", name, err)
	}
	// The revision read is the one deleted: a put that came between is
	// not removed without a word.
	if err := kv.Delete(ctx, name, jetstream.LastRevision(e.Revision())); err != nil {
		return fmt.Errorf("agents: delete %s: %w", name, err)
	}
	return nil
}
