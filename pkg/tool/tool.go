package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
)

// Tool is something the model can call.
type Tool interface {
	// Name is how the model names the tool (^[a-zA-Z0-9_-]{1,64}$).
	Name() string
	// Description is shown to the model.
	Description() string
	// InputSchema is the JSON Schema of the input object.
	InputSchema() json.RawMessage
	// Execute runs the tool with the model's input (a JSON object). The
	// returned string is what the model reads. Errors that match
	// ErrInvalidArgument (or wrap *InvalidArgumentError) tell the model its
	// input was wrong; cancelling ctx stops the tool.
	Execute(ctx context.Context, input json.RawMessage) (string, error)
}

// Timeouter is implemented by tools that declare how long one execution may
// take (tools built with WithTimeout). Executors apply it as a deadline.
type Timeouter interface {
	Timeout() time.Duration
}

// Versioner is implemented by tools that declare a version (WithVersion).
type Versioner interface {
	Version() string
}

// Eagerer is implemented by tools that say whether a call may start while
// the model still streams its response: as soon as the call's block
// ended, before the model's answer is complete (WithEager, WithReadOnly,
// WithIdempotent; toolexec's remote tools read the catalog's eager, MCP
// tools their readOnlyHint and idempotentHint). A call started early runs
// for nothing when the response fails or the model call is made again
// (the model's next answer may not ask for it), so only a tool whose
// calls may be made for nothing says true: one that reads, or one whose
// repeated call changes nothing more (docs/architecture.md, "Tools").
type Eagerer interface {
	Eager() bool
}

// CallCanceller is implemented by tools whose calls run outside the
// process that asked for them (toolexec's remote tools): CancelCall stops
// the call c names, wherever it runs, for a turn continued from a
// checkpoint that lists a call an earlier run of the turn started and no
// longer needs. A call this process runs is stopped by cancelling its
// context instead.
type CallCanceller interface {
	CancelCall(ctx context.Context, c CallInfo) error
}

// InputValidator is implemented by tools that can check an input without
// running (typed and raw tools of this package). Validate uses it.
type InputValidator interface {
	ValidateInput(input json.RawMessage) error
}

// TimeoutOf returns t's timeout, 0 when t declares none.
func TimeoutOf(t Tool) time.Duration {
	if to, ok := t.(Timeouter); ok {
		return to.Timeout()
	}
	return 0
}

// VersionOf returns t's version, "" when t declares none.
func VersionOf(t Tool) string {
	if v, ok := t.(Versioner); ok {
		return v.Version()
	}
	return ""
}

// EagerOf reports whether a call of t may start while the model still
// streams (Eagerer); false when t does not say.
func EagerOf(t Tool) bool {
	if e, ok := t.(Eagerer); ok {
		return e.Eager()
	}
	return false
}

// Definition returns the definition of t sent to models (docs/protocol.md §4).
func Definition(t Tool) events.ToolDefinition {
	return events.ToolDefinition{Name: t.Name(), Description: t.Description(), InputSchema: t.InputSchema()}
}

// CatalogEntry returns the value executors publish for t in the tool
// catalog (docs/protocol.md §6), with its timeout, version and whether it
// starts early (EagerOf) when it has them.
func CatalogEntry(t Tool) events.ToolCatalogEntry {
	return events.ToolCatalogEntry{
		Name:        t.Name(),
		Description: t.Description(),
		InputSchema: t.InputSchema(),
		TimeoutMS:   TimeoutOf(t).Milliseconds(),
		Version:     VersionOf(t),
		Eager:       EagerOf(t),
	}
}

// Validate checks input against t's input schema without running t, for
// executors that validate before queueing or dispatching a call. Tools of
// this package use their compiled schema; any other Tool's schema is
// compiled on each call (keep a Validator for repeated use). Mismatches are
// an *InvalidArgumentError naming the tool; an unusable schema is
// ErrInvalidSchema.
func Validate(t Tool, input json.RawMessage) error {
	if iv, ok := t.(InputValidator); ok {
		return iv.ValidateInput(input)
	}
	v, err := NewValidator(t.InputSchema())
	if err != nil {
		return fmt.Errorf("tool %q: %w", t.Name(), err)
	}
	if err := v.Validate(input); err != nil {
		var ia *InvalidArgumentError
		if errors.As(err, &ia) {
			return ia.withTool(t.Name())
		}
		return err
	}
	return nil
}
