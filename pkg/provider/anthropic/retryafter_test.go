package anthropic_test

import (
	"context"
	"testing"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

const rateLimitBody = `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`

// A 429's Retry-After (seconds, an HTTP date) is on the error of the
// Messages API and of Claude on Vertex AI, after the SDK's retries.
func TestRetryAfterOfA429(t *testing.T) {
	for _, c := range providertest.RetryAfterCases(false) {
		t.Run("messages/"+c.Name, func(t *testing.T) {
			srv := providertest.NewServer(t, c.RateLimited(rateLimitBody))
			_, err := newProvider(t, anthropic.Config{BaseURL: srv.URL(), MaxRetries: -1}).Stream(context.Background(), simpleRequest())
			if k, _ := llm.KindOf(err); k != llm.KindRateLimited {
				t.Fatalf("err %v, want rate_limited", err)
			}
			c.CheckRetryAfter(t, err)
		})
		t.Run("vertex/"+c.Name, func(t *testing.T) {
			srv := providertest.NewServer(t, c.RateLimited(rateLimitBody))
			vertexEnv(t, srv.URL())
			p, err := anthropic.NewVertex(anthropic.VertexConfig{MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Stream(context.Background(), providertest.SimpleRequest("vertex-anthropic:claude-test@20250101"))
			if k, _ := llm.KindOf(err); k != llm.KindRateLimited {
				t.Fatalf("err %v, want rate_limited", err)
			}
			c.CheckRetryAfter(t, err)
		})
	}
}
