package hooknats

import "errors"

// Hook failures. A remote hook's Call returns an error wrapping one of these
// (or the context's error on a timeout); the hook.Chain then applies the
// hook's failure policy (fail_open goes on, fail_closed aborts).
var (
	// ErrNoResponders is returned when nobody answers on the hook's
	// subject (no hookbridge or other responder is subscribed).
	ErrNoResponders = errors.New("hooknats: no responders")

	// ErrInvalidReply is returned when the reply cannot be decoded, is not
	// a llmw.hook.response, fails validation, carries a result that is not
	// allowed at the hook point, or replaces the tool call or result with
	// one of another id.
	ErrInvalidReply = errors.New("hooknats: invalid reply")

	// ErrResponder is returned when the responder answered with an error
	// reply (Nats-Service-Error header), e.g. because its handler failed
	// or panicked.
	ErrResponder = errors.New("hooknats: responder error")
)

// ErrInvalidRegistration is returned by New, Register and RegisterOrdered
// (wrapping the events.FieldError) for a registration that does not
// validate. It is also Entry.Err of a stored value that is not a valid
// registration, and the error every call of the hook Watch makes of such
// a value fails with.
var ErrInvalidRegistration = errors.New("hooknats: invalid registration")

// ErrRegistry is returned (wrapping the JetStream error) when the
// LLMW_HOOKS bucket cannot be opened, read, written or watched.
var ErrRegistry = errors.New("hooknats: registry")

// Server errors.
var (
	// ErrInvalidHook is returned by NewServer and Handle for a hook without
	// a handler, with an invalid registration or a duplicate name.
	ErrInvalidHook = errors.New("hooknats: invalid hook")

	// ErrStarted is returned by Start when the server was started (or
	// stopped) before.
	ErrStarted = errors.New("hooknats: already started")

	// ErrStopped is returned by Handle after Stop.
	ErrStopped = errors.New("hooknats: stopped")
)

// Handler failures: the server answers them with an error reply, which the
// turn treats as a hook failure (the hook's failure policy applies).
var (
	// ErrPanic: the handler panicked.
	ErrPanic = errors.New("hooknats: handler panicked")

	// ErrInvalidResponse: the handler returned a response that is not
	// valid for its hook's event (e.g. skip from on_message_send).
	ErrInvalidResponse = errors.New("hooknats: invalid response")
)
