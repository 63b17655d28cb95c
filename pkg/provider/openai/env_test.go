package openai_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
)

// Compose passes an unset variable as "" (${X:-}): an empty
// OPENAI_BASE_URL, OPENAI_ORG_ID or OPENAI_PROJECT_ID means unset, not an
// empty base URL ("unsupported protocol scheme") or an empty header.
func TestEmptyEnvironmentMeansUnset(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_ORG_ID", "")
	t.Setenv("OPENAI_PROJECT_ID", "")
	var got *http.Request
	errStop := errors.New("stopped before the network")
	p, err := openai.New(openai.Config{APIKey: "k", MaxRetries: -1, Options: []option.RequestOption{
		option.WithMiddleware(func(r *http.Request, _ option.MiddlewareNext) (*http.Response, error) {
			got = r
			return nil, errStop
		}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Stream(context.Background(), &llm.Request{RequestID: "r1", Model: "openai:gpt-4o", Messages: []events.Message{events.UserText("hi")}})
	if err == nil {
		for s.Next() {
		}
		_ = s.Close()
	}
	if got == nil {
		t.Fatalf("no request was made (err %v)", err)
	}
	if u := got.URL.String(); !strings.HasPrefix(u, openai.DefaultBaseURL) {
		t.Errorf("request to %s, want %s…", u, openai.DefaultBaseURL)
	}
	for _, h := range []string{"OpenAI-Organization", "OpenAI-Project"} {
		if v, ok := got.Header[h]; ok {
			t.Errorf("header %s: %q sent although its variable is empty", h, v)
		}
	}
}
