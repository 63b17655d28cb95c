package bedrock_test

import (
	"context"
	"testing"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// Bedrock's ThrottlingException carries no Retry-After, so its error asks
// for no particular wait (pkg/quota's default cooldown applies); one that
// a proxy in front of Bedrock adds is read.
func TestRetryAfterOfAThrottlingException(t *testing.T) {
	for _, c := range providertest.RetryAfterCases(false) {
		t.Run(c.Name, func(t *testing.T) {
			resp := c.RateLimited(`{"message":"Too many requests, please wait before trying again."}`)
			resp.Header.Set("X-Amzn-ErrorType", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/")
			srv := providertest.NewServer(t, resp)
			_, err := newProvider(t, srv).Stream(context.Background(), providertest.SimpleRequest("bedrock:"+testModel))
			if k, _ := llm.KindOf(err); k != llm.KindRateLimited {
				t.Fatalf("err %v, want rate_limited", err)
			}
			c.CheckRetryAfter(t, err)
		})
	}
}
