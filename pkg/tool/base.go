package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
)

// base is what typed and raw tools share: metadata, the compiled input
// schema, and the execution wrapper (timeout, panic recovery, error
// classification).
type base struct {
	name        string
	description string
	timeout     time.Duration
	version     string
	eager       bool
	validator   *Validator
}

func newBase(name, description string, schema json.RawMessage, c config) (base, error) {
	if !events.ValidToolName(name) {
		return base{}, fmt.Errorf("%w: %q must match ^[a-zA-Z0-9_-]{1,64}$", ErrInvalidName, name)
	}
	if err := checkToolSchema(schema); err != nil {
		return base{}, fmt.Errorf("tool %q: %w", name, err)
	}
	v, err := NewValidator(schema)
	if err != nil {
		return base{}, fmt.Errorf("tool %q: %w", name, err)
	}
	eager := c.readOnly || c.idempotent
	if c.eager != nil {
		eager = *c.eager
	}
	return base{name: name, description: description, timeout: c.timeout, version: c.version, eager: eager, validator: v}, nil
}

// Name implements Tool.
func (b *base) Name() string { return b.name }

// Description implements Tool.
func (b *base) Description() string { return b.description }

// InputSchema implements Tool. It returns a copy: callers may keep or change
// it without affecting the tool.
func (b *base) InputSchema() json.RawMessage { return slices.Clone(b.validator.Schema()) }

// Timeout implements Timeouter: the WithTimeout value, 0 if none.
func (b *base) Timeout() time.Duration { return b.timeout }

// Version implements Versioner: the WithVersion value, "" if none.
func (b *base) Version() string { return b.version }

// Eager implements Eagerer: WithEager's value, else whether the tool is
// WithReadOnly or WithIdempotent.
func (b *base) Eager() bool { return b.eager }

// ValidateInput implements InputValidator: it checks input against the
// compiled input schema. Empty input counts as {}.
func (b *base) ValidateInput(input json.RawMessage) error {
	_, err := b.check(input)
	return err
}

// Definition returns the tool's definition for models.
func (b *base) Definition() events.ToolDefinition {
	return events.ToolDefinition{Name: b.name, Description: b.description, InputSchema: b.InputSchema()}
}

func (b *base) check(input json.RawMessage) (json.RawMessage, error) {
	in, err := b.validator.check(input)
	if err != nil {
		var ia *InvalidArgumentError
		if errors.As(err, &ia) {
			return nil, ia.withTool(b.name)
		}
		return nil, err
	}
	return in, nil
}

// run calls fn under the tool's timeout, turning a panic into an error and
// classifying fn's error: invalid-argument errors pass through (the model
// must fix its input), anything else becomes an *ExecutionError.
func (b *base) run(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	if b.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.timeout)
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			err = &ExecutionError{Tool: b.name, Err: fmt.Errorf("%w: %v", ErrPanicked, p), Stack: debug.Stack()}
		}
	}()
	if err := fn(ctx); err != nil {
		var ia *InvalidArgumentError
		if errors.As(err, &ia) {
			if ia.Tool == "" {
				return ia.withTool(b.name)
			}
			return ia
		}
		if errors.Is(err, ErrInvalidArgument) {
			return err
		}
		return &ExecutionError{Tool: b.name, Err: err}
	}
	return nil
}
