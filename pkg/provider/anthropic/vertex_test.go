package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
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

// A thinking step recorded from the Claude API, replayed through Vertex
// AI: its thinking goes back on the next request with the signature the
// recording carries, unchanged, before the tool call it led to.
func TestVertexThinkingRoundTrip(t *testing.T) {
	body := providertest.MustLoadFixture(t, "anthropic/thinking-then-tool-use_claude-haiku-4-5.sse")
	want := expect(t, body)
	if len(want.Signatures) != 1 || len(want.Calls) != 1 {
		t.Fatalf("the recording has %d signatures and %d calls, want 1 of each", len(want.Signatures), len(want.Calls))
	}
	srv := providertest.NewServer(t, providertest.SSE(body))
	vertexEnv(t, srv.URL())
	p := providertest.MustNew(t, anthropic.NewVertex, anthropic.VertexConfig{MaxRetries: -1})
	req := providertest.SimpleRequest("vertex-anthropic:claude-test@20250101")
	req.Thinking = &events.ThinkingConfig{BudgetTokens: 2048}
	evs := providertest.MustRun(t, p, req)
	got := providertest.Summarize(t, evs)
	if got.Thinking != want.Thinking || !reflect.DeepEqual(got.Signatures, want.Signatures) || len(got.Calls) != 1 {
		t.Fatalf("stream %+v, want thinking %q signed %q and one call", got, want.Thinking, want.Signatures)
	}
	call := got.Calls[0]
	input, err := json.Marshal(call.Input)
	if err != nil {
		t.Fatal(err)
	}
	next := *req
	next.Messages = append(slices.Clip(req.Messages),
		events.Message{Role: events.RoleAssistant, Content: []events.Part{
			events.ThinkingPart(got.Thinking, got.Signatures[0]),
			events.ToolUsePart(call.ID, call.Name, input),
		}},
		events.Message{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart(call.ID, "1.2.3", false)}})
	providertest.MustRun(t, p, &next)
	var sent struct {
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(srv.LastRequest().Body, &sent); err != nil || len(sent.Messages) != 3 {
		t.Fatalf("request %s (%v)", srv.LastRequest().Body, err)
	}
	a := sent.Messages[1]
	if a.Role != "assistant" || len(a.Content) != 2 {
		t.Fatalf("assistant message %+v", a)
	}
	if th := a.Content[0]; th["type"] != "thinking" || th["thinking"] != want.Thinking || th["signature"] != want.Signatures[0] {
		t.Errorf("thinking sent back %v, want the recording's thinking and signature", th)
	}
	if tu := a.Content[1]; tu["type"] != "tool_use" || tu["id"] != want.Calls[0].ID {
		t.Errorf("tool_use sent back %v", tu)
	}
}

// An error event in the middle of a Vertex AI stream ends it failed, the
// open block aborted, with the error's type as its code.
func TestVertexMidStreamError(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE([]byte(midStreamError)))
	vertexEnv(t, srv.URL())
	p := providertest.MustNew(t, anthropic.NewVertex, anthropic.VertexConfig{MaxRetries: -1})
	evs := providertest.MustRun(t, p, providertest.SimpleRequest("vertex-anthropic:claude-test@20250101"))
	got := providertest.Summarize(t, evs)
	if got.Status != events.StatusFailed || got.Text != "Hel" || len(got.Errors) != 1 || got.Errors[0].Code != "overloaded_error" {
		t.Errorf("mid-stream error: %+v", got)
	}
	if ab, ok := evs[len(evs)-3].(events.BlockAbort); !ok || ab.BlockType != events.BlockText {
		t.Errorf("open text block not aborted: %#v", evs[len(evs)-3])
	}
}
