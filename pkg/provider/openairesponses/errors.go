package openairesponses

import "github.com/llmworker/llmworker/pkg/provider/openai"

// The sentinels are those of pkg/provider/openai, shared by both OpenAI
// adapters so that callers test one set.
var (
	// ErrMissingAPIKey is returned by New when neither Config.APIKey nor
	// $OPENAI_API_KEY is set.
	ErrMissingAPIKey = openai.ErrMissingAPIKey
	// ErrInvalidRequest is returned by Stream when the request cannot be
	// mapped (no model, a tool schema or tool input that is not JSON, an
	// unknown role, a media part holding only an unresolved LLMW_MEDIA
	// ref), wrapped in an *llm.APIError of kind invalid_request.
	ErrInvalidRequest = openai.ErrInvalidRequest
	// ErrRequestFailed is returned by Stream when the API answered with an
	// error status after the retries, or could not be reached.
	ErrRequestFailed = openai.ErrRequestFailed
)
