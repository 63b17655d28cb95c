package tool

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

var (
	// ErrInvalidArgument is matched (errors.Is) by every error that blames
	// the model's input: input that is not JSON, not an object, does not
	// match the tool's input schema or does not decode into the arguments
	// type. Execute returns it as an *InvalidArgumentError; so does
	// Validator.Validate. A tool function may return (or wrap) one itself
	// for semantic checks the schema cannot express; it is passed through
	// unwrapped so the caller still sees an invalid-argument error.
	ErrInvalidArgument = errors.New("tool: invalid argument")

	// ErrExecutionFailed is matched by the errors Execute returns when the
	// tool function failed: it returned an error, panicked, or its result
	// could not be encoded. The error is an *ExecutionError that unwraps to
	// the function's error (so errors.Is(err, context.DeadlineExceeded)
	// still works).
	ErrExecutionFailed = errors.New("tool: execution failed")

	// ErrPanicked is matched, together with ErrExecutionFailed, by the error
	// Execute returns when the tool function panicked. The panic never
	// crashes the process.
	ErrPanicked = errors.New("tool: panicked")

	// ErrInvalidName is returned by New, NewFunc and Registry.Register when
	// a tool name does not match ^[a-zA-Z0-9_-]{1,64}$
	// (events.ValidToolName).
	ErrInvalidName = errors.New("tool: invalid tool name")

	// ErrInvalidSchema is returned by New, NewFunc, NewValidator and
	// Registry.Register when an input schema cannot be used: the arguments
	// type does not reflect to an inline object schema (recursive types,
	// channels, funcs, non-object types), or a raw schema is not a JSON
	// object, does not compile, or (for tools) is not of type "object".
	ErrInvalidSchema = errors.New("tool: invalid input schema")

	// ErrInvalidTool is returned by New and NewFunc for a nil function and
	// by Registry.Register for a nil Tool.
	ErrInvalidTool = errors.New("tool: invalid tool")

	// ErrDuplicateTool is returned by Registry.Register when a tool of the
	// same name is already registered (or appears twice in one call).
	ErrDuplicateTool = errors.New("tool: duplicate tool name")

	// ErrUnknownTool is returned by Registry.Definitions when a pattern
	// names a tool that is not registered.
	ErrUnknownTool = errors.New("tool: unknown tool")
)

// Problem is one thing wrong with a tool input.
type Problem struct {
	// Field is the JSON path of the offending value, e.g.
	// "location.city" or "stops[2].name"; "" means the input as a whole.
	Field string
	// Message says what was expected: "is required", "must be integer,
	// got string", "must be one of \"c\", \"f\"", ...
	Message string
}

func (p Problem) String() string {
	if p.Field == "" {
		return "input " + p.Message
	}
	return "field " + strconv.Quote(p.Field) + " " + p.Message
}

// InvalidArgumentError is the error for input the model got wrong. Its
// message names every offending field and what was expected there, so that
// the model can read it as a tool result and call the tool again with
// corrected input. It matches ErrInvalidArgument.
type InvalidArgumentError struct {
	// Tool is the tool's name; "" when the error comes from a bare
	// Validator.
	Tool string
	// Problems lists what is wrong, sorted by field; never empty.
	Problems []Problem
}

func (e *InvalidArgumentError) Error() string {
	var b strings.Builder
	b.WriteString("invalid arguments")
	if e.Tool != "" {
		b.WriteString(" for tool ")
		b.WriteString(strconv.Quote(e.Tool))
	}
	b.WriteString(": ")
	if len(e.Problems) == 0 {
		b.WriteString("input does not match the input schema")
	}
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *InvalidArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// withTool returns a copy of e naming the tool (errors from a shared
// Validator do not know which tool they were for).
func (e *InvalidArgumentError) withTool(name string) *InvalidArgumentError {
	c := *e
	c.Tool = name
	return &c
}

// ExecutionError is returned by Execute when the tool function failed. It
// matches ErrExecutionFailed, and ErrPanicked when the function panicked,
// and unwraps to the function's own error.
type ExecutionError struct {
	// Tool is the tool's name.
	Tool string
	// Err is what the function returned, or describes the panic.
	Err error
	// Stack is the goroutine stack at the panic, for logs; nil unless the
	// function panicked. It is kept out of Error() because the message is
	// shown to the model.
	Stack []byte
}

func (e *ExecutionError) Error() string {
	return fmt.Sprintf("tool %q failed: %v", e.Tool, e.Err)
}

// Is makes errors.Is(err, ErrExecutionFailed) true.
func (e *ExecutionError) Is(target error) bool { return target == ErrExecutionFailed }

// Unwrap returns the function's error.
func (e *ExecutionError) Unwrap() error { return e.Err }

// UnknownToolError is returned by Registry.Definitions for patterns that name
// no registered tool. It matches ErrUnknownTool.
type UnknownToolError struct {
	// Names are the unknown names, in the order they were asked for.
	Names []string
}

func (e *UnknownToolError) Error() string {
	q := make([]string, len(e.Names))
	for i, n := range e.Names {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return "unknown tool " + q[0]
	}
	return "unknown tools " + strings.Join(q, ", ")
}

// Is makes errors.Is(err, ErrUnknownTool) true.
func (e *UnknownToolError) Is(target error) bool { return target == ErrUnknownTool }
