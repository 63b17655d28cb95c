package provider

import (
	"errors"
	"net/http"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/llmworker/llmworker/pkg/ingest"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/bedrock"
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/openairesponses"
)

// Config overrides the configuration the built-in adapters read from
// the SDKs' environment variables (docs/protocol.md, "Models"). The zero value uses the
// environment only.
type Config struct {
	// OpenAI configures both "openai" (Chat Completions) and
	// "openai-responses".
	OpenAI    openai.Config
	Anthropic anthropic.Config
	Gemini    gemini.Config
	// Bedrock configures "bedrock"; the AWS SDK reads its own environment
	// (AWS_REGION, the credential chain, AWS_ENDPOINT_URL_BEDROCK_RUNTIME).
	Bedrock bedrock.Config
	// Vertex configures "vertex" (Gemini on Vertex AI) and VertexAnthropic
	// "vertex-anthropic" (Claude on Vertex AI); both read
	// GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION, GOOGLE_VERTEX_BASE_URL and
	// Application Default Credentials.
	Vertex          gemini.VertexConfig
	VertexAnthropic anthropic.VertexConfig
	// Azure configures "azure" (Chat Completions) and "azure-responses" on
	// Azure OpenAI: AZURE_OPENAI_ENDPOINT, AZURE_OPENAI_API_KEY (or
	// AZURE_OPENAI_AD_TOKEN), OPENAI_API_VERSION.
	Azure openai.AzureConfig
	// Getenv reads the environment (nil = os.Getenv); tests inject one.
	Getenv func(string) string
	// IdleTimeout is the idle limit of every adapter whose own config
	// leaves it 0 (0 = the adapters' default, 10 minutes; negative = none).
	IdleTimeout time.Duration
}

// LocalAPIKey is the API key given to the OpenAI adapters when a base URL
// is configured (OPENAI_BASE_URL) but no key: local OpenAI-compatible
// servers (Ollama, llama.cpp, vLLM) want none, and the SDK insists on one.
const LocalAPIKey = "local"

// openAIConfig applies LocalAPIKey.
func (c Config) openAIConfig() openai.Config {
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	o := c.OpenAI
	if o.IdleTimeout == 0 {
		o.IdleTimeout = c.IdleTimeout
	}
	o.HTTPClient = traced(o.HTTPClient)
	if o.APIKey == "" && getenv("OPENAI_API_KEY") == "" && (o.BaseURL != "" || getenv("OPENAI_BASE_URL") != "") {
		o.APIKey = LocalAPIKey
	}
	return o
}

// Default returns the factories of the built-in adapters, keyed by
// provider prefix: "openai", "openai-responses", "anthropic", "gemini",
// "bedrock", "vertex", "vertex-anthropic", "azure" and "azure-responses",
// configured from the environment.
func Default() map[string]ingest.Factory { return Builtin(Config{}) }

// Builtin returns the factories of the built-in adapters with cfg. Each
// builds its provider on first use and keeps it (the SDK clients are safe
// for concurrent use); a provider without a key is refused per request with
// ErrMissingAPIKey, so setting the key and restarting is all it takes. Every
// model name is passed on: the provider itself says when it does not know a
// model (wrap a factory in AllowModels to refuse unknown models up front).
func Builtin(cfg Config) map[string]ingest.Factory {
	return map[string]ingest.Factory{
		"openai": lazy(func() (llm.Provider, error) {
			p, err := openai.New(cfg.openAIConfig())
			if err != nil {
				return nil, err
			}
			return p, nil
		}, openai.ErrMissingAPIKey, openAIHint),
		"openai-responses": lazy(func() (llm.Provider, error) {
			p, err := openairesponses.New(cfg.openAIConfig())
			if err != nil {
				return nil, err
			}
			return p, nil
		}, openairesponses.ErrMissingAPIKey, openAIHint),
		"anthropic": lazy(func() (llm.Provider, error) {
			p, err := anthropic.New(cfg.anthropicConfig())
			if err != nil {
				return nil, err
			}
			return p, nil
		}, anthropic.ErrMissingAPIKey, "set ANTHROPIC_API_KEY in the environment of ingest"),
		"gemini": lazy(func() (llm.Provider, error) {
			p, err := gemini.New(cfg.geminiConfig())
			if err != nil {
				return nil, err
			}
			return p, nil
		}, gemini.ErrMissingAPIKey, "set GEMINI_API_KEY (or GOOGLE_API_KEY) in the environment of ingest"),
		bedrock.Name: lazy(func() (llm.Provider, error) {
			p, err := bedrock.New(cfg.bedrockConfig())
			if err != nil {
				return nil, err
			}
			return p, nil
		}, bedrock.ErrMissingRegion, bedrockHint),
		"vertex": lazy(func() (llm.Provider, error) {
			v := cfg.Vertex
			v.IdleTimeout = cmpOr(v.IdleTimeout, cfg.IdleTimeout)
			v.HTTPClient = traced(v.HTTPClient)
			p, err := gemini.NewVertex(v)
			if err != nil {
				return nil, err
			}
			return p, nil
		}, gemini.ErrMissingVertexConfig, vertexHint),
		"vertex-anthropic": lazy(func() (llm.Provider, error) {
			v := cfg.VertexAnthropic
			v.IdleTimeout = cmpOr(v.IdleTimeout, cfg.IdleTimeout)
			v.HTTPClient = traced(v.HTTPClient)
			p, err := anthropic.NewVertex(v)
			if err != nil {
				return nil, err
			}
			return p, nil
		}, anthropic.ErrMissingVertexConfig, vertexHint),
		"azure": lazy(func() (llm.Provider, error) {
			return openai.NewAzure(cfg.azureConfig())
		}, openai.ErrMissingAzureConfig, azureHint),
		"azure-responses": lazy(func() (llm.Provider, error) {
			return openairesponses.NewAzure(cfg.azureConfig())
		}, openai.ErrMissingAzureConfig, azureHint),
	}
}

