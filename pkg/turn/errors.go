package turn

import (
	"errors"
	"fmt"

	"github.com/llmworker/llmworker/pkg/worker"
)

var (
	// ErrNilConn is returned by New without a NATS connection.
	ErrNilConn = errors.New("turn: nil NATS connection")

	// ErrInvalidConfig is returned by New for a prefix that is not a NATS
	// subject prefix, an instance name with spaces or '/', negative bounds,
	// or in-process tools with invalid or duplicate names.
	ErrInvalidConfig = errors.New("turn: invalid config")

	// ErrAlreadyStarted is returned by Start on a service that was started
	// before (a Service runs once).
	ErrAlreadyStarted = errors.New("turn: service already started")

	// ErrNotStarted is returned by Stop on a service that was never
	// started.
	ErrNotStarted = errors.New("turn: service not started")

	// ErrInvalidRequest is matched by the reason of a turn that failed with
	// code "invalid_request": the message was not a CloudEvent, had an
	// unknown type, or its data did not validate (the reason names the
	// field).
	ErrInvalidRequest = errors.New("turn: invalid turn request")

	// ErrUnknownTool is matched by the reason of a turn whose request names
	// a tool (in "tools") that is neither in the catalog (KV LLMW_TOOLS)
	// nor one of Config.Tools (code "unknown_tool").
	ErrUnknownTool = errors.New("turn: unknown tool")

	// ErrTooLarge is matched by the reason of a turn whose checkpoint,
	// session transcript or completed event is larger than the NATS max
	// payload (code "too_large"; the turn fails instead of the service
	// crashing).
	ErrTooLarge = errors.New("turn: too large for NATS")

	// ErrOwnershipLost is what the checkpoint callback returns when the
	// checkpoint's revision changed under it: another replica owns the turn
	// now, and this run stops without publishing anything more. It matches
	// worker.ErrDetached, so the worker runs no on_abort hooks for it.
	ErrOwnershipLost = fmt.Errorf("turn: another replica owns the turn (%w)", worker.ErrDetached)

	// ErrDraining is what the checkpoint callback returns after Stop began:
	// the checkpoint was written and the turn is handed to another replica
	// at this step boundary (its request is not acknowledged). It matches
	// worker.ErrDetached.
	ErrDraining = fmt.Errorf("turn: replica draining (%w)", worker.ErrDetached)

	// ErrNotPaused is logged (and the request terminated) when a resume
	// request names a turn that is running, or a request that is not a
	// redelivery names a turn that runs on another replica.
	ErrNotPaused = errors.New("turn: turn is not paused")
)

// Codes of llmw.turn.failed / llmw.turn.aborted (events.TurnEnded.Code)
// that the turn service sets itself; the worker's codes
// (worker.CodeMaxSteps, ...) are used for the rest.
const (
	CodeInvalidRequest = "invalid_request"
	CodeUnknownTool    = "unknown_tool"
	CodeTooLarge       = "too_large"
	CodeUnknownTurn    = "unknown_turn"
	CodeCancelled      = "cancelled"
	CodeInternal       = "internal"
)
