package gemini_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// vertexEnv is Vertex AI's environment with a service-account file whose
// token endpoint is local, and the Vertex base URL pointing at base.
func vertexEnv(t *testing.T, base string) *providertest.TokenServer {
	t.Helper()
	file, ts := providertest.ServiceAccountFile(t, "sa-project", "ya29.test-token")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", file)
	t.Setenv(gemini.EnvProject, "my-project")
	t.Setenv(gemini.EnvLocation, "europe-west4")
	t.Setenv(gemini.EnvVertexBaseURL, base)
	for _, k := range []string{"GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_REGION"} {
		t.Setenv(k, "")
	}
	return ts
}

// TestVertexFixtures replays every Gemini recording through the Vertex
// backend: the service-account token reaches the request, which goes to
// the project's and location's model path, and the stream says what the
// recording says.
func TestVertexFixtures(t *testing.T) {
	for _, path := range providertest.Fixtures(t, "gemini") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			body := providertest.MustLoadFixture(t, path)
			want := expect(t, body)
			srv := providertest.NewServer(t, providertest.Response{Body: body, ChunkSize: 211})
			ts := vertexEnv(t, srv.URL())
			p, err := gemini.NewVertex(gemini.VertexConfig{})
			if err != nil {
				t.Fatal(err)
			}
			s, err := p.Stream(context.Background(), &llm.Request{Model: "vertex:gemini-test", Messages: []events.Message{events.UserText("hi")}})
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
			if ts.Exchanges.Load() == 0 {
				t.Error("no token exchange with the credential file's token_uri")
			}
			if w := "/v1beta1/projects/my-project/locations/europe-west4/publishers/google/models/gemini-test:streamGenerateContent"; r.Path != w || r.Query != "alt=sse" {
				t.Errorf("request went to %s?%s, want %s?alt=sse", r.Path, r.Query, w)
			}
			got := providertest.Summarize(t, evs)
			if got.Text != want.Text || got.Thinking != want.Thinking || got.StopReason != want.StopReason || got.Status != want.Status {
				t.Errorf("text %q thinking %q stop %q status %q, want %q %q %q %q",
					got.Text, got.Thinking, got.StopReason, got.Status, want.Text, want.Thinking, want.StopReason, want.Status)
			}
			if !reflect.DeepEqual(got.AllSignatures, want.AllSignatures) {
				t.Errorf("signatures %q, want %q", got.AllSignatures, want.AllSignatures)
			}
			if len(got.Calls) != len(want.Calls) {
				t.Fatalf("calls %+v, want %+v", got.Calls, want.Calls)
			}
			for i, c := range got.Calls {
				if w := want.Calls[i]; c.Name != w.Name || !reflect.DeepEqual(c.Input, w.Input) {
					t.Errorf("call %d %+v, want %+v", i, c, w)
				}
			}
			if len(got.Errors) != len(want.Errors) {
				t.Errorf("errors %+v, want %+v", got.Errors, want.Errors)
			}
		})
	}
}

func TestVertexMissingConfig(t *testing.T) {
	vertexEnv(t, "http://127.0.0.1:1")
	t.Setenv(gemini.EnvLocation, "")
	_, err := gemini.NewVertex(gemini.VertexConfig{})
	if k, _ := llm.KindOf(err); !errors.Is(err, gemini.ErrMissingVertexConfig) || k != llm.KindMissingAPIKey {
		t.Errorf("no location: %v", err)
	}
	// The project defaults to the service account's.
	t.Setenv(gemini.EnvProject, "")
	if _, err := gemini.NewVertex(gemini.VertexConfig{Location: "us-central1"}); err != nil {
		t.Errorf("project from the credential file: %v", err)
	}
}
