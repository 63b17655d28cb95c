package models

import "github.com/llmworker/llmworker/pkg/llm"

// The shipped table, by family (the providers that serve the same model
// names) and canonical name. A window is the model's whole context,
// input and output together; where a provider documents an input limit
// apart from the output limit (Gemini), the window is the input limit,
// which leaves the estimate on the safe side.
var shipped = map[string]map[string]llm.ModelLimits{
	// Anthropic's model pages (platform.claude.com/docs/en/about-claude/models/overview
	// and models/<model>/overview): "Context window" and "Max output".
	// The 1M-token window of Sonnet 4 and 4.5 is a beta an operator opts
	// into; the table gives their standard 200K. Served as anthropic,
	// vertex-anthropic and bedrock (anthropic.<name>-v1:0).
	familyClaude: {
		"claude-3-haiku":    {ContextWindow: 200_000, MaxOutputTokens: 4_096},
		"claude-3-opus":     {ContextWindow: 200_000, MaxOutputTokens: 4_096},
		"claude-3-5-haiku":  {ContextWindow: 200_000, MaxOutputTokens: 8_192},
		"claude-3-5-sonnet": {ContextWindow: 200_000, MaxOutputTokens: 8_192},
		"claude-3-7-sonnet": {ContextWindow: 200_000, MaxOutputTokens: 64_000},
		"claude-sonnet-4":   {ContextWindow: 200_000, MaxOutputTokens: 64_000},
		"claude-opus-4":     {ContextWindow: 200_000, MaxOutputTokens: 32_000},
		"claude-opus-4-1":   {ContextWindow: 200_000, MaxOutputTokens: 32_000},
		"claude-sonnet-4-5": {ContextWindow: 200_000, MaxOutputTokens: 64_000},
		"claude-haiku-4-5":  {ContextWindow: 200_000, MaxOutputTokens: 64_000},
		"claude-opus-4-5":   {ContextWindow: 200_000, MaxOutputTokens: 64_000},
		"claude-opus-4-6":   {ContextWindow: 1_000_000, MaxOutputTokens: 128_000},
		"claude-sonnet-4-6": {ContextWindow: 1_000_000, MaxOutputTokens: 128_000},
		"claude-opus-5":     {ContextWindow: 1_000_000, MaxOutputTokens: 128_000},
		"claude-opus-5-5":   {ContextWindow: 1_000_000, MaxOutputTokens: 128_000},
		"claude-fable-5-1":  {ContextWindow: 1_000_000, MaxOutputTokens: 128_000},
	},
	// OpenAI's model pages (platform.openai.com/docs/models/<model>):
	// "Context window" and "Max output tokens". GPT-5's 400K window holds
	// its 128K of output (its input limit is 272K). Served as openai and
	// openai-responses.
	familyOpenAI: {
		"gpt-3.5-turbo": {ContextWindow: 16_385, MaxOutputTokens: 4_096},
		"gpt-4-turbo":   {ContextWindow: 128_000, MaxOutputTokens: 4_096},
		"gpt-4o":        {ContextWindow: 128_000, MaxOutputTokens: 16_384},
		"gpt-4o-mini":   {ContextWindow: 128_000, MaxOutputTokens: 16_384},
		"chatgpt-4o":    {ContextWindow: 128_000, MaxOutputTokens: 16_384},
		"gpt-4.1":       {ContextWindow: 1_047_576, MaxOutputTokens: 32_768},
		"gpt-4.1-mini":  {ContextWindow: 1_047_576, MaxOutputTokens: 32_768},
		"gpt-4.1-nano":  {ContextWindow: 1_047_576, MaxOutputTokens: 32_768},
		"gpt-5":         {ContextWindow: 400_000, MaxOutputTokens: 128_000},
		"gpt-5-mini":    {ContextWindow: 400_000, MaxOutputTokens: 128_000},
		"gpt-5-nano":    {ContextWindow: 400_000, MaxOutputTokens: 128_000},
		"gpt-5-codex":   {ContextWindow: 400_000, MaxOutputTokens: 128_000},
		"gpt-5-chat":    {ContextWindow: 128_000, MaxOutputTokens: 16_384},
		"gpt-5.1":       {ContextWindow: 400_000, MaxOutputTokens: 128_000},
		"o1":            {ContextWindow: 200_000, MaxOutputTokens: 100_000},
		"o1-mini":       {ContextWindow: 128_000, MaxOutputTokens: 65_536},
		"o3":            {ContextWindow: 200_000, MaxOutputTokens: 100_000},
		"o3-mini":       {ContextWindow: 200_000, MaxOutputTokens: 100_000},
		"o3-pro":        {ContextWindow: 200_000, MaxOutputTokens: 100_000},
		"o4-mini":       {ContextWindow: 200_000, MaxOutputTokens: 100_000},
	},
	// Google's Gemini model pages (ai.google.dev/gemini-api/docs/models,
	// the same for Vertex AI's cloud.google.com/vertex-ai/generative-ai/docs/models):
	// "Input token limit" (the window here) and "Output token limit".
	// Served as gemini and vertex.
	familyGemini: {
		"gemini-1.5-flash":      {ContextWindow: 1_048_576, MaxOutputTokens: 8_192},
		"gemini-1.5-pro":        {ContextWindow: 2_097_152, MaxOutputTokens: 8_192},
		"gemini-2.0-flash":      {ContextWindow: 1_048_576, MaxOutputTokens: 8_192},
		"gemini-2.0-flash-lite": {ContextWindow: 1_048_576, MaxOutputTokens: 8_192},
		"gemini-2.5-pro":        {ContextWindow: 1_048_576, MaxOutputTokens: 65_536},
		"gemini-2.5-flash":      {ContextWindow: 1_048_576, MaxOutputTokens: 65_536},
		"gemini-2.5-flash-lite": {ContextWindow: 1_048_576, MaxOutputTokens: 65_536},
		"gemini-3-pro":          {ContextWindow: 1_048_576, MaxOutputTokens: 65_536},
	},
}

// Replay is the limits of every replay: model (the recorded provider
// streams of `llmworker chat --replay` and `up --replay`): the window of
// a small model, so that the long-session machinery (the estimate,
// compaction) can be exercised without a provider.
var Replay = llm.ModelLimits{ContextWindow: 32_768, MaxOutputTokens: 4_096}

// The families of the shipped table.
const (
	familyClaude = "claude"
	familyOpenAI = "openai"
	familyGemini = "gemini"
)

// familyOf is the shipped family a provider serves, "" for a provider
// whose model names are the operator's (azure, azure-responses) or
// unknown.
func familyOf(provider string) string {
	switch provider {
	case "anthropic", "vertex-anthropic", "bedrock":
		return familyClaude
	case "openai", "openai-responses":
		return familyOpenAI
	case "gemini", "vertex":
		return familyGemini
	}
	return ""
}
