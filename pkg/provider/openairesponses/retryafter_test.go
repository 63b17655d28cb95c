package openairesponses_test

import (
	"context"
	"testing"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// A 429's Retry-After (retry-after-ms, seconds, an HTTP date) is on the
// error of the Responses API, after the SDK's retries.
func TestRetryAfterOfA429(t *testing.T) {
	for _, c := range providertest.RetryAfterCases(true) {
		t.Run(c.Name, func(t *testing.T) {
			srv := providertest.NewServer(t, c.RateLimited(`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`))
			_, err := newProvider(t, srv).Stream(context.Background(), simpleRequest())
			if k, _ := llm.KindOf(err); k != llm.KindRateLimited {
				t.Fatalf("err %v, want rate_limited", err)
			}
			c.CheckRetryAfter(t, err)
		})
	}
}
