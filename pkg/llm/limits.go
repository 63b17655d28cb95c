package llm

// ModelLimits are the token limits of one model: how many tokens its
// context window holds (input and output together) and how many output
// tokens one call may ask for. A zero field is unknown.
type ModelLimits struct {
	ContextWindow   int64 `json:"context_window"`
	MaxOutputTokens int64 `json:"max_output_tokens"`
}

// LimitsFunc looks up the limits of a model, named "provider:model" as in
// a completion request; ok is false for a model it does not know.
type LimitsFunc func(model string) (ModelLimits, bool)
