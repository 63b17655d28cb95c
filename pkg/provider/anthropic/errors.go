package anthropic

import "errors"

var (
	// ErrMissingAPIKey is returned by New when neither Config.APIKey nor
	// ANTHROPIC_API_KEY is set.
	ErrMissingAPIKey = errors.New("anthropic: missing API key (set Config.APIKey or ANTHROPIC_API_KEY)")

	// ErrInvalidRequest is returned by Provider.Stream, before any I/O,
	// when the completion request cannot be mapped to the Messages API (a
	// tool_use input or tool schema that is not JSON, a media part with
	// only a ref, a response_format named like a tool, provider_options
	// with an empty key, a nil request), in an *llm.APIError of kind
	// llm.KindInvalidRequest whose message names the field.
	ErrInvalidRequest = errors.New("anthropic: invalid request")

	// ErrRequestFailed is returned by Provider.Stream when the API rejected
	// the request or could not be reached before the stream began, after
	// the bounded retries of Config.MaxRetries. The SDK error
	// (*anthropic.Error with the HTTP status, or a transport error) is
	// wrapped too and can be inspected with errors.As.
	ErrRequestFailed = errors.New("anthropic: request failed")
)
