package toolexec

import "errors"

var (
	// ErrStarted is returned by Register and Start after Start.
	ErrStarted = errors.New("toolexec: already started")

	// ErrNotStarted is returned by Stop before Start.
	ErrNotStarted = errors.New("toolexec: not started")

	// ErrNoTools is returned by Start when no tool is registered.
	ErrNoTools = errors.New("toolexec: no tools registered")

	// ErrInvalidTool is returned by Register for a nil tool, an invalid
	// name or schema, or a name registered twice.
	ErrInvalidTool = errors.New("toolexec: invalid tool")
)
