package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
)

// Typed is a tool made from a Go function over an arguments type: the Go
// counterpart of the Rust tool macro of docs/architecture.md#the-turn-loop. Build it with New.
// It is safe for concurrent use if fn is.
type Typed[Args, Result any] struct {
	base
	fn   func(ctx context.Context, args Args) (Result, error)
	flat *flatDecoder // nil unless Args is a flat struct
}

var (
	_ Tool           = (*Typed[struct{}, string])(nil)
	_ Timeouter      = (*Typed[struct{}, string])(nil)
	_ Versioner      = (*Typed[struct{}, string])(nil)
	_ InputValidator = (*Typed[struct{}, string])(nil)
	_ ContentTool    = (*Typed[struct{}, Content])(nil)
)

// New makes a tool named name (^[a-zA-Z0-9_-]{1,64}$) that runs fn. Its
// input schema is generated from Args (see SchemaFor) unless WithSchema gives
// one, and compiled once. Execute validates the model's input against it,
// decodes it into an Args and calls fn; see Typed.Execute.
//
// Errors: ErrInvalidName, ErrInvalidSchema (Args cannot be described inline,
// or a WithSchema schema is unusable), ErrInvalidTool (fn is nil).
func New[Args, Result any](name, description string, fn func(ctx context.Context, args Args) (Result, error), opts ...Option) (*Typed[Args, Result], error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: tool %q has a nil function", ErrInvalidTool, name)
	}
	c := newConfig(opts)
	schema := c.schema
	if schema == nil {
		var err error
		if schema, err = SchemaFor[Args](); err != nil {
			return nil, fmt.Errorf("tool %q: %w", name, err)
		}
	}
	b, err := newBase(name, description, schema, c)
	if err != nil {
		return nil, err
	}
	return &Typed[Args, Result]{base: b, fn: fn, flat: newFlatDecoder(reflect.TypeFor[Args]())}, nil
}

// Must is New for tools defined at package level or in main: it panics on
// error, which can only be a programming mistake in the definition.
func Must[Args, Result any](name, description string, fn func(ctx context.Context, args Args) (Result, error), opts ...Option) *Typed[Args, Result] {
	t, err := New(name, description, fn, opts...)
	if err != nil {
		panic(err)
	}
	return t
}

// Execute implements Tool. Empty input counts as {}. Input that is not JSON,
// does not match the input schema or does not decode into Args is an
// *InvalidArgumentError naming the fields, and fn is not called. fn runs
// under the WithTimeout deadline if any; its error is returned as an
// *ExecutionError (ErrExecutionFailed) unless it is itself an
// invalid-argument error, and a panic becomes an *ExecutionError matching
// ErrPanicked. The result becomes the text the model reads: a string as is,
// a []byte as a string, a Content (or []events.Part) as the text of its
// text parts, anything else as JSON.
func (t *Typed[Args, Result]) Execute(ctx context.Context, input json.RawMessage) (string, error) {
	text, parts, err := t.execute(ctx, input)
	if parts != nil {
		text = events.PartsText(parts)
	}
	return text, err
}

// ExecuteContent implements ContentTool: Execute, but a Content (or
// []events.Part) result comes back as its parts, which are checked
// (events.ValidateResultParts: text, image and file parts, their media
// well-formed) so that a bad part fails the call here, naming the tool,
// rather than the model request later.
func (t *Typed[Args, Result]) ExecuteContent(ctx context.Context, input json.RawMessage) (string, Content, error) {
	text, parts, err := t.execute(ctx, input)
	if err != nil || parts == nil {
		return text, nil, err
	}
	if err := events.ValidateResultParts("content", parts); err != nil {
		return "", nil, &ExecutionError{Tool: t.name, Err: fmt.Errorf("invalid result: %w", err)}
	}
	return events.PartsText(parts), parts, nil
}

func (t *Typed[Args, Result]) execute(ctx context.Context, input json.RawMessage) (string, Content, error) {
	in, err := t.check(input)
	if err != nil {
		return "", nil, err
	}
	var args Args
	if t.flat == nil || !t.flat.decode(in, reflect.ValueOf(&args).Elem()) {
		args = *new(Args) // the flat decoder may have set some fields
		if err := json.Unmarshal(in, &args); err != nil {
			// The schema accepted the input but Go cannot hold it, e.g. 1.5 or
			// 1e300 for an int, or a custom UnmarshalJSON said no.
			return "", nil, &InvalidArgumentError{Tool: t.name, Problems: []Problem{decodeProblem(err)}}
		}
	}
	var (
		out   string
		parts Content
	)
	err = t.run(ctx, func(ctx context.Context) error {
		res, err := t.fn(ctx, args)
		if err != nil {
			return err
		}
		// Strings, the usual result, without boxing them into an any.
		switch r := any(res).(type) {
		case string:
			out = r
			return nil
		case []byte:
			out = string(r)
			return nil
		case Content:
			parts = r
			if parts == nil {
				parts = Content{}
			}
			return nil
		case []events.Part:
			parts = r
			if parts == nil {
				parts = Content{}
			}
			return nil
		}
		out, err = encodeResult(res)
		return err
	})
	if err != nil {
		return "", nil, err
	}
	return out, parts, nil
}

// Call runs the function directly with typed arguments, bypassing JSON,
// validation, the timeout and panic recovery: for tests and Go callers.
func (t *Typed[Args, Result]) Call(ctx context.Context, args Args) (Result, error) {
	return t.fn(ctx, args)
}

func encodeResult(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encoding the result as JSON: %w", err)
	}
	return string(b), nil
}

// decodeProblem phrases an encoding/json error as a Problem.
func decodeProblem(err error) Problem {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return Problem{Field: te.Field, Message: fmt.Sprintf("must be %s, got JSON %s", goKind(te.Type.Kind().String()), te.Value)}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return Problem{Message: fmt.Sprintf("is not valid JSON (%v); send a JSON object", se)}
	}
	return Problem{Message: "could not be decoded: " + strings.TrimPrefix(err.Error(), "json: ")}
}

func goKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"):
		return "an integer"
	case strings.HasPrefix(k, "uint"):
		return "a non-negative integer"
	case strings.HasPrefix(k, "float"):
		return "a number"
	case k == "bool":
		return "a boolean"
	case k == "string":
		return "a string"
	case k == "slice" || k == "array":
		return "an array"
	}
	return "an object"
}
