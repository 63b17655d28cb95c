package provider_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/llmworker/llmworker/internal/leaf/fixtures"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider"

	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/bedrock"
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

func TestBuiltinFactories(t *testing.T) {
	for _, k := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AZURE_OPENAI_ENDPOINT"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "none.json"))
	fs := provider.Default()
	want := []string{"anthropic", "azure", "azure-responses", "bedrock", "gemini", "openai", "openai-responses", "vertex", "vertex-anthropic"} // docs/protocol.md, "Model calls"
	if got := slices.Sorted(maps.Keys(fs)); !reflect.DeepEqual(got, want) {
		t.Fatalf("providers %v, want %v", got, want)
	}
	vars := map[string]string{"openai": "OPENAI_API_KEY", "openai-responses": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY", "bedrock": "AWS_REGION",
		"vertex": "GOOGLE_CLOUD_PROJECT", "vertex-anthropic": "GOOGLE_CLOUD_PROJECT",
		"azure": "AZURE_OPENAI_ENDPOINT", "azure-responses": "AZURE_OPENAI_ENDPOINT"}
	for name, f := range fs {
		_, err := f("some-model")
		if !errors.Is(err, ingest.ErrMissingAPIKey) {
			t.Errorf("%s without a key: %v", name, err)
			continue
		}
		// Said once, with the variable to set, not the library's wording.
		msg := err.Error()
		if strings.Count(msg, "missing API key") != 1 || !strings.Contains(msg, vars[name]) || strings.Contains(msg, "Config.APIKey") {
			t.Errorf("%s without a key: %q, want one sentence naming %s", name, msg, vars[name])
		}
	}

	// With keys each factory builds its provider once.
	file, _ := providertest.ServiceAccountFile(t, "p", "token")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", file)
	t.Setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
	fs = provider.Builtin(provider.Config{
		OpenAI:    openai.Config{APIKey: "k"},
		Anthropic: anthropic.Config{APIKey: "k"},
		Gemini:    gemini.Config{APIKey: "k"},
		Bedrock:   bedrock.Config{Region: "us-east-1"},
		Azure:     openai.AzureConfig{Endpoint: "https://r.openai.azure.com", APIKey: "k"},
	})
	for name, f := range fs {
		p1, err := f("a")
		if err != nil || p1 == nil {
			t.Fatalf("%s: %v, %v", name, p1, err)
		}
		p2, err := f("b")
		if err != nil || p2 != p1 {
			t.Errorf("%s: not cached (%v)", name, err)
		}
	}

	// The key from the environment is enough.
	t.Setenv("OPENAI_API_KEY", "from-env")
	if p, err := provider.Default()["openai"]("gpt-4o"); err != nil || p == nil {
		t.Errorf("openai with $OPENAI_API_KEY: %v", err)
	}
}

// A local OpenAI-compatible server (OPENAI_BASE_URL without a key) works
// without inventing a key; without either the request names the missing key.
func TestBuiltinLocalOpenAIServer(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	env := map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}
	local := provider.Builtin(provider.Config{Getenv: func(k string) string { return env[k] }})
	for _, name := range []string{"openai", "openai-responses"} {
		if p, err := local[name]("llama3.2"); err != nil || p == nil {
			t.Fatalf("%s with only a base URL: %v", name, err)
		}
	}
	none := provider.Builtin(provider.Config{Getenv: func(string) string { return "" }})
	if _, err := none["openai"]("gpt-4.1-mini"); !errors.Is(err, ingest.ErrMissingAPIKey) {
		t.Fatalf("no key, no base URL: %v", err)
	}
}

// Config.IdleTimeout reaches every adapter: ingest's --idle-timeout is the
// limit of the built-in providers' streams, which ingest passes through
// without normalizing them again. Each adapter here stalls mid-stream.
func TestBuiltinIdleTimeoutReachesAdapters(t *testing.T) {
	stalls := map[string]string{
		"anthropic":        "anthropic/text-ping_claude-sonnet-4-5.sse",
		"gemini":           "gemini/text-usage_gemini-2.0-flash-exp.sse",
		"openai":           "openai-chat/single-tool-call-usage_gpt-4o-mini.sse",
		"openai-responses": "openai-responses/text_gpt-4o.sse",
		"bedrock":          "bedrock/text-then-tool-use-streamed-input.chunks.jsonl",
		"azure":            "azure-openai/text-prompt-filter-results-usage_gpt-4o.sse",
	}
	for name, fixture := range stalls {
		t.Run(name, func(t *testing.T) {
			body := cloudFixture(t, fixture)
			srv := providertest.NewServer(t, providertest.Response{Status: http.StatusOK, Body: body[:len(body)/2], Stall: true})
			cfg := provider.Config{IdleTimeout: 200 * time.Millisecond, Getenv: func(string) string { return "" }}
			cfg.OpenAI = openai.Config{APIKey: "k", BaseURL: srv.URL() + "/v1", MaxRetries: -1}
			cfg.Anthropic = anthropic.Config{APIKey: "k", BaseURL: srv.URL(), MaxRetries: -1}
			cfg.Gemini = gemini.Config{APIKey: "k", BaseURL: srv.URL(), MaxRetries: -1}
			cfg.Bedrock = bedrock.Config{Region: "us-east-1", BaseURL: srv.URL(), MaxRetries: -1, Credentials: staticAWS}
			cfg.Azure = openai.AzureConfig{Endpoint: srv.URL(), APIKey: "k", MaxRetries: -1}
			p, err := provider.Builtin(cfg)[name]("m")
			if err != nil {
				t.Fatal(err)
			}
			// A limit that did not reach the adapter would leave the
			// stream hanging: the test's deadline ends it as cancelled.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			s, err := p.Stream(ctx, &llm.Request{Model: "m", Messages: []events.Message{events.UserText("hi")}})
			if err != nil {
				t.Fatal(err)
			}
			evs, err := llm.Collect(s)
			if err != nil {
				t.Fatal(err)
			}
			var code string
			for _, ev := range evs {
				if e, ok := ev.(events.ErrorEvent); ok {
					code = e.Code
				}
			}
			if code != llm.CodeIdleTimeout || evs[len(evs)-1] != (events.StatusEvent{Status: events.StatusFailed}) {
				t.Fatalf("stalled stream ended %v, want idle_timeout and failed", evs[len(evs)-1])
			}
		})
	}
}

