// Package price is the price table of model calls: per model, what a
// million input, cached input, cache-creation and output tokens cost
// (Parse, Load, File), and the cost of a call's usage by it (Table.Cost).
// The turn loop (pkg/worker) charges each model call with it, reports the
// running cost in llmw.usage and holds a turn to its max_cost
// (docs/protocol.md §5 "Budgets").
//
// A price table is JSON, or YAML in a file named *.yaml or *.yml:
//
//	{
//	  "currency": "USD",
//	  "models": {
//	    "anthropic:claude-sonnet-4-5": {"input": 3, "cached_input": 0.30, "cache_creation": 3.75, "output": 15},
//	    "openai:gpt-4.1-mini": {"input": 0.40, "cached_input": 0.10, "output": 1.60}
//	  }
//	}
//
// Prices are per million tokens, in the table's currency (informative).
// input and output are required; cached_input and cache_creation default
// to input. A model is found by its exact model string.
package price
