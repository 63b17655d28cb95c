package ingest

import (
	"errors"
	"strconv"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// Sentinels. The request errors (ErrInvalidRequest … ErrShuttingDown) are
// what a completion request is refused with: ingest answers with a micro
// error reply whose Nats-Service-Error-Code is the code in the table below
// and whose Llmw-Error header names the kind, and DecodeReply turns such a
// reply back into an *Error that matches the sentinel with errors.Is.
//
//	sentinel               code  Llmw-Error
//	ErrInvalidRequest      400   invalid_request
//	ErrContextOverflow     400   context_overflow
//	ErrMissingAPIKey       401   missing_api_key
//	ErrUnknownProvider     404   unknown_provider
//	ErrUnknownModel        404   unknown_model
//	ErrDuplicateRequest    409   duplicate_request
//	ErrPayloadTooLarge     413   payload_too_large
//	ErrProviderAuth        401   provider_auth
//	ErrRateLimited         429   rate_limited
//	ErrProviderSetup       500   provider_setup
//	ErrProviderUnavailable 502   provider_unavailable
//	ErrShuttingDown        503   shutting_down
//
// The provider call is opened before the reply, so that a provider's own
// refusal before its first byte (an unknown model, a rejected key, a request
// it finds invalid, a rate limit or outage that outlasted the adapter's
// retries) is an error reply too, not a failed stream.
var (
	// ErrInvalidRequest: the request is not a CloudEvent, is not of type
	// llmw.llm.complete, or its data is not a valid completion request (the
	// message names the field; the cause matches events.ErrInvalid).
	ErrInvalidRequest = errors.New("ingest: invalid completion request")

	// ErrContextOverflow: the provider refused the request because its
	// context (messages, tools and the output it asks room for) does not
	// fit the model's window (llm.KindContextOverflow). The same request
	// fails the same way; a shorter context may not.
	ErrContextOverflow = errors.New("ingest: context does not fit the model's window")

	// ErrMissingAPIKey is returned by a Factory when its provider has no API
	// key configured (e.g. OPENAI_API_KEY unset).
	ErrMissingAPIKey = errors.New("ingest: missing API key")

	// ErrUnknownProvider: the provider prefix of the model ("openai" of
	// "openai:gpt-4o") has no Factory in Config.Providers.
	ErrUnknownProvider = errors.New("ingest: unknown provider")

	// ErrUnknownModel is returned by a Factory for a model its provider does
	// not serve (see AllowModels).
	ErrUnknownModel = errors.New("ingest: unknown model")

	// ErrDuplicateRequest: a stream with the same request_id is still
	// running on this instance.
	ErrDuplicateRequest = errors.New("ingest: request_id already streaming")

	// ErrPayloadTooLarge: the request body exceeds Config.MaxPayload, or
	// the data of a request stored in LLMW_REQUESTS Config.MaxStoredRequest.
	ErrPayloadTooLarge = errors.New("ingest: payload too large")

	// ErrProviderSetup: a Factory failed for a reason other than a missing
	// key or an unknown model.
	ErrProviderSetup = errors.New("ingest: provider setup failed")

	// ErrProviderAuth: the provider rejected the configured credentials
	// (HTTP 401 or 403 before the first byte).
	ErrProviderAuth = errors.New("ingest: provider rejected the credentials")

	// ErrRateLimited: the provider still answered 429 after the adapter's
	// bounded retries.
	ErrRateLimited = errors.New("ingest: provider rate limit")

	// ErrProviderUnavailable: the provider call failed before its first
	// byte for another reason (5xx after retries, connection refused).
	ErrProviderUnavailable = errors.New("ingest: provider unavailable")

	// ErrUnsupportedContent: the request holds a content part the
	// provider cannot take (an image for a model without image input, a
	// file of a media type it does not read); refused before the call.
	ErrUnsupportedContent = errors.New("ingest: content the provider cannot take")

	// ErrShuttingDown: the request arrived while the service drains.
	ErrShuttingDown = errors.New("ingest: shutting down")

	// ErrNilConn is returned by New without a NATS connection.
	ErrNilConn = errors.New("ingest: nil NATS connection")

	// ErrInvalidConfig is returned by New for a prefix that is not a valid
	// NATS subject prefix or a negative MaxPayload or MaxStoredRequest.
	ErrInvalidConfig = errors.New("ingest: invalid config")

	// ErrAlreadyStarted is returned by Start on a started (or stopped)
	// service; a Service runs once.
	ErrAlreadyStarted = errors.New("ingest: service already started")

	// ErrNotStarted is returned by Stop on a service that was never started.
	ErrNotStarted = errors.New("ingest: service not started")

	// ErrNoReply is returned by DecodeReply for a message that is neither a
	// completion reply nor a micro error reply.
	ErrNoReply = errors.New("ingest: not a completion reply")
)

// Errors of the client side (Client).
var (
	// ErrNoIngest is returned by Client.Stream when nobody serves
	// P.llm.complete (no ingest running) or the reply did not arrive within
	// ClientOptions.RequestTimeout.
	ErrNoIngest = errors.New("ingest: no ingest reply")

	// ErrBadReply is returned by Client.Stream when ingest's reply cannot
	// be decoded or names another stream subject than the ones the client
	// subscribed to.
	ErrBadReply = errors.New("ingest: invalid ingest reply")

	// ErrRequestStore is returned by Client.Stream for a request too large
	// for one NATS message that could not be stored in LLMW_REQUESTS (the
	// object store is missing, or the store failed).
	ErrRequestStore = errors.New("ingest: cannot store the request in " + events.BucketRequests)

	// ErrClientClosed is returned by Client.Stream after Client.Close.
	ErrClientClosed = errors.New("ingest: client closed")
)

// HeaderErrorKind is the header of an error reply that names the kind of
// error (invalid_request, unknown_model, ...), so that clients can tell
// errors with the same code apart.
const HeaderErrorKind = "Llmw-Error"

// Kind names a class of request error on the wire.
type Kind string

const (
	KindInvalidRequest   Kind = "invalid_request"
	KindContextOverflow  Kind = "context_overflow"
	KindMissingAPIKey    Kind = "missing_api_key"
	KindUnknownProvider  Kind = "unknown_provider"
	KindUnknownModel     Kind = "unknown_model"
	KindDuplicateRequest Kind = "duplicate_request"
	KindPayloadTooLarge  Kind = "payload_too_large"
	KindProviderSetup    Kind = "provider_setup"
	KindShuttingDown     Kind = "shutting_down"
	KindProviderAuth     Kind = "provider_auth"
	KindRateLimited      Kind = "rate_limited"
	KindUnavailable      Kind = "provider_unavailable"
	KindUnsupported      Kind = "unsupported_content"
)

var kinds = []struct {
	kind Kind
	code int
	err  error
}{
	{KindInvalidRequest, 400, ErrInvalidRequest},
	{KindContextOverflow, 400, ErrContextOverflow},
	{KindMissingAPIKey, 401, ErrMissingAPIKey},
	{KindUnknownProvider, 404, ErrUnknownProvider},
	{KindUnknownModel, 404, ErrUnknownModel},
	{KindDuplicateRequest, 409, ErrDuplicateRequest},
	{KindPayloadTooLarge, 413, ErrPayloadTooLarge},
	{KindProviderSetup, 500, ErrProviderSetup},
	{KindShuttingDown, 503, ErrShuttingDown},
	{KindProviderAuth, 401, ErrProviderAuth},
	{KindRateLimited, 429, ErrRateLimited},
	{KindUnavailable, 502, ErrProviderUnavailable},
	{KindUnsupported, 415, ErrUnsupportedContent},
}

// Error is a refused completion request: what ingest replies, and what
// DecodeReply and Client.Stream return. It matches (errors.Is) the sentinel of its Kind.
type Error struct {
	Kind Kind `json:"code"`
	// Code is the Nats-Service-Error-Code (HTTP-like: 400, 401, 404, ...).
	Code int `json:"-"`
	// Message says what is wrong, e.g. `field "messages" is required`.
	Message string `json:"message"`
	// Field is the request field to blame, when there is one.
	Field string `json:"field,omitempty"`

	cause error
}

// ErrorKind returns the kind as an llm.ErrorKind (llm.KindNamer), so that
// the worker reports it as the failed turn's code.
func (e *Error) ErrorKind() llm.ErrorKind { return llm.ErrorKind(e.Kind) }

var _ llm.KindNamer = (*Error)(nil)

func (e *Error) Error() string {
	return "ingest: " + strconv.Itoa(e.Code) + " " + string(e.Kind) + ": " + e.Message
}

// Is matches the sentinel of e's Kind.
func (e *Error) Is(target error) bool {
	for _, k := range kinds {
		if k.kind == e.Kind {
			return target == k.err
		}
	}
	return false
}

// Unwrap returns the cause (on the ingest side only; a decoded reply has
// none).
func (e *Error) Unwrap() error { return e.cause }

func newError(kind Kind, msg string, cause error) *Error {
	e := &Error{Kind: kind, Code: 500, Message: msg, cause: cause}
	for _, k := range kinds {
		if k.kind == kind {
			e.Code = k.code
		}
	}
	return e
}

// kindOfCode guesses the kind of an error reply without a Llmw-Error header
// (e.g. from another implementation of the endpoint).
func kindOfCode(code int) Kind {
	for _, k := range kinds {
		if k.code == code {
			return k.kind
		}
	}
	return ""
}
