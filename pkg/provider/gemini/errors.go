package gemini

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/llmworker/llmworker/pkg/llm"
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
// retryDelay is the wait a google.rpc.RetryInfo among the error's details
// asks for ("retryDelay": "37s", a protobuf Duration in JSON), which is
// how the Gemini API says how long to wait after a 429; 0 when none.
func retryDelay(err error) time.Duration {
	var details []map[string]any
	var v genai.APIError
	var p *genai.APIError
	switch {
	case errors.As(err, &v):
		details = v.Details
	case errors.As(err, &p):
		details = p.Details
	}
	for _, d := range details {
		if t, _ := d["@type"].(string); !strings.HasSuffix(t, "google.rpc.RetryInfo") {
			continue
		}
		s, _ := d["retryDelay"].(string)
		if n, err := strconv.ParseFloat(strings.TrimSuffix(s, "s"), 64); err == nil && strings.HasSuffix(s, "s") && n > 0 && n < float64(maxRetryDelay/time.Second) {
			return time.Duration(n * float64(time.Second))
		}
	}
	return 0
}

// maxRetryDelay bounds a retryDelay that is read (a day).
const maxRetryDelay = 24 * time.Hour

// apiError is the status ("INVALID_ARGUMENT") and message of a
// genai.APIError in err's chain.
func apiError(err error) (status, message string) {
	var v genai.APIError
	if errors.As(err, &v) {
		return v.Status, v.Message
	}
	var p *genai.APIError
	if errors.As(err, &p) {
		return p.Status, p.Message
	}
	return "", err.Error()
}

// overflowCode is code, or context_overflow when the error says the
// input did not fit the model's window ("The input token count (N)
// exceeds the maximum number of tokens allowed (M).", 400
// INVALID_ARGUMENT).
func overflowCode(code, message string) string {
	if llm.IsContextOverflow(code, message) {
		return llm.CodeContextOverflow
	}
	return code
}

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
