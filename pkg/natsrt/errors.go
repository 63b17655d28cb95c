package natsrt

import (
	"errors"

	"github.com/llmworker/llmworker/pkg/events"
)

var (
	// ErrProvider is returned by IngestClient.Stream when ingest answered
	// the completion request with a micro error reply (Nats-Service-Error
	// and Nats-Service-Error-Code headers); the error text names both.
	ErrProvider = errors.New("natsrt: ingest error")

	// ErrNoIngest is returned by IngestClient.Stream when nobody serves
	// P.llm.complete (no ingest running) or the reply did not arrive within
	// IngestOptions.RequestTimeout.
	ErrNoIngest = errors.New("natsrt: no ingest reply")

	// ErrBadReply is returned by IngestClient.Stream when ingest's reply
	// cannot be decoded or names another stream subject than the one the
	// client subscribed to.
	ErrBadReply = errors.New("natsrt: invalid ingest reply")

	// ErrNoCallInfo is returned by RemoteTool.Execute when the context
	// carries no call (neither WithCall nor worker.CallInfoFrom): a remote call needs the turn and
	// call ids for its subjects and de-duplication.
	ErrNoCallInfo = errors.New("natsrt: no call info in context")

	// ErrToolDeadline is returned by RemoteTool.Execute and ToolClient.Call
	// when no result arrived before the call's deadline, e.g. because no
	// toolexec hosts the tool (the call then waits in LLMW_TOOLCALLS).
	ErrToolDeadline = errors.New("natsrt: no tool result before the deadline")

	// ErrToolFailed is matched by the error RemoteTool.Execute returns for a
	// result with is_error true (a *ResultError whose text is the result
	// content, which the model reads).
	ErrToolFailed = errors.New("natsrt: tool result is an error")

	// ErrInvalidCall is returned by ToolClient.Call for a request that
	// cannot be sent (missing or malformed ids or name).
	ErrInvalidCall = errors.New("natsrt: invalid tool call")

	// ErrNotFound is returned by Catalog.Get for a tool that is not in
	// LLMW_TOOLS.
	ErrNotFound = errors.New("natsrt: not found")
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

// ErrProvision is returned by Provision when a stream or bucket cannot be
// created or updated (e.g. it exists with an incompatible configuration
// such as another retention policy).
var ErrProvision = errors.New("natsrt: provision")
