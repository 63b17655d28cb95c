package llm

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrorKind classifies why a provider call failed, in terms a caller can
// act on. The kinds are the ones ingest reports on the wire (the Llmw-Error
// header of its error replies, docs/protocol.md "Model calls").
type ErrorKind string

// The kinds, with the HTTP statuses an adapter maps to them.
const (
	// KindInvalidRequest: the provider refused the request as malformed
	// (400, 422) or the adapter could not map it.
	KindInvalidRequest ErrorKind = "invalid_request"
	// KindMissingAPIKey: no credentials are configured for the provider.
	KindMissingAPIKey ErrorKind = "missing_api_key"
	// KindUnknownModel: the provider does not serve the model (404).
	KindUnknownModel ErrorKind = "unknown_model"
	// KindAuth: the provider rejected the credentials (401, 403).
	KindAuth ErrorKind = "provider_auth"
	// KindPayloadTooLarge: the request is too large for the provider (413).
	KindPayloadTooLarge ErrorKind = "payload_too_large"
	// KindRateLimited: the provider still answered 429 after the adapter's
	// retries.
	KindRateLimited ErrorKind = "rate_limited"
	// KindUnavailable: anything else, typically 5xx or a transport failure.
	KindUnavailable ErrorKind = "provider_unavailable"
	// KindContextOverflow: the request's context (its messages, tools and
	// the output it asks room for) does not fit the model's context
	// window. Each provider says so in its own words under 400 or 413;
	// an adapter recognises them and reports this kind, which is not
	// retryable as it is: the caller must shorten the context first.
	KindContextOverflow ErrorKind = "context_overflow"
	// KindUnsupportedContent: the request holds a content part (an image,
	// a file of some media type) that the provider cannot take at all;
	// refused by the adapter before the call (UnsupportedContent).
	KindUnsupportedContent ErrorKind = "unsupported_content"
)

// UnsupportedContent returns the error of an adapter that cannot send a
// content part: field is the part's path in the request (e.g.
// "messages[2].content[1]"), provider the adapter's prefix, and what the
// part ("image/webp image", "audio/wav file"). It is refused before any
// I/O and is not retryable.
func UnsupportedContent(provider, field, what string) *APIError {
	return &APIError{ErrKind: KindUnsupportedContent, Err: fmt.Errorf("%s: %s: %s cannot be sent to this provider", provider, field, what)}
}

// ProviderError is implemented by the errors a Provider returns from
// Stream (and an adapter from its constructor) when the provider refused
// or could not be reached: it says what kind of failure it was, the HTTP
// status the provider answered with (0 when there was none) and whether
// the same request may succeed later. Callers classify with
// ClassifyError, so that no caller needs to know an SDK's error types.
type ProviderError interface {
	error
	Kind() ErrorKind
	HTTPStatus() int
	Retryable() bool
}

// HTTPStatuser is implemented by errors that know the provider's HTTP
// status but not the rest of ProviderError; ClassifyError derives the kind
// from the status. Adapters outside this module may implement either.
type HTTPStatuser interface {
	HTTPStatus() int
}

// APIError is the ProviderError of the built-in adapters: it wraps the
// adapter's error (which wraps the SDK's, so errors.As to the SDK type
// still works) and keeps its text.
type APIError struct {
	// Status is the provider's HTTP status, 0 when none was received.
	Status int
	// ErrKind is the kind; "" derives it from Status (KindForStatus).
	ErrKind ErrorKind
	// Err is the adapter's error.
	Err error
	// Wait is how long the provider asked the caller to wait before the
	// next call (its Retry-After, ParseRetryAfter); 0 when it said
	// nothing.
	Wait time.Duration
}

var _ ProviderError = (*APIError)(nil)

// NewAPIError returns an *APIError for err with the provider's HTTP
// status (0 when unknown), its kind derived from the status.
func NewAPIError(status int, err error) *APIError {
	return &APIError{Status: status, Err: err}
}

func (e *APIError) Error() string { return e.Err.Error() }

// Unwrap returns the adapter's error.
func (e *APIError) Unwrap() error { return e.Err }

// Kind returns ErrKind, or the kind of the status.
func (e *APIError) Kind() ErrorKind {
	if e.ErrKind != "" {
		return e.ErrKind
	}
	return KindForStatus(e.Status)
}

// HTTPStatus returns Status.
func (e *APIError) HTTPStatus() int { return e.Status }

// RetryAfter returns Wait: the provider's Retry-After, 0 when it sent
// none. Ingest's shared limits (pkg/quota) cool a limit down for that
// long on every replica after a 429.
func (e *APIError) RetryAfter() time.Duration { return e.Wait }

// ParseRetryAfter reads how long a provider's answer asks the caller to
// wait: the retry-after-ms header (milliseconds, as OpenAI and Azure
// OpenAI send it), else retry-after in seconds or as an HTTP date
// (RFC 9110 §10.2.3), counted from now. It returns 0 when h has neither,
// when neither parses, and for a date already passed.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < math.MaxInt64/float64(time.Millisecond) {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < math.MaxInt64/float64(time.Second) {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Retryable reports whether the kind is one that may pass: a rate limit
// or an unavailable provider.
func (e *APIError) Retryable() bool {
	k := e.Kind()
	return k == KindRateLimited || k == KindUnavailable
}

// KindForStatus maps a provider's HTTP status to a kind.
func KindForStatus(status int) ErrorKind {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return KindInvalidRequest
	case http.StatusUnauthorized, http.StatusForbidden:
		return KindAuth
	case http.StatusNotFound:
		return KindUnknownModel
	case http.StatusRequestEntityTooLarge:
		return KindPayloadTooLarge
	case http.StatusTooManyRequests:
		return KindRateLimited
	}
	return KindUnavailable
}

// ClassifyError returns what err says about a failed provider call: the
// kind, HTTP status and retryability of the first ProviderError in its
// chain; for an error that only implements HTTPStatuser, the kind of its
// status; otherwise KindUnavailable, status 0, retryable. ok is false in
// that last case, so a caller can tell a classified failure from an
// unknown one.
func ClassifyError(err error) (kind ErrorKind, status int, retryable bool, ok bool) {
	var pe ProviderError
	if errors.As(err, &pe) {
		return pe.Kind(), pe.HTTPStatus(), pe.Retryable(), true
	}
	var hs HTTPStatuser
	if errors.As(err, &hs) {
		st := hs.HTTPStatus()
		k := KindForStatus(st)
		return k, st, k == KindRateLimited || k == KindUnavailable, true
	}
	return KindUnavailable, 0, true, false
}

// KindNamer is implemented by errors that name their kind as a string
// field can, such as the ingest client's error replies (whose kinds
// include ones no adapter reports: unknown_provider, shutting_down).
type KindNamer interface {
	error
	ErrorKind() ErrorKind
}

// KindOf returns the kind a failed call's error names: a KindNamer's, a
// ProviderError's or an HTTPStatuser's (as ClassifyError). ok is false
// for an error that names none.
func KindOf(err error) (ErrorKind, bool) {
	var kn KindNamer
	if errors.As(err, &kn) {
		return kn.ErrorKind(), true
	}
	k, _, _, ok := ClassifyError(err)
	return k, ok
}
