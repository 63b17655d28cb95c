package tool

import (
	"context"
	"encoding/json"
	"fmt"
)

// Func is a tool made from a function over the raw JSON input, for tools
// whose input has no Go type or whose schema comes from elsewhere (a remote
// catalog, a config file). The input is still validated against the schema
// before fn runs. Build it with NewFunc.
type Func struct {
	base
	fn func(ctx context.Context, input json.RawMessage) (string, error)
}

var (
	_ Tool           = (*Func)(nil)
	_ Timeouter      = (*Func)(nil)
	_ Versioner      = (*Func)(nil)
	_ InputValidator = (*Func)(nil)
)

// defaultSchema accepts any object: a raw tool with no schema still only
// takes objects, like every tool input.
var defaultSchema = json.RawMessage(`{"type":"object"}`)

// NewFunc makes a tool named name that runs fn with the validated input.
// schema must be a JSON Schema object with "type": "object"; nil means any
// object. WithSchema, if given, replaces schema. Errors: ErrInvalidName,
// ErrInvalidSchema, ErrInvalidTool (fn is nil).
func NewFunc(name, description string, schema json.RawMessage, fn func(ctx context.Context, input json.RawMessage) (string, error), opts ...Option) (*Func, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: tool %q has a nil function", ErrInvalidTool, name)
	}
	c := newConfig(opts)
	if c.schema != nil {
		schema = c.schema
	}
	if schema == nil {
		schema = defaultSchema
	}
	b, err := newBase(name, description, schema, c)
	if err != nil {
		return nil, err
	}
	return &Func{base: b, fn: fn}, nil
}

// MustFunc is NewFunc that panics on error.
func MustFunc(name, description string, schema json.RawMessage, fn func(ctx context.Context, input json.RawMessage) (string, error), opts ...Option) *Func {
	f, err := NewFunc(name, description, schema, fn, opts...)
	if err != nil {
		panic(err)
	}
	return f
}

// Execute implements Tool: it validates input (empty counts as {}), then
// runs fn under the WithTimeout deadline with the same error handling as
// Typed.Execute (invalid-argument errors pass through, other errors and
// panics become an *ExecutionError).
func (f *Func) Execute(ctx context.Context, input json.RawMessage) (string, error) {
	in, err := f.check(input)
	if err != nil {
		return "", err
	}
	var out string
	err = f.run(ctx, func(ctx context.Context) error {
		var err error
		out, err = f.fn(ctx, in)
		return err
	})
	if err != nil {
		return "", err
	}
	return out, nil
}
