package ingest

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/openairesponses"
)

// BuiltinConfig overrides the configuration the built-in adapters read from
// the SDKs' environment variables (DESIGN.md §3). The zero value uses the
// environment only.
type BuiltinConfig struct {
	// OpenAI configures both "openai" (Chat Completions) and
	// "openai-responses".
	OpenAI    openai.Config
	Anthropic anthropic.Config
	Gemini    gemini.Config
	// Getenv reads the environment (nil = os.Getenv); tests inject one.
	Getenv func(string) string
}

// LocalAPIKey is the API key given to the OpenAI adapters when a base URL
// is configured (OPENAI_BASE_URL) but no key: local OpenAI-compatible
// servers (Ollama, llama.cpp, vLLM) want none, and the SDK insists on one.
const LocalAPIKey = "local"

// openAIConfig applies LocalAPIKey.
func (c BuiltinConfig) openAIConfig() openai.Config {
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	o := c.OpenAI
	if o.APIKey == "" && getenv("OPENAI_API_KEY") == "" && (o.BaseURL != "" || getenv("OPENAI_BASE_URL") != "") {
		o.APIKey = LocalAPIKey
	}
	return o
}

// DefaultFactories returns the factories of the built-in adapters, keyed by
// provider prefix: "openai", "openai-responses", "anthropic" and "gemini",
// configured from the environment.
func DefaultFactories() map[string]Factory { return Builtin(BuiltinConfig{}) }

// Builtin returns the factories of the built-in adapters with cfg. Each
// builds its provider on first use and keeps it (the SDK clients are safe
// for concurrent use); a provider without a key is refused per request with
// ErrMissingAPIKey, so setting the key and restarting is all it takes. Every
// model name is passed on: the provider itself says when it does not know a
// model (wrap a factory in AllowModels to refuse unknown models up front).
func Builtin(cfg BuiltinConfig) map[string]Factory {
	return map[string]Factory{
		"openai": lazy(func() (llm.Provider, error) {
			p, err := openai.New(cfg.openAIConfig())
			if err != nil {
				return nil, err
			}
			return p, nil
		}, openai.ErrMissingAPIKey),
		"openai-responses": lazy(func() (llm.Provider, error) {
			p, err := openairesponses.New(cfg.openAIConfig())
			if err != nil {
				return nil, err
			}
			return p, nil
		}, openairesponses.ErrMissingAPIKey),
		"anthropic": lazy(func() (llm.Provider, error) {
			p, err := anthropic.New(cfg.Anthropic)
			if err != nil {
				return nil, err
			}
			return p, nil
		}, anthropic.ErrMissingAPIKey),
		"gemini": lazy(func() (llm.Provider, error) {
			p, err := gemini.New(cfg.Gemini)
			if err != nil {
				return nil, err
			}
			return p, nil
		}, gemini.ErrMissingAPIKey),
	}
}

// lazy builds a provider once it is first needed and caches it; failures
// are not cached. missingKey is the adapter's own sentinel, translated to
// ErrMissingAPIKey.
func lazy(build func() (llm.Provider, error), missingKey error) Factory {
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
			return nil, fmt.Errorf("%w: %w", ErrMissingAPIKey, err)
		case err != nil:
			return nil, err
		}
		p = np
		return p, nil
	}
}
