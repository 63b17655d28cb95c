package cli

import (
	"strings"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/provider"
)

// Default models picked by which credentials are set (in this order).
const (
	DefaultAnthropicModel = "anthropic:claude-sonnet-4-5"
	DefaultOpenAIModel    = "openai:gpt-4.1-mini"
	DefaultGeminiModel    = "gemini:gemini-2.5-flash"
)

// credentials says which provider credentials the environment has.
type credentials struct {
	anthropic, openai, openaiBase, gemini bool
}

func readCredentials(env *Env) credentials {
	return credentials{
		anthropic:  env.getenv("ANTHROPIC_API_KEY") != "",
		openai:     env.getenv("OPENAI_API_KEY") != "",
		openaiBase: env.getenv("OPENAI_BASE_URL") != "",
		gemini:     env.getenv("GEMINI_API_KEY") != "" || env.getenv("GOOGLE_API_KEY") != "",
	}
}

// has reports whether the credentials of a provider prefix are set.
func (c credentials) has(provider string) bool {
	switch provider {
	case "anthropic":
		return c.anthropic
	case "openai":
		return c.openai || c.openaiBase
	case "openai-responses":
		return c.openai
	case "gemini":
		return c.gemini
	case replay.Prefix:
		return true
	case "bedrock", "vertex", "vertex-anthropic", "azure", "azure-responses":
		// The clouds' SDKs find credentials in more places than the
		// environment (profiles, workload identity, instance metadata):
		// the provider itself says what is missing.
		return true
	}
	return false
}

// pickModel returns --model, else $LLMW_MODEL, else a default for the
// credentials that are set ("" when none fits).
func pickModel(flagModel string, env *Env, c credentials) string {
	if flagModel != "" {
		return flagModel
	}
	if m := env.getenv("LLMW_MODEL"); m != "" {
		return m
	}
	switch {
	case c.anthropic:
		return DefaultAnthropicModel
	case c.openai:
		return DefaultOpenAIModel
	case c.gemini:
		return DefaultGeminiModel
	}
	return ""
}

// replayModel maps a model to its replay scenario: "replay:x" as is, a
// provider prefix with a scenario of its own to that scenario, anything
// else to the Anthropic scenario (it shows thinking, a tool call and text).
func replayModel(model string) string {
	p, m := events.SplitModel(model)
	if p == replay.Prefix && m != "" {
		return model
	}
	if _, err := replay.Lookup(p); err == nil {
		return replay.Prefix + ":" + p
	}
	return replay.Prefix + ":anthropic"
}

// missingCredentials is the message chat prints when it has nothing to
// call: every variable, the local-server way, and the replay, with the
// commands written as the person runs this program (cmd).
func missingCredentials(cmd string) string {
	var b strings.Builder
	b.WriteString("no model provider is configured. Set one of:\n\n")
	b.WriteString("  export ANTHROPIC_API_KEY=...      # Anthropic (default model " + DefaultAnthropicModel + ")\n")
	b.WriteString("  export OPENAI_API_KEY=...         # OpenAI (default model " + DefaultOpenAIModel + "; openai-responses:<model> for the Responses API)\n")
	b.WriteString("  export GEMINI_API_KEY=...         # Google Gemini (or GOOGLE_API_KEY; default model " + DefaultGeminiModel + ")\n\n")
	b.WriteString("or a cloud's credentials with --model bedrock:<model id> (AWS_REGION and AWS credentials),\n")
	b.WriteString("vertex:<model> or vertex-anthropic:<model> (GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION),\n")
	b.WriteString("azure:<deployment> (AZURE_OPENAI_ENDPOINT, AZURE_OPENAI_API_KEY).\n\n")
	b.WriteString("or use a local OpenAI-compatible server (Ollama, llama.cpp, vLLM):\n\n")
	b.WriteString("  export OPENAI_BASE_URL=http://localhost:11434/v1\n")
	b.WriteString("  " + cmd + " chat --model openai:<model> \"...\"\n\n")
	b.WriteString("and pick a model with --model provider:model or $LLMW_MODEL.\n\n")
	b.WriteString("To watch the whole pipeline run without any account, use --replay: a " + replay.Label + ":\n\n")
	b.WriteString("  " + cmd + " chat --replay\n")
	return b.String()
}

// providerFactories are ingest's providers for the environment: the four
// adapters with the SDKs' own variables (and a placeholder key for a local
// OpenAI-compatible server, see provider.LocalAPIKey).
func providerFactories(getenv func(string) string) map[string]ingest.Factory {
	return provider.Builtin(provider.Config{Getenv: getenv})
}