// Each built-in adapter's HTTP request to its provider is a client span
// under the caller's span, and carries that span as the W3C traceparent
// header (docs/architecture.md, "Tracing"): the provider call is the
// last hop of a turn's trace, and a provider (or a proxy in front of it)
// that logs traceparent ties its records to the turn.
func TestBuiltinProviderCallsAreTraced(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	streams := map[string]string{
		"anthropic":        "anthropic/text-ping_claude-sonnet-4-5.sse",
		"gemini":           "gemini/text-usage_gemini-2.0-flash-exp.sse",
		"openai":           "openai-chat/single-tool-call-usage_gpt-4o-mini.sse",
		"openai-responses": "openai-responses/text_gpt-4o.sse",
		"bedrock":          "bedrock/text-cache-usage.chunks.jsonl",
	}
	for name, fixture := range streams {
		t.Run(name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE(cloudFixture(t, fixture)))
			cfg := provider.Config{Getenv: func(string) string { return "" }}
			cfg.OpenAI = openai.Config{APIKey: "k", BaseURL: srv.URL() + "/v1", MaxRetries: -1}
			cfg.Anthropic = anthropic.Config{APIKey: "k", BaseURL: srv.URL(), MaxRetries: -1}
			cfg.Gemini = gemini.Config{APIKey: "k", BaseURL: srv.URL(), MaxRetries: -1}
			cfg.Bedrock = bedrock.Config{Region: "us-east-1", BaseURL: srv.URL(), MaxRetries: -1, Credentials: staticAWS}
			p, err := provider.Builtin(cfg)[name]("m")
			if err != nil {
				t.Fatal(err)
			}
			ctx, parent := tp.Tracer("test").Start(t.Context(), "llm.complete")
			s, err := p.Stream(ctx, &llm.Request{Model: "m", Messages: []events.Message{events.UserText("hi")}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := llm.Collect(s); err != nil {
				t.Fatal(err)
			}
			parent.End()
			// The header names the span of the HTTP request: a client span
			// of the caller's trace whose ancestors reach the caller's span
			// (directly, or through a span the SDK makes itself: the
			// Anthropic SDK wraps each call in one of its own).
			got := srv.LastRequest().Header.Get("Traceparent")
			byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
			for _, sp := range rec.Ended() {
				byID[sp.SpanContext().SpanID()] = sp
			}
			var client sdktrace.ReadOnlySpan
			for _, sp := range rec.Ended() {
				// traceparent = version-traceid-spanid-flags (W3C Trace Context).
				if got == "00-"+sp.SpanContext().TraceID().String()+"-"+sp.SpanContext().SpanID().String()+"-01" {
					client = sp
				}
			}
			if client == nil {
				t.Fatalf("request traceparent %q names no span that ended", got)
			}
			if client.SpanContext().TraceID() != parent.SpanContext().TraceID() || client.SpanKind() != trace.SpanKindClient {
				t.Errorf("request span %q: trace %s kind %v, want the caller's trace %s and kind client", client.Name(), client.SpanContext().TraceID(), client.SpanKind(), parent.SpanContext().TraceID())
			}
			under := false
			for sp := client; sp != nil; sp = byID[sp.Parent().SpanID()] {
				if sp.Parent().SpanID() == parent.SpanContext().SpanID() {
					under = true
					break
				}
			}
			if !under {
				t.Errorf("request span %q is not under the caller's span", client.Name())
			}
			var status int64
			for _, a := range client.Attributes() {
				if a.Key == "http.response.status_code" {
					status = a.Value.AsInt64()
				}
			}
			if status != http.StatusOK {
				t.Errorf("client span attributes %v, want http.response.status_code 200", client.Attributes())
			}
		})
	}
}

// staticAWS are keys for the Bedrock adapter against a local server.
var staticAWS = credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")

// cloudFixture is a recording as its provider sends it: the embedded ones
// as SSE, the bedrock and azure-openai ones from the fixture directory
// (bedrock's framed as an event stream).
func cloudFixture(t *testing.T, name string) []byte {
	t.Helper()
	if strings.HasPrefix(name, "bedrock/") || strings.HasPrefix(name, "azure-openai/") {
		return providertest.MustLoadFixture(t, name)
	}
	body, err := fixtures.SSE(name)
	if err != nil {
		t.Fatal(err)
	}
	return body
}
