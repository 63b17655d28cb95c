package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// RewriteInput sets and deletes fields of a call's input
// (before_tool_call). Paths are dot-separated object keys, with numbers
// indexing arrays: "options.limit", "items.0.id". Set creates missing
// objects on the way; deleting a missing field does nothing. An input that
// is not a JSON object, or a set through a value that is neither an object
// nor an array, fails the hook.
type RewriteInput struct {
	// Set maps field paths to values (anything encoding/json marshals).
	Set map[string]any `yaml:"set,omitempty"`
	// Delete lists field paths to remove.
	Delete []string `yaml:"delete,omitempty"`
}

func (RewriteInput) Type() string            { return "rewrite_input" }
func (RewriteInput) Event() events.HookEvent { return events.HookBeforeToolCall }

// Validate checks that there is something to do and that every path is a
// field path.
func (c RewriteInput) Validate() error {
	if len(c.Set) == 0 && len(c.Delete) == 0 {
		return fieldErr("", "needs set or delete")
	}
	for _, p := range slices.Sorted(maps.Keys(c.Set)) {
		if !validPath(p) {
			return fieldErr("set."+p, "is not a field path such as a.b.0.c")
		}
		if _, err := jsonValue(c.Set[p]); err != nil {
			return fieldErr("set."+p, "is not a JSON value: %v", err)
		}
	}
	for i, p := range c.Delete {
		if !validPath(p) {
			return fieldErr(fmt.Sprintf("delete[%d]", i), "is not a field path such as a.b.0.c: %q", p)
		}
	}
	return nil
}

func validPath(p string) bool {
	return p != "" && !strings.Contains(p, "..") && !strings.HasPrefix(p, ".") && !strings.HasSuffix(p, ".")
}

// Hook returns the hook.
func (c RewriteInput) Hook() (hook.BeforeToolCallHook, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	set := make(map[string]json.RawMessage, len(c.Set))
	for k, v := range c.Set {
		b, _ := jsonValue(v) // checked by Validate
		set[k] = b
	}
	del := slices.Clone(c.Delete)
	return hook.BeforeToolCallFunc(func(_ context.Context, in *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
		out, err := rewrite(in.Call.Input, set, del)
		if err != nil {
			return hook.BeforeToolCallResult{}, err
		}
		in.Call.Input = out
		return hook.BeforeToolCallResult{}, nil
	}), nil
}

func (c RewriteInput) build() (any, error) { return c.Hook() }

// rewrite applies set and del to a JSON object.
func rewrite(input json.RawMessage, set map[string]json.RawMessage, del []string) (json.RawMessage, error) {
	var root any = map[string]any{}
	if b := bytes.TrimSpace(input); len(b) > 0 && string(b) != "null" {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&root); err != nil {
			return nil, fmt.Errorf("tool input is not JSON: %w", err)
		}
	}
	if _, ok := root.(map[string]any); !ok {
		return nil, fmt.Errorf("tool input is not a JSON object")
	}
	for _, p := range del {
		deletePath(root, strings.Split(p, "."))
	}
	// Apply sets in a stable order (sorted paths) so the result does not
	// depend on map iteration.
	paths := make([]string, 0, len(set))
	for p := range set {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		var v any
		dec := json.NewDecoder(bytes.NewReader(set[p]))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("set %s: %w", p, err)
		}
		var err error
		if root, err = setPath(root, strings.Split(p, "."), v); err != nil {
			return nil, fmt.Errorf("set %s: %w", p, err)
		}
	}
	return json.Marshal(root)
}

func setPath(node any, path []string, v any) (any, error) {
	if len(path) == 0 {
		return v, nil
	}
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[path[0]]
		if !ok && len(path) > 1 {
			child = map[string]any{}
		}
		c, err := setPath(child, path[1:], v)
		if err != nil {
			return nil, err
		}
		n[path[0]] = c
		return n, nil
	case []any:
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i >= len(n) {
			return nil, fmt.Errorf("%q is not an index of an array of %d", path[0], len(n))
		}
		c, err := setPath(n[i], path[1:], v)
		if err != nil {
			return nil, err
		}
		n[i] = c
		return n, nil
	}
	return nil, fmt.Errorf("cannot set %q inside a value that is neither an object nor an array", path[0])
}

func deletePath(node any, path []string) {
	switch n := node.(type) {
	case map[string]any:
		if len(path) == 1 {
			delete(n, path[0])
			return
		}
		deletePath(n[path[0]], path[1:])
	case []any:
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i >= len(n) {
			return
		}
		if len(path) == 1 {
			return // removing array elements would shift the others: not supported
		}
		deletePath(n[i], path[1:])
	}
}