const azureHint = "set AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_API_KEY (or AZURE_OPENAI_AD_TOKEN) in the environment of ingest"

func (c Config) azureConfig() openai.AzureConfig {
	a := c.Azure
	a.IdleTimeout = cmpOr(a.IdleTimeout, c.IdleTimeout)
	a.HTTPClient = traced(a.HTTPClient)
	return a
}

const vertexHint = "set GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION in the environment of ingest, with Application Default Credentials " +
	"(GOOGLE_APPLICATION_CREDENTIALS naming a credential file, or workload identity)"

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

const bedrockHint = "set AWS_REGION in the environment of ingest, with AWS credentials from the SDK's chain " +
	"(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a web identity token or instance metadata)"

func (c Config) bedrockConfig() bedrock.Config {
	b := c.Bedrock
	if b.IdleTimeout == 0 {
		b.IdleTimeout = c.IdleTimeout
	}
	// The SDK's own client keeps AWS_CA_BUNDLE; only its transport is
	// traced.
	b.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return otelhttp.NewTransport(rt, otelhttp.WithPropagators(propagation.TraceContext{}))
	}
	return b
}

const openAIHint = "set OPENAI_API_KEY in the environment of ingest (for a local OpenAI-compatible server, OPENAI_BASE_URL instead)"

// missingKeyError is a missing key as the user reads it: what to set,
// once, without the adapter's wording for library users (Config.APIKey).
// It still matches ingest.ErrMissingAPIKey and the adapter's sentinel.
type missingKeyError struct {
	hint string
	err  error
}

func (e *missingKeyError) Error() string   { return "missing API key: " + e.hint }
func (e *missingKeyError) Unwrap() []error { return []error{ingest.ErrMissingAPIKey, e.err} }

// lazy builds a provider once it is first needed and caches it; failures
// are not cached. missingKey is the adapter's own sentinel, translated to
// ingest.ErrMissingAPIKey with hint, which says what to set.
func lazy(build func() (llm.Provider, error), missingKey error, hint string) ingest.Factory {
	var (
		mu sync.Mutex
		p  llm.Provider
	)
	return func(string) (llm.Provider, error) {
		mu.Lock()
		defer mu.Unlock()
		if p != nil {
			return p, nil
		}
		np, err := build()
		switch {
		case errors.Is(err, missingKey):
			return nil, &missingKeyError{hint: hint, err: err}
		case err != nil:
			return nil, err
		}
		p = np
		return p, nil
	}
}

func (c Config) anthropicConfig() anthropic.Config {
	a := c.Anthropic
	if a.IdleTimeout == 0 {
		a.IdleTimeout = c.IdleTimeout
	}
	a.HTTPClient = traced(a.HTTPClient)
	return a
}

func (c Config) geminiConfig() gemini.Config {
	g := c.Gemini
	if g.IdleTimeout == 0 {
		g.IdleTimeout = c.IdleTimeout
	}
	g.HTTPClient = traced(g.HTTPClient)
	return g
}

// traced returns a copy of c (nil: the SDKs' default, http.DefaultClient)
// whose transport makes each HTTP request to a provider an OpenTelemetry
// client span, under the span of the stream's context (ingest's
// "llm.complete"), and sends the W3C traceparent header: the last hop of
// a turn's trace (docs/architecture.md, "Tracing"). With no tracer
// provider installed the spans are the API's no-ops and no header is
// written. The adapters' own retries wrap this transport, so each
// attempt is a span of its own.
func traced(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	cp := *c
	rt := cp.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	cp.Transport = otelhttp.NewTransport(rt, otelhttp.WithPropagators(propagation.TraceContext{}))
	return &cp
}
