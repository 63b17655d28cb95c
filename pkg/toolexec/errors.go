package toolexec

import (
	"errors"

	"github.com/llmworker/llmworker/pkg/events"
)

// Errors of the server side (Server).
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

	// ErrInvalidConfig is returned by New for a Config it cannot run
	// with; the error names the field.
	ErrInvalidConfig = errors.New("toolexec: invalid config")
)

// Errors of the client side (Client, RemoteTool, Catalog).
var (
	// ErrNoCallInfo is returned by RemoteTool.Execute when the context
	// carries no call (tool.WithCall; the worker sets it for every tool
	// execution): a remote call needs the turn and call ids for its
	// subjects and de-duplication.
	ErrNoCallInfo = errors.New("toolexec: no call info in context")

	// ErrToolDeadline is returned by RemoteTool.Execute and Client.Call
	// when no result arrived before the call's deadline, e.g. because no
	// toolexec hosts the tool (the call then waits in LLMW_TOOLCALLS).
	ErrToolDeadline = errors.New("toolexec: no tool result before the deadline")

	// ErrToolFailed is matched by the error RemoteTool.Execute returns for a
	// result with is_error true (a *ResultError whose text is the result
	// content, which the model reads).
	ErrToolFailed = errors.New("toolexec: tool result is an error")

	// ErrUnreadableResult is wrapped by ReadResult's error for a result
	// message that cannot be read (not a llmw.tool.result, data that does
	// not decode or validate, a media part whose bytes are not its
	// media_type) or that names another call or turn than its subject.
	// Client.Call and StoredResult answer such a stored result with an
	// error result (Unreadable) instead of waiting for another.
	ErrUnreadableResult = errors.New("toolexec: tool result cannot be read")

	// ErrInvalidCall is returned by Client.Call for a request that cannot
	// be sent (missing or malformed ids or name).
	ErrInvalidCall = errors.New("toolexec: invalid tool call")

	// ErrNotFound is returned by Catalog.Get for a tool that is not in
	// LLMW_TOOLS.
	ErrNotFound = errors.New("toolexec: not found")

	// ErrInvalidClaim is returned by Catalog.Claim for a host id that is
	// not one KV key token or a TTL under MinCatalogTTL.
	ErrInvalidClaim = errors.New("toolexec: invalid catalog claim")
)

// ResultError is the error of a tool result with is_error true. Its text
// is the result content unchanged, so that a worker which turns errors into
// error results shows the model exactly what the tool said.
type ResultError struct {
	Result events.ToolCallResult
}

func (e *ResultError) Error() string { return e.Result.Content }

// Is makes errors.Is(err, ErrToolFailed) true.
func (e *ResultError) Is(target error) bool { return target == ErrToolFailed }
