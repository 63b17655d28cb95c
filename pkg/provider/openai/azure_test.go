package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

const azureVersion = "2024-10-21"

// azureEnv is Azure OpenAI's environment, pointing at srv with an API key
// (or, with key "", a bearer token).
func azureEnv(t *testing.T, srv *providertest.Server, key, token string) {
	t.Helper()
	t.Setenv(openai.EnvAzureEndpoint, srv.URL())
	t.Setenv(openai.EnvAzureAPIKey, key)
	t.Setenv(openai.EnvAzureToken, token)
	t.Setenv(openai.EnvAzureAPIVersion, azureVersion)
	t.Setenv("OPENAI_API_KEY", "")
}

// azureFixture reads a recording and what its SSE data says: the text
// deltas, the finish reason, the usage.
func azureFixture(t *testing.T, name string) (body []byte, text, finish string, usage map[string]any) {
	t.Helper()
	body = providertest.MustLoadFixture(t, filepath.Join("azure-openai", name))
	for _, line := range providertest.ChunkLines(body) {
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			text += ch.Delta.Content
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			usage = c.Usage
		}
	}
	return body, text, finish, usage
}

func TestAzureChat(t *testing.T) {
	body, text, finish, usage := azureFixture(t, "text-prompt-filter-results-usage_gpt-4o.sse")
	if finish != "stop" {
		t.Fatalf("recording finishes %q", finish)
	}
	srv := providertest.NewServer(t, providertest.SSE(body))
	azureEnv(t, srv, "azure-key-1", "")
	p, err := openai.NewAzure(openai.AzureConfig{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	evs := providertest.MustRun(t, p, providertest.SimpleRequest("azure:my-gpt4o"))
	got := providertest.Summarize(t, evs)
	if got.Text != text || got.StopReason != events.StopEndTurn || got.Status != events.StatusCompleted || len(got.Errors) != 0 {
		t.Errorf("%+v, want text %q ending end_turn", got, text)
	}
	if got.Usage == nil || float64(*got.Usage.InputTokens) != usage["prompt_tokens"] || float64(*got.Usage.OutputTokens) != usage["completion_tokens"] {
		t.Errorf("usage %s, want %v", providertest.UsageJSON(got.Usage), usage)
	}
	r := srv.LastRequest()
	if r.Path != "/openai/deployments/my-gpt4o/chat/completions" || r.Query != "api-version="+azureVersion {
		t.Errorf("request to %s?%s", r.Path, r.Query)
	}
	if r.Header.Get("Api-Key") != "azure-key-1" || r.Header.Get("Authorization") != "" {
		t.Errorf("api-key %q authorization %q", r.Header.Get("Api-Key"), r.Header.Get("Authorization"))
	}
	var sent struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(r.Body, &sent); err != nil || sent.Model != "my-gpt4o" {
		t.Errorf("model %q in %s", sent.Model, r.Body)
	}
}

func TestAzureContentFilter(t *testing.T) {
	body, text, finish, _ := azureFixture(t, "content-filter-finish_gpt-4o.sse")
	if finish != "content_filter" {
		t.Fatalf("recording finishes %q", finish)
	}
	srv := providertest.NewServer(t, providertest.SSE(body))
	azureEnv(t, srv, "k", "")
	p, err := openai.NewAzure(openai.AzureConfig{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	got := providertest.Summarize(t, providertest.MustRun(t, p, providertest.SimpleRequest("azure:my-gpt4o")))
	if got.Text != text || got.StopReason != events.StopContentFilter || len(got.Errors) != 1 || got.Errors[0].Code != "content_filter" {
		t.Errorf("%+v, want the text, stop content_filter and error content_filter", got)
	}
}

// TestAzurePromptBlocked: Azure refuses a filtered prompt with 400 and
// error code content_filter; the turn sees prompt_blocked, naming the
// filtered category.
func TestAzurePromptBlocked(t *testing.T) {
	raw, err := providertest.LoadFixture(filepath.Join("azure-openai", "prompt-blocked-400.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Error struct {
			InnerError struct {
				Result map[string]struct{ Filtered bool } `json:"content_filter_result"`
			} `json:"innererror"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	srv := providertest.NewServer(t, providertest.Status(http.StatusBadRequest, "", string(raw)))
	azureEnv(t, srv, "k", "")
	for _, tc := range []struct {
		name string
		new  func(openai.AzureConfig) (llm.Provider, error)
	}{{"chat", openai.NewAzure}} {
		p, err := tc.new(openai.AzureConfig{MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		got := providertest.Summarize(t, providertest.MustRun(t, p, providertest.SimpleRequest("azure:my-gpt4o")))
		if got.Status != events.StatusFailed || len(got.Errors) != 1 || got.Errors[0].Code != "prompt_blocked" {
			t.Fatalf("%s: %+v, want failed with prompt_blocked", tc.name, got)
		}
		for cat, r := range want.Error.InnerError.Result {
			if r.Filtered && !strings.Contains(got.Errors[0].Message, cat) {
				t.Errorf("%s: message %q does not name %s", tc.name, got.Errors[0].Message, cat)
			}
		}
	}
	// Another 400 stays an invalid request.
	srv.SetScript(providertest.Status(http.StatusBadRequest, "", `{"error":{"code":"invalid_value","message":"bad"}}`))
	p, _ := openai.NewAzure(openai.AzureConfig{MaxRetries: -1})
	if _, err := p.Stream(context.Background(), providertest.SimpleRequest("azure:my-gpt4o")); err == nil {
		t.Error("a 400 without content_filter gave a stream")
	} else if k, _ := llm.KindOf(err); k != llm.KindInvalidRequest {
		t.Errorf("kind %s", k)
	}
}

func TestAzureBearerTokenAndMissing(t *testing.T) {
	body, _, _, _ := azureFixture(t, "text-prompt-filter-results-usage_gpt-4o.sse")
	srv := providertest.NewServer(t, providertest.SSE(body))
	azureEnv(t, srv, "", "entra-token-1")
	p, err := openai.NewAzure(openai.AzureConfig{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	providertest.MustRun(t, p, providertest.SimpleRequest("azure:d1"))
	if r := srv.LastRequest(); r.Header.Get("Authorization") != "Bearer entra-token-1" || r.Header.Get("Api-Key") != "" {
		t.Errorf("authorization %q api-key %q", r.Header.Get("Authorization"), r.Header.Get("Api-Key"))
	}
	t.Setenv(openai.EnvAzureToken, "")
	if _, err := openai.NewAzure(openai.AzureConfig{}); !errors.Is(err, openai.ErrMissingAzureConfig) {
		t.Errorf("no credentials: %v", err)
	}
	t.Setenv(openai.EnvAzureEndpoint, "")
	if _, err := openai.NewAzure(openai.AzureConfig{APIKey: "k"}); !errors.Is(err, openai.ErrMissingAzureConfig) {
		t.Errorf("no endpoint: %v", err)
	} else if k, _ := llm.KindOf(err); k != llm.KindMissingAPIKey {
		t.Errorf("kind %s", k)
	}
}

// provider_options under "azure" reach the body of an azure: call, as
// "openai" does, and win over "openai" when both are given.
func TestAzureProviderOptionsKey(t *testing.T) {
	body, _, _, _ := azureFixture(t, "text-prompt-filter-results-usage_gpt-4o.sse")
	srv := providertest.NewServer(t, providertest.SSE(body))
	azureEnv(t, srv, "azure-key-1", "")
	p, err := openai.NewAzure(openai.AzureConfig{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts map[string]json.RawMessage
		want string
	}{
		{map[string]json.RawMessage{"azure": json.RawMessage(`{"user":"from-azure"}`)}, "from-azure"},
		{map[string]json.RawMessage{"openai": json.RawMessage(`{"user":"from-openai"}`)}, "from-openai"},
		{map[string]json.RawMessage{"openai": json.RawMessage(`{"user":"from-openai"}`), "azure": json.RawMessage(`{"user":"from-azure"}`)}, "from-azure"},
	} {
		req := providertest.SimpleRequest("azure:my-gpt4o")
		req.ProviderOptions = c.opts
		providertest.MustRun(t, p, req)
		var sent struct {
			User string `json:"user"`
		}
		if err := json.Unmarshal(srv.LastRequest().Body, &sent); err != nil || sent.User != c.want {
			t.Errorf("provider_options %s: user %q in the body, want %q", c.opts, sent.User, c.want)
		}
	}
}

// TestAzureMidStreamError replays a recorded stream that breaks with an
// `event: error` after its reasoning deltas through Azure OpenAI. No Azure
// recording of a mid-stream error exists (internal/leaf/fixtures/MANIFEST.md,
// "Hard cases NOT found"), so it is the OpenAI-compatible Groq recording
// of internal/leaf/fixtures/openai-chat: the open thinking block is aborted, the
// error keeps the provider's code and message, and the stream fails.
func TestAzureMidStreamError(t *testing.T) {
	body := providertest.MustLoadFixture(t, filepath.Join("openai-chat", "compat-groq-midstream-error-event_gpt-oss-120b.sse"))
	want := expectChat(t, body)
	// docs/protocol.md §10 names Groq's tool_use_failed among the stream
	// error codes.
	if want.ErrCode != "tool_use_failed" || want.ErrMsg == "" || want.Thinking == "" || want.Status != events.StatusFailed {
		t.Fatalf("recording: %+v, want reasoning then error tool_use_failed", want)
	}
	srv := providertest.NewServer(t, providertest.SSE(body))
	azureEnv(t, srv, "azure-key-1", "")
	p, err := openai.NewAzure(openai.AzureConfig{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	evs := providertest.MustRun(t, p, providertest.SimpleRequest("azure:my-gpt-oss"))
	compare(t, summarize(t, evs), want)
	var aborted int
	for _, ev := range evs {
		if a, ok := ev.(events.BlockAbort); ok {
			aborted++
			if a.BlockType != events.BlockThinking {
				t.Errorf("aborted a %s block", a.BlockType)
			}
		}
	}
	if aborted != 1 {
		t.Errorf("%d blocks aborted, want the thinking block", aborted)
	}
	if r := srv.LastRequest(); r.Path != "/openai/deployments/my-gpt-oss/chat/completions" {
		t.Errorf("path %q", r.Path)
	}
}
