package openai

import "errors"

var (
	// ErrMissingAPIKey is returned by New when neither Config.APIKey nor
	// $OPENAI_API_KEY is set. OpenAI-compatible servers that ignore the key
	// still need a non-empty one.
	ErrMissingAPIKey = errors.New("openai: missing API key (set Config.APIKey or OPENAI_API_KEY)")

	// ErrInvalidRequest is returned by Stream when the completion request
	// cannot be mapped to the API (no model, a tool schema or tool input that
	// is not JSON, an unknown role, a media part holding only an unresolved
	// LLMW_MEDIA ref), wrapped in an *llm.APIError of kind invalid_request.
	ErrInvalidRequest = errors.New("openai: invalid request")

	// ErrRequestFailed is returned by Stream when the API answered the
	// request with an error status (after the retries for 408, 409, 429 and
	// 5xx were used up) or could not be reached. The error text names the
	// HTTP status and the API's message; errors.As with *openai.Error of
	// the SDK gives the details.
	ErrRequestFailed = errors.New("openai: request failed")
)
