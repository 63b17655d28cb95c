// Package provider is the set of built-in model providers: the adapters of
// its sub-packages (openai for Chat Completions and compatible local
// servers, openairesponses, anthropic, gemini), each on its official SDK,
// wired as ingest factories keyed by the provider prefix of a model
// ("anthropic" of "anthropic:claude-sonnet-4-5") and configured from the
// SDKs' environment variables.
//
// It is the only package that links the provider SDKs into a binary: the
// ingest command and llmworker (which embeds ingest) import it; the turn,
// toolexec and hookbridge commands do not, and internal/layering's test
// keeps it so. Each adapter reports a failed call as an llm.ProviderError
// (kind, HTTP status, retryable), so ingest classifies failures without
// knowing any SDK.
package provider
