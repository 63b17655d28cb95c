package remotehook

import "errors"

// Hook failures. A remote hook's Call returns an error wrapping one of these
// (or the context's error on a timeout); the hook.Chain then applies the
// hook's failure policy (fail_open goes on, fail_closed aborts).
var (
	// ErrNoResponders is returned when nobody answers on the hook's
	// subject (no hookbridge or other responder is subscribed).
	ErrNoResponders = errors.New("remotehook: no responders")

	// ErrInvalidReply is returned when the reply cannot be decoded, is not
	// a llmw.hook.response, fails validation, carries a result that is not
	// allowed at the hook point, or replaces the tool call or result with
	// one of another id.
	ErrInvalidReply = errors.New("remotehook: invalid reply")

	// ErrResponder is returned when the responder answered with an error
	// reply (Nats-Service-Error header), e.g. because its handler failed
	// or panicked.
	ErrResponder = errors.New("remotehook: responder error")
)

// ErrInvalidRegistration is returned by New, Register and RegisterOrdered
// (wrapping the events.FieldError) for a registration that does not
// validate.
var ErrInvalidRegistration = errors.New("remotehook: invalid registration")

// ErrRegistry is returned (wrapping the JetStream error) when the
// LLMW_HOOKS bucket cannot be opened, read, written or watched.
var ErrRegistry = errors.New("remotehook: registry")
