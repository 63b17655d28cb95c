package provider_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/openairesponses"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// Every adapter reports a refused request as an llm.ProviderError, so that
// ingest classifies it without knowing the SDK: the kind follows the HTTP
// status the provider answered with (the table of llm.ErrorKind), and a
// rate limit or outage is retryable while a refusal is not.
func TestAdaptersClassifyHTTPFailures(t *testing.T) {
	adapters := map[string]func(base string) (llm.Provider, error){
		"openai": func(base string) (llm.Provider, error) {
			return openai.New(openai.Config{APIKey: "k", BaseURL: base + "/v1", MaxRetries: -1})
		},
		"openai-responses": func(base string) (llm.Provider, error) {
			return openairesponses.New(openai.Config{APIKey: "k", BaseURL: base + "/v1", MaxRetries: -1})
		},
		"anthropic": func(base string) (llm.Provider, error) {
			return anthropic.New(anthropic.Config{APIKey: "k", BaseURL: base, MaxRetries: -1})
		},
		"gemini": func(base string) (llm.Provider, error) {
			return gemini.New(gemini.Config{APIKey: "k", BaseURL: base, MaxRetries: -1})
		},
	}
	cases := []struct {
		status    int
		kind      llm.ErrorKind
		retryable bool
	}{
		{http.StatusBadRequest, llm.KindInvalidRequest, false},
		{http.StatusUnauthorized, llm.KindAuth, false},
		{http.StatusForbidden, llm.KindAuth, false},
		{http.StatusNotFound, llm.KindUnknownModel, false},
		{http.StatusRequestEntityTooLarge, llm.KindPayloadTooLarge, false},
		{http.StatusTooManyRequests, llm.KindRateLimited, true},
		{http.StatusInternalServerError, llm.KindUnavailable, true},
		{http.StatusServiceUnavailable, llm.KindUnavailable, true},
	}
	for name, newProvider := range adapters {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%d", name, c.status), func(t *testing.T) {
				srv := providertest.NewServer(t, providertest.Status(c.status, "", `{"error":{"message":"refused by the test","type":"test_error","code":"test"}}`))
				p, err := newProvider(srv.URL())
				if err != nil {
					t.Fatal(err)
				}
				s, err := p.Stream(t.Context(), &llm.Request{Model: "m", Messages: []events.Message{events.UserText("hi")}})
				if err == nil {
					_ = s.Close()
					t.Fatalf("HTTP %d: Stream succeeded", c.status)
				}
				var pe llm.ProviderError
				if !errors.As(err, &pe) {
					t.Fatalf("HTTP %d: %T %v is no llm.ProviderError", c.status, err, err)
				}
				kind, status, retryable, ok := llm.ClassifyError(err)
				if !ok || kind != c.kind || status != c.status || retryable != c.retryable {
					t.Errorf("HTTP %d: ClassifyError = %s %d retryable=%v ok=%v, want %s %d retryable=%v",
						c.status, kind, status, retryable, ok, c.kind, c.status, c.retryable)
				}
			})
		}
	}
}

// A missing key is a ProviderError of kind missing_api_key at New, and
// still matches the adapter's own sentinel.
func TestAdaptersMissingKey(t *testing.T) {
	for _, k := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"} {
		t.Setenv(k, "")
	}
	checks := map[string]struct {
		err      error
		sentinel error
	}{}
	_, err := openai.New(openai.Config{})
	checks["openai"] = struct{ err, sentinel error }{err, openai.ErrMissingAPIKey}
	_, err = openairesponses.New(openai.Config{})
	checks["openai-responses"] = struct{ err, sentinel error }{err, openairesponses.ErrMissingAPIKey}
	_, err = anthropic.New(anthropic.Config{})
	checks["anthropic"] = struct{ err, sentinel error }{err, anthropic.ErrMissingAPIKey}
	_, err = gemini.New(gemini.Config{})
	checks["gemini"] = struct{ err, sentinel error }{err, gemini.ErrMissingAPIKey}
	for name, c := range checks {
		kind, _, _, ok := llm.ClassifyError(c.err)
		if !ok || kind != llm.KindMissingAPIKey || !errors.Is(c.err, c.sentinel) {
			t.Errorf("%s: %v classified %s (ok=%v), sentinel matched %v", name, c.err, kind, ok, errors.Is(c.err, c.sentinel))
		}
	}
}
