package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// vertexEnv is Vertex AI's environment with a service-account file whose
// token endpoint is local, and the Vertex base URL pointing at base.
func vertexEnv(t *testing.T, base string) *providertest.TokenServer {
	t.Helper()
	file, ts := providertest.ServiceAccountFile(t, "sa-project", "ya29.claude-token")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", file)
	t.Setenv(anthropic.EnvVertexProject, "my-project")
	t.Setenv(anthropic.EnvVertexLocation, "us-east5")
	t.Setenv(anthropic.EnvVertexBaseURL, base)
	t.Setenv(anthropic.EnvAPIKey, "")
	return ts
}

// TestVertexFixtures replays every Anthropic recording through the SDK's
// vertex package: the service-account token reaches the request, which
// goes to the model's streamRawPredict path with the Vertex version in the
// body, and the stream says what the recording says.
func TestVertexFixtures(t *testing.T) {
	for _, path := range providertest.Fixtures(t, "anthropic") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			body := providertest.MustLoadFixture(t, path)
			want := expect(t, body)
			srv := providertest.NewServer(t, providertest.Response{Body: body, ChunkSize: 997})
			ts := vertexEnv(t, srv.URL())
			p, err := anthropic.NewVertex(anthropic.VertexConfig{MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			s, err := p.Stream(context.Background(), &llm.Request{Model: "vertex-anthropic:claude-test@20250101", Messages: []events.Message{events.UserText("hi")}})
			if err != nil {
				t.Fatal(err)
			}
			evs := providertest.MustCollect(t, s)
			if err := providertest.StrictWellFormed(evs); err != nil {
				t.Fatalf("not well-formed: %v", err)
			}
			r := srv.LastRequest()
			if got := r.Header.Get("Authorization"); got != "Bearer "+ts.Token {
				t.Errorf("Authorization %q, want the service account's token", got)
			}
			if w := "/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-test@20250101:streamRawPredict"; r.Path != w {
				t.Errorf("request went to %s, want %s", r.Path, w)
			}
			var sent map[string]any
			if err := json.Unmarshal(r.Body, &sent); err != nil || sent["anthropic_version"] != "vertex-2023-10-16" || sent["model"] != nil {
				t.Errorf("body %s: want anthropic_version and no model", r.Body)
			}
			got := providertest.Summarize(t, evs)
			if got.Text != want.Text || got.Thinking != want.Thinking || got.StopReason != want.StopReason || got.Status != want.Status {
				t.Errorf("text %q thinking %q stop %q status %q, want %q %q %q %q",
					got.Text, got.Thinking, got.StopReason, got.Status, want.Text, want.Thinking, want.StopReason, want.Status)
			}
			if !reflect.DeepEqual(got.Signatures, want.Signatures) || !reflect.DeepEqual(got.Calls, want.Calls) {
				t.Errorf("signatures %q calls %+v, want %q %+v", got.Signatures, got.Calls, want.Signatures, want.Calls)
			}
		})
	}
}

func TestVertexMissingConfig(t *testing.T) {
	vertexEnv(t, "http://127.0.0.1:1")
	t.Setenv(anthropic.EnvVertexLocation, "")
	_, err := anthropic.NewVertex(anthropic.VertexConfig{})
	if k, _ := llm.KindOf(err); !errors.Is(err, anthropic.ErrMissingVertexConfig) || k != llm.KindMissingAPIKey {
		t.Errorf("no location: %v", err)
	}
}
