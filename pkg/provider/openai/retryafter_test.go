package openai_test

import (
	"context"
	"testing"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

const rateLimitBody = `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`

// A 429's Retry-After (retry-after-ms, seconds, an HTTP date) is on the
// error of Chat Completions and of Azure OpenAI, after the SDK's retries.
func TestRetryAfterOfA429(t *testing.T) {
	for _, c := range providertest.RetryAfterCases(true) {
		t.Run("chat/"+c.Name, func(t *testing.T) {
			srv := providertest.NewServer(t, c.RateLimited(rateLimitBody))
			_, err := newProvider(t, srv).Stream(context.Background(), simpleRequest())
			if k, _ := llm.KindOf(err); k != llm.KindRateLimited {
				t.Fatalf("err %v, want rate_limited", err)
			}
			c.CheckRetryAfter(t, err)
		})
		t.Run("azure/"+c.Name, func(t *testing.T) {
			srv := providertest.NewServer(t, c.RateLimited(rateLimitBody))
			azureEnv(t, srv, "azure-key-1", "")
			p, err := openai.NewAzure(openai.AzureConfig{MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Stream(context.Background(), providertest.SimpleRequest("azure:my-gpt4o"))
			if k, _ := llm.KindOf(err); k != llm.KindRateLimited {
				t.Fatalf("err %v, want rate_limited", err)
			}
			c.CheckRetryAfter(t, err)
		})
	}
}
