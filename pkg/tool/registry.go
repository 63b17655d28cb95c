package tool

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/llmworker/llmworker/pkg/events"
)

// Registry looks tools up by name, the Go form of the worker's
// HashMap<String, Box<dyn Tool>> (docs/architecture.md#the-turn-loop). The zero value is an
// empty registry ready to use; it is safe for concurrent use, so tools may
// be registered while turns run.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
}

// NewRegistry returns a registry holding tools (see Register).
func NewRegistry(tools ...Tool) (*Registry, error) {
	r := &Registry{}
	if err := r.Register(tools...); err != nil {
		return nil, err
	}
	return r, nil
}

// Register adds tools, all or none: if one is nil (ErrInvalidTool), has an
// invalid name (ErrInvalidName), a schema that is not a JSON object
// (ErrInvalidSchema), or a name already registered or repeated in the call
// (ErrDuplicateTool), nothing is added and the error names the tool.
func (r *Registry) Register(tools ...Tool) error {
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		if t == nil {
			return fmt.Errorf("%w: tool %d of %d is nil", ErrInvalidTool, i+1, len(tools))
		}
		name := t.Name()
		if !events.ValidToolName(name) {
			return fmt.Errorf("%w: %q must match ^[a-zA-Z0-9_-]{1,64}$", ErrInvalidName, name)
		}
		if err := checkToolSchema(t.InputSchema()); err != nil {
			return fmt.Errorf("tool %q: %w", name, err)
		}
		if seen[name] {
			return fmt.Errorf("%w: %q is given twice", ErrDuplicateTool, name)
		}
		seen[name] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range tools {
		if _, ok := r.tools[t.Name()]; ok {
			return fmt.Errorf("%w: %q is already registered", ErrDuplicateTool, t.Name())
		}
	}
	if r.tools == nil {
		r.tools = make(map[string]Tool, len(tools))
	}
	for _, t := range tools {
		r.tools[t.Name()] = t
	}
	return nil
}

// MustRegister is Register that panics on error, for start-up code.
func (r *Registry) MustRegister(tools ...Tool) {
	if err := r.Register(tools...); err != nil {
		panic(err)
	}
}

// Unregister removes the tool called name and reports whether it was there.
func (r *Registry) Unregister(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.tools[name]
	delete(r.tools, name)
	return ok
}

// Get returns the tool called name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Len returns the number of tools.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.tools)
}

// Names returns the tool names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		names = append(names, n)
	}
	r.mu.RUnlock()
	slices.Sort(names)
	return names
}

// List returns the tools sorted by name.
func (r *Registry) List() []Tool {
	r.mu.RLock()
	tools := make([]Tool, 0, len(r.tools))
	for _, t := range r.tools {
		tools = append(tools, t)
	}
	r.mu.RUnlock()
	slices.SortFunc(tools, func(a, b Tool) int { return strings.Compare(a.Name(), b.Name()) })
	return tools
}

// Definitions returns the definitions of the tools the patterns select, the
// "tools" of a turn request (docs/protocol.md §5): a tool name, or "*" for every
// tool. The result is sorted by name without duplicates, so the same
// selection always yields the same request bytes. No patterns select no
// tools. Names that are not registered are reported in an
// *UnknownToolError (ErrUnknownTool) naming them; the definitions of the
// known tools are returned with it, for callers that prefer to go on.
func (r *Registry) Definitions(patterns ...string) ([]events.ToolDefinition, error) {
	var selected []Tool
	var unknown []string
	// Tools are deduplicated by name: comparing Tool values could panic on
	// tool types that are not comparable.
	taken := map[string]bool{}
	r.mu.RLock()
	for _, p := range patterns {
		if p != "*" {
			continue
		}
		for n, t := range r.tools {
			if !taken[n] {
				taken[n] = true
				selected = append(selected, t)
			}
		}
	}
	for _, p := range patterns {
		if p == "*" || taken[p] {
			continue
		}
		if t, ok := r.tools[p]; ok {
			taken[p] = true
			selected = append(selected, t)
		} else if !slices.Contains(unknown, p) {
			unknown = append(unknown, p)
		}
	}
	r.mu.RUnlock()
	slices.SortFunc(selected, func(a, b Tool) int { return strings.Compare(a.Name(), b.Name()) })
	defs := make([]events.ToolDefinition, len(selected))
	for i, t := range selected {
		defs[i] = Definition(t)
	}
	if len(unknown) > 0 {
		return defs, &UnknownToolError{Names: unknown}
	}
	return defs, nil
}
