package gateway

import "errors"

// Errors of the gateway. Each HTTP error answer is JSON,
// {"error": {"code": "...", "message": "..."}} (docs/protocol.md,
// "Gateway"); the code names the sentinel.
var (
	// ErrUnauthenticated: the request carries no valid credentials (401,
	// code "unauthenticated").
	ErrUnauthenticated = errors.New("gateway: unauthenticated")
	// ErrForbidden: the caller may not read or write that session (403,
	// code "forbidden").
	ErrForbidden = errors.New("gateway: forbidden")
	// ErrBadRequest: the request is not a chat request the gateway can
	// run (400, code "bad_request"); the message names the field.
	ErrBadRequest = errors.New("gateway: bad request")
	// ErrConflict: the session's turn is in a state the request does not
	// fit, e.g. a new message while a turn runs (409, code "conflict").
	ErrConflict = errors.New("gateway: conflict")
	// ErrNotFound: no such session or turn (404, code "not_found").
	ErrNotFound = errors.New("gateway: not found")
	// ErrTooLarge: the body is larger than Config.MaxBodyBytes (413, code
	// "too_large").
	ErrTooLarge = errors.New("gateway: request body too large")
	// ErrShuttingDown: the gateway is closing; another replica (or this
	// one restarted) serves the stream (503, code "shutting_down").
	ErrShuttingDown = errors.New("gateway: shutting down")
	// ErrConfig: New refused the configuration.
	ErrConfig = errors.New("gateway: bad configuration")

	// ErrStreamEnded is returned by StreamReader.Next after the stream's
	// "[DONE]".
	ErrStreamEnded = errors.New("gateway: stream ended")
	// ErrNoActiveStream is returned by Client.Resume for the protocol's
	// 204: the session has no running or paused turn.
	ErrNoActiveStream = errors.New("gateway: no active stream")
	// ErrNothingToCompact (422): a session compacted on demand has
	// nothing left to compact (its projection is its last unit).
	ErrNothingToCompact = errors.New("gateway: nothing to compact")
	// ErrUnavailable (503): no service answers what the gateway asks on
	// the bus (no turn service runs).
	ErrUnavailable = errors.New("gateway: service unavailable")
)
