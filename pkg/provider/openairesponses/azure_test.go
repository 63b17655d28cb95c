package openairesponses_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/openairesponses"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// azureResponses starts a server answering script and an azure-responses
// provider configured for it by the environment: api-key azure-key-2,
// api-version 2025-04-01-preview.
func azureResponses(t *testing.T, script ...providertest.Response) (*providertest.Server, llm.Provider) {
	t.Helper()
	srv := providertest.NewServer(t, script...)
	t.Setenv(openai.EnvAzureEndpoint, srv.URL())
	t.Setenv(openai.EnvAzureAPIKey, "azure-key-2")
	t.Setenv(openai.EnvAzureAPIVersion, "2025-04-01-preview")
	p, err := openairesponses.NewAzure(openai.AzureConfig{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return srv, p
}

// TestAzureResponses replays a Responses recording through Azure OpenAI:
// the deployment is the model, the api-key header authenticates, and a
// prompt Azure's filter refuses fails the stream with prompt_blocked.
func TestAzureResponses(t *testing.T) {
	body := providertest.MustLoadFixture(t, filepath.Join("openai-responses", "text_gpt-4o.sse"))
	var text string
	for _, line := range providertest.ChunkLines(body) {
		var e struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
		}
		if json.Unmarshal(line, &e) == nil && e.Type == "response.output_text.delta" {
			text += e.Delta
		}
	}
	srv, p := azureResponses(t, providertest.SSE(body))
	got := providertest.Summarize(t, providertest.MustRun(t, p, providertest.SimpleRequest("azure-responses:my-deployment")))
	if got.Text != text || got.Status != events.StatusCompleted {
		t.Errorf("%+v, want text %q", got, text)
	}
	r := srv.LastRequest()
	if r.Path != "/openai/responses" || r.Query != "api-version=2025-04-01-preview" || r.Header.Get("Api-Key") != "azure-key-2" {
		t.Errorf("request %s?%s api-key %q", r.Path, r.Query, r.Header.Get("Api-Key"))
	}
	var sent struct{ Model string }
	if json.Unmarshal(r.Body, &sent); sent.Model != "my-deployment" {
		t.Errorf("model %q", sent.Model)
	}

	raw, err := providertest.LoadFixture(filepath.Join("azure-openai", "prompt-blocked-400.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv.SetScript(providertest.Status(http.StatusBadRequest, "", string(raw)))
	got = providertest.Summarize(t, providertest.MustRun(t, p, providertest.SimpleRequest("azure-responses:my-deployment")))
	if got.Status != events.StatusFailed || len(got.Errors) != 1 || got.Errors[0].Code != "prompt_blocked" {
		t.Errorf("%+v, want failed with prompt_blocked", got)
	}
}

// provider_options under "azure-responses" reach the body of an
// azure-responses: call.
func TestAzureResponsesProviderOptionsKey(t *testing.T) {
	srv, p := azureResponses(t, providertest.SSE(providertest.MustLoadFixture(t, filepath.Join("openai-responses", "text_gpt-4o.sse"))))
	req := providertest.SimpleRequest("azure-responses:my-deployment")
	req.ProviderOptions = map[string]json.RawMessage{"azure-responses": json.RawMessage(`{"user":"from-azure"}`)}
	providertest.MustRun(t, p, req)
	var sent struct {
		User string `json:"user"`
	}
	if err := json.Unmarshal(srv.LastRequest().Body, &sent); err != nil || sent.User != "from-azure" {
		t.Errorf("user %q in the body, want from-azure", sent.User)
	}
}

// TestAzureResponsesFailed replays the recording whose stream breaks with
// an `error` event and a response.failed (insufficient_quota) through Azure
// OpenAI: the stream fails with the provider's code and message, as it does
// on OpenAI.
func TestAzureResponsesFailed(t *testing.T) {
	body := providertest.MustLoadFixture(t, filepath.Join("openai-responses", "error-insufficient-quota-response-failed_gpt-5-nano.chunks.jsonl"))
	want := expect(t, body)
	// docs/protocol.md §10 names OpenAI's insufficient_quota among the
	// stream error codes.
	if want.ErrCode != "insufficient_quota" || want.ErrMsg == "" || want.Status != events.StatusFailed {
		t.Fatalf("recording: %+v, want failed with insufficient_quota", want)
	}
	srv, p := azureResponses(t, providertest.SSE(body))
	evs := providertest.MustRun(t, p, providertest.SimpleRequest("azure-responses:my-deployment"))
	compare(t, summarize(t, evs), want)
	if r := srv.LastRequest(); r.Path != "/openai/responses" {
		t.Errorf("path %q", r.Path)
	}
}
