package price

import (
	"slices"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
)

// Tokens are a model call's tokens in disjoint kinds.
type Tokens struct {
	// Input are the input tokens neither read from nor written into the
	// prompt cache.
	Input         int64
	CacheRead     int64
	CacheCreation int64
	// Output are the output tokens, reasoning included.
	Output int64
}

// AllInput is every input token of the call, cached or not.
func (t Tokens) AllInput() int64 { return t.Input + t.CacheRead + t.CacheCreation }

// Total is every token of the call: its input, cached or not, and its
// output. It is what a turn's max_total_tokens counts.
func (t Tokens) Total() int64 { return t.AllInput() + t.Output }

// Add is the kind-wise sum.
func (t Tokens) Add(u Tokens) Tokens {
	return Tokens{t.Input + u.Input, t.CacheRead + u.CacheRead, t.CacheCreation + u.CacheCreation, t.Output + u.Output}
}

// inclusive are the providers whose input_tokens count the cached input
// tokens too (OpenAI's prompt_tokens and input_tokens, Gemini's
// promptTokenCount); Anthropic's and Bedrock's count only the rest.
var inclusive = []string{"openai", "openai-responses", "azure", "azure-responses", "gemini", "vertex"}

func includesCached(model string) bool {
	p, _, _ := strings.Cut(model, ":")
	return slices.Contains(inclusive, p)
}

// Split divides the usage of a call of model into disjoint kinds. The
// providers differ in what input_tokens counts: openai, openai-responses,
// azure, azure-responses, gemini and vertex count the cache reads and
// writes in it, and their Input is input_tokens less those; every other
// provider (anthropic, vertex-anthropic, bedrock, …) counts them apart,
// and Input is input_tokens. Unknown (absent) fields count 0.
func Split(model string, u events.UsageEvent) Tokens {
	return SplitWith(u, includesCached(model))
}

// SplitWith is Split with the provider's rule given: inclusive says that
// input_tokens counts the cached tokens too.
func SplitWith(u events.UsageEvent, inclusive bool) Tokens {
	v := func(p *int64) int64 {
		if p == nil || *p < 0 {
			return 0
		}
		return *p
	}
	t := Tokens{Input: v(u.InputTokens), CacheRead: v(u.CacheReadInputTokens), CacheCreation: v(u.CacheCreationInputTokens), Output: v(u.OutputTokens)}
	if inclusive {
		t.Input = max(t.Input-t.CacheRead-t.CacheCreation, 0)
	}
	return t
}
