package gemini_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

const rateLimitBody = `{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}`

// A 429's Retry-After (seconds, an HTTP date) is on the error of the
// Gemini API and of Gemini on Vertex AI, after the adapter's retries.
func TestRetryAfterOfA429(t *testing.T) {
	for _, c := range providertest.RetryAfterCases(false) {
		t.Run("gemini/"+c.Name, func(t *testing.T) {
			srv := providertest.NewServer(t, c.RateLimited(rateLimitBody))
			_, err := newProvider(t, gemini.Config{BaseURL: srv.URL(), MaxRetries: -1}).Stream(context.Background(), simpleRequest())
			if k, _ := llm.KindOf(err); k != llm.KindRateLimited {
				t.Fatalf("err %v, want rate_limited", err)
			}
			c.CheckRetryAfter(t, err)
		})
		t.Run("vertex/"+c.Name, func(t *testing.T) {
			srv := providertest.NewServer(t, c.RateLimited(rateLimitBody))
			vertexEnv(t, srv.URL())
			p, err := gemini.NewVertex(gemini.VertexConfig{MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Stream(context.Background(), &llm.Request{Model: "vertex:gemini-test", Messages: []events.Message{events.UserText("hi")}})
			if k, _ := llm.KindOf(err); k != llm.KindRateLimited {
				t.Fatalf("err %v, want rate_limited", err)
			}
			c.CheckRetryAfter(t, err)
		})
	}
}

// The Gemini API says how long to wait in the error's details (a
// google.rpc.RetryInfo) rather than in a header: that is the error's
// Retry-After too.
func TestRetryInfoOfA429(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{Status: http.StatusTooManyRequests, Body: []byte(`{"error":{"code":429,"message":"You exceeded your current quota","status":"RESOURCE_EXHAUSTED","details":[` +
		`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`)})
	_, err := newProvider(t, gemini.Config{BaseURL: srv.URL(), MaxRetries: -1}).Stream(context.Background(), simpleRequest())
	providertest.RetryAfterCase{Name: "RetryInfo", Want: 37 * time.Second}.CheckRetryAfter(t, err)
}
