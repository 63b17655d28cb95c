package turn

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/pkg/emit"
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

	// ErrTooLarge is matched by the reason of a turn whose state without
	// its transcript (the request's system prompt and tools, the pending
	// calls' outputs) or whose completed event is larger than the NATS max
	// payload (code "too_large"; the turn fails instead of the service
	// crashing). Transcripts are stored one item a message
	// (pkg/transcript), and have no such limit.
	ErrTooLarge = errors.New("turn: too large for NATS")

	// ErrCorruptSession is matched by the reason of a turn whose session
	// (KV LLMW_SESSIONS) holds a value that is not a session transcript
	// (code "internal"; the turn fails instead of its request being
	// redelivered until it expires), and by LoadSession's error then.
	ErrCorruptSession = errors.New("turn: the stored session transcript cannot be decoded")

	// ErrTranscriptUnavailable is matched by the reason of a turn, and by
	// LoadSession's error, when a transcript its state or session record
	// names cannot be read from LLMW_TRANSCRIPTS: an item the stream's
	// limits removed (transcript.ErrMissing) or one that does not decode
	// (transcript.ErrCorrupt), both wrapped.
	ErrTranscriptUnavailable = errors.New("turn: transcript unavailable")

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

	// ErrNoA2AClient is matched by the reason of a turn of a remote A2A
	// agent (a definition's a2a_url) that a replica without
	// Config.RemoteAgents started, continued or resumed (code
	// "no_a2a_client"): it cannot reach the agent.
	ErrNoA2AClient = errors.New("turn: this replica has no A2A client (turn.Config.RemoteAgents) for remote agents")

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
	CodeUnknownAgent   = "unknown_agent"
	CodeTooLarge       = "too_large"
	CodeCancelled      = "cancelled"
	CodeInternal       = "internal"
	CodeNoA2AClient    = "no_a2a_client"
)

var (
	// ErrFenced is the turn's worker events refused (emit.ErrFenced):
	// another replica took the turn over. It matches worker.ErrDetached.
	ErrFenced = emit.ErrFenced

	// ErrEventsUnavailable is the turn's worker events not stored
	// (emit.ErrEventsUnavailable). It matches worker.ErrDetached.
	ErrEventsUnavailable = emit.ErrEventsUnavailable
)

// ErrStateUnavailable is what the checkpoint callback returns when
// LLMW_TURN_STATE did not store a checkpoint within the publisher's
// RetryTimeout (no quorum, a partition): the turn is handed off — its
// request is redelivered and the next replica continues from the last
// stored checkpoint. It matches worker.ErrDetached.
var ErrStateUnavailable = fmt.Errorf("turn: LLMW_TURN_STATE did not store the checkpoint (%w)", worker.ErrDetached)

// ErrNoSession is returned by CompactSession for a session id with no
// record in LLMW_SESSIONS (none of its turns completed, or it expired).
var ErrNoSession = errors.New("turn: no such session")

// ErrCompactionConflict is returned by CompactSession when a turn of the
// session that ended meanwhile stored a compaction that reaches as far,
// or one that replaces what this one covered: the session keeps that
// one.
var ErrCompactionConflict = errors.New("turn: the session took another compaction meanwhile")

// ErrSessionModel is returned by CompactSession when no model is given
// and the session's last turn's state (which names its model) is gone.
var ErrSessionModel = errors.New("turn: the session's model is unknown")

// isConflict reports a KV revision mismatch (wrong last sequence) or a
// create of an existing key.
func isConflict(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// transcriptLost reports whether a transcript read failed for good (an
// item missing or undecodable, a stream that is not the transcripts'),
// which fails the turn. A read that failed for a passing reason — a
// timeout, a stream without a leader while a node restarts or is cut
// off — is not: the request is delivered again and read again.
func transcriptLost(err error) bool {
	return errors.Is(err, ErrTranscriptUnavailable) && !transient(err) && !jetstreamUnavailable(err)
}

// transient reports a failure for want of an answer: a timeout, no
// responders, a connection reconnecting.
func transient(err error) bool {
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, context.DeadlineExceeded)
}

// jetstreamUnavailable reports a JetStream API refusal that passes
// (natsutil.APIErrorPasses), of either of nats.go's JetStream APIs: a
// child's KV watch refused while a node restarts is one.
func jetstreamUnavailable(err error) bool { return natsutil.APIErrorPasses(err) }
