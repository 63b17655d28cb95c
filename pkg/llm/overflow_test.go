package llm_test

import (
	"testing"

	"github.com/llmworker/llmworker/pkg/llm"
)

func TestIsContextOverflow(t *testing.T) {
	for _, tc := range []struct {
		code, msg string
		want      bool
	}{
		{"context_length_exceeded", "", true},
		{"invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum", true},
		{"INVALID_ARGUMENT", "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).", true},
		{"", "Input is too long for requested model.", true},
		{"", "input length and `max_tokens` exceed context limit: 189136 + 20000 > 204648, decrease input length or `max_tokens` and try again", true},
		{"", "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 297006 tokens.", true},
		// Not an overflow: a bad field, a rate limit on input tokens, a
		// token count that is fine, max_tokens above the model's output.
		{"invalid_request_error", "max_tokens: Field required", false},
		{"rate_limit_error", "This request would exceed the rate limit for your organization of 30,000 input tokens per minute", false},
		{"INVALID_ARGUMENT", "The input token count is 12", false},
		{"invalid_request_error", "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5", false},
		{"", "", false},
	} {
		if got := llm.IsContextOverflow(tc.code, tc.msg); got != tc.want {
			t.Errorf("%q %q: %v, want %v", tc.code, tc.msg, got, tc.want)
		}
	}
}
