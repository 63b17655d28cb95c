// Package models is the model table: per model (provider:model), the
// context window and the max output tokens (llm.ModelLimits). The turn
// loop (pkg/worker, Config.ModelLimits) estimates each model call's
// tokens against it (llm.EstimateTokens, llm.Fits) and reports a
// provider's "context too long" error as context_overflow.
//
// Default is the table shipped for the models the built-in adapters
// know (shipped.go names the provider page each family's numbers come
// from). An operator extends or overrides it with a file (Parse, Load,
// File), JSON or YAML as the price table (pkg/price):
//
//	{
//	  "models": {
//	    "azure:my-gpt-4o": {"context_window": 128000, "max_output_tokens": 16384},
//	    "openai:llama3.1:8b": {"context_window": 131072, "max_output_tokens": 8192}
//	  }
//	}
//
// A file's entry is found by its exact provider:model, or by the same
// name rule as the shipped table (below); its entries win over the
// shipped ones, so the table's Lookup is: the file's exact key, the
// file's key of the canonical name, the shipped family's canonical name.
//
// The name rule (Canonical): a Bedrock id loses its inference profile's
// region prefix (us., eu., apac., global., …), the "anthropic." vendor
// prefix, an ARN's path and the version suffix (-v1:0); a Vertex id its
// @date; then a dated snapshot suffix (-20250929, -2024-08-06, -0613,
// -001, -latest, -preview…, -exp…) goes, so that
// bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0 and
// anthropic:claude-sonnet-4-5-20250929 are both claude-sonnet-4-5. A
// name with any other suffix (gpt-4o-mini, gemini-2.5-flash-lite) is a
// model of its own, unknown unless the table names it. Azure deployments
// are named by the operator and match nothing shipped: give them in the
// file.
package models
