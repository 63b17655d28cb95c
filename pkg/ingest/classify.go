package ingest

import (
	"context"
	"errors"
	"fmt"

	"github.com/llmworker/llmworker/pkg/llm"
)

// classifyOpenError turns a provider call that failed before its first byte
// into the error reply that says what to do about it. It reads the failure
// through llm.ClassifyError (llm.ProviderError, or an error that only knows
// its HTTP status), so ingest needs no provider SDK: adapters classify
// their SDK's errors themselves.
func classifyOpenError(r *request, err error) *Error {
	msg := fmt.Sprintf("provider %s, model %q: %v", r.provider, r.model, err)
	if errors.Is(err, ErrMissingAPIKey) {
		return newError(KindMissingAPIKey, msg, err)
	}
	kind, _, _, ok := llm.ClassifyError(err)
	if !ok && errors.Is(err, context.Canceled) {
		return newError(KindUnavailable, fmt.Sprintf("provider %s: request cancelled before the provider answered", r.provider), err)
	}
	return newError(kindOf(kind), msg, err)
}

// kindOf maps a provider failure kind to the reply kind of the same name.
func kindOf(k llm.ErrorKind) Kind {
	switch k {
	case llm.KindInvalidRequest:
		return KindInvalidRequest
	case llm.KindContextOverflow:
		return KindContextOverflow
	case llm.KindMissingAPIKey:
		return KindMissingAPIKey
	case llm.KindUnknownModel:
		return KindUnknownModel
	case llm.KindAuth:
		return KindProviderAuth
	case llm.KindPayloadTooLarge:
		return KindPayloadTooLarge
	case llm.KindRateLimited:
		return KindRateLimited
	case llm.KindUnsupportedContent:
		return KindUnsupported
	}
	return KindUnavailable
}
