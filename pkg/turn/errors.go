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

	// ErrCorruptSession is matched by the reason of a turn whose session
	// (KV LLMW_SESSIONS) holds a value that is not a session transcript
	// (code "internal"; the turn fails instead of its request being
	// redelivered until it expires), and by LoadSession's error then.
	ErrCorruptSession = errors.New("turn: the stored session transcript cannot be decoded")

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

	// ErrNotProvisioned is returned by Client when the stream it publishes
	// to or reads from does not exist: no llmworker runs on that NATS
	// server (or it runs with another prefix).
	ErrNotProvisioned = errors.New("llmworker is not running on this NATS server")
)

// Codes of llmw.turn.failed / llmw.turn.aborted (events.TurnEnded.Code)
// that the turn service sets itself; the worker's codes
// (worker.CodeMaxSteps, ...) are used for the rest.
const (
	CodeInvalidRequest = "invalid_request"
	CodeUnknownTool    = "unknown_tool"
	CodeTooLarge       = "too_large"
	CodeCancelled      = "cancelled"
	CodeInternal       = "internal"
)

var (
	// ErrFenced is returned by EventPublisher.Publish and Flush once
	// LLMW_EVENTS refused a batch of the turn's events because another
	// event of the turn was stored since this publisher's last one: another
	// replica took the turn over. The run stops without a trace; it
	// matches worker.ErrDetached.
	ErrFenced = fmt.Errorf("turn: worker events refused: another replica published for the turn (%w)", worker.ErrDetached)

	// ErrEventsUnavailable is returned by EventPublisher.Publish and Flush
	// once a batch of events was not acknowledged within the publisher's
	// RetryTimeout, or was refused for a reason other than fencing. The
	// run hands the turn off (its request is redelivered; the next replica
	// continues from the checkpoint); it matches worker.ErrDetached.
	ErrEventsUnavailable = fmt.Errorf("turn: LLMW_EVENTS did not store worker events (%w)", worker.ErrDetached)
)

// ErrStateUnavailable is what the checkpoint callback returns when
// LLMW_TURN_STATE did not store a checkpoint within the publisher's
// RetryTimeout (no quorum, a partition): the turn is handed off — its
// request is redelivered and the next replica continues from the last
// stored checkpoint. It matches worker.ErrDetached.
var ErrStateUnavailable = fmt.Errorf("turn: LLMW_TURN_STATE did not store the checkpoint (%w)", worker.ErrDetached)
