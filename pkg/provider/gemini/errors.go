package gemini

import (
	"errors"

	"google.golang.org/genai"
)

var (
	// ErrMissingAPIKey is returned by New when neither Config.APIKey nor
	// GOOGLE_API_KEY / GEMINI_API_KEY is set.
	ErrMissingAPIKey = errors.New("gemini: missing API key (set Config.APIKey, GOOGLE_API_KEY or GEMINI_API_KEY)")

	// ErrInvalidRequest is returned by Provider.Stream, before any I/O,
	// when the completion request cannot be mapped to generateContent (a
	// tool_use input that is not a JSON object, a tool_result whose call is
	// not in the transcript, a tool schema that is not JSON, a media part
	// with only a ref, provider_options with an empty key, a nil request),
	// in an *llm.APIError of kind llm.KindInvalidRequest whose message
	// names the field.
	ErrInvalidRequest = errors.New("gemini: invalid request")

	// ErrRequestFailed is returned by Provider.Stream when the API rejected
	// the request or could not be reached before the stream began, after
	// the bounded retries of Config.MaxRetries. The SDK error
	// (genai.APIError with the HTTP status, or a transport error) is
	// wrapped too.
	ErrRequestFailed = errors.New("gemini: request failed")
)

// apiStatus is the HTTP status of a genai.APIError in err's chain (the SDK
// returns it by value or by pointer), 0 when there is none.
func apiStatus(err error) int {
	var v genai.APIError
	if errors.As(err, &v) {
		return v.Code
	}
	var p *genai.APIError
	if errors.As(err, &p) {
		return p.Code
	}
	return 0
}
