package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"
)

// HTTPStatuser is implemented by provider errors that know the HTTP status
// the provider answered with; adapters outside this module can implement it
// to have their refusals classified.
type HTTPStatuser interface {
	HTTPStatus() int
}

// httpStatus finds the HTTP status in a provider error: the official SDKs'
// error types, or anything implementing HTTPStatuser. 0 means none.
func httpStatus(err error) int {
	var hs HTTPStatuser
	if errors.As(err, &hs) {
		return hs.HTTPStatus()
	}
	var oe *openai.Error
	if errors.As(err, &oe) {
		return oe.StatusCode
	}
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return ae.StatusCode
	}
	var ge genai.APIError
	if errors.As(err, &ge) {
		return ge.Code
	}
	var gp *genai.APIError
	if errors.As(err, &gp) {
		return gp.Code
	}
	return 0
}

// classifyOpenError turns a provider call that failed before its first byte
// into the error reply that says what to do about it.
func classifyOpenError(r *request, err error) *Error {
	msg := fmt.Sprintf("provider %s, model %q: %v", r.provider, r.model, err)
	switch st := httpStatus(err); {
	case errors.Is(err, ErrMissingAPIKey):
		return newError(KindMissingAPIKey, msg, err)
	case st == http.StatusNotFound:
		return newError(KindUnknownModel, msg, err)
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		return newError(KindProviderAuth, msg, err)
	case st == http.StatusBadRequest || st == http.StatusUnprocessableEntity:
		return newError(KindInvalidRequest, msg, err)
	case st == http.StatusRequestEntityTooLarge:
		return newError(KindPayloadTooLarge, msg, err)
	case st == http.StatusTooManyRequests:
		return newError(KindRateLimited, msg, err)
	case errors.Is(err, context.Canceled):
		return newError(KindUnavailable, fmt.Sprintf("provider %s: request cancelled before the provider answered", r.provider), err)
	}
	return newError(KindUnavailable, msg, err)
}
