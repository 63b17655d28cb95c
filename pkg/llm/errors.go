package llm

import "errors"

var (
	// ErrMalformedStream is matched by every error of CheckWellFormed: the
	// event sequence breaks an invariant of docs/protocol.md §3. The message names
	// the event (by position) and the invariant.
	ErrMalformedStream = errors.New("llm: malformed stream")

	// ErrStreamClosed is the Err of a SliceStream or Scripted stream that
	// was closed before it ended.
	ErrStreamClosed = errors.New("llm: stream closed")

	// ErrNilStream is the cause Normalize reports (as a stream_error event
	// followed by status failed) when it is given a nil Stream, e.g. from a
	// Provider that returned (nil, nil): a broken provider fails the model
	// call instead of crashing the process.
	ErrNilStream = errors.New("llm: provider returned a nil stream")

	// ErrSourcePanic is the cause Normalize reports (as a stream_error
	// event followed by status failed) when the source stream panicked in
	// Next or Close.
	ErrSourcePanic = errors.New("llm: provider stream panicked")

	// ErrIdle is the cancel cause a Guard's idle timer gives the request's
	// context (context.Cause): the provider sent nothing for the idle
	// timeout.
	ErrIdle = errors.New("llm: provider idle timeout")
)

// Codes of the error events Normalize synthesizes.
const (
	// CodeStreamError: the source stream failed (its Err was not nil).
	CodeStreamError = "stream_error"
	// CodeIdleTimeout: the source sent nothing for NormalizeOptions.IdleTimeout.
	CodeIdleTimeout = "idle_timeout"
	// CodeProviderFailed: the source ended with status failed without an
	// error event saying why.
	CodeProviderFailed = "provider_failed"
)
