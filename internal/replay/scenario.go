package replay

import (
	"fmt"
	"slices"

	"github.com/llmworker/llmworker/pkg/events"
)

// Prefix is the provider prefix of replay models ("replay:anthropic").
const Prefix = "replay"

// Label is what every screen showing a replay says about it.
const Label = "replay of recorded provider streams (not a live model)"

// Scenario is a scripted multi-step conversation in one provider format.
type Scenario struct {
	// Name is the model name after "replay:" (e.g. "anthropic").
	Name string
	// Adapter is the adapter that parses the recordings: "anthropic",
	// "openai" (Chat Completions), "openai-responses" or "gemini".
	Adapter string
	// Model is the recorded model, sent to the adapter as its model name.
	Model string
	// Steps are fixture paths in internal/fixtures, played in order: the
	// first is a tool-call stream, the last a text stream.
	Steps []string
	// Tools are the names of the tools the recordings call.
	Tools []string
	// Prompt is a question that fits the recordings, used when the user
	// gives none.
	Prompt string
}

// ModelString returns the model string of the scenario for turn requests.
func (s Scenario) ModelString() string { return Prefix + ":" + s.Name }

var scenarios = []Scenario{
	{
		Name: "anthropic", Adapter: "anthropic", Model: "claude-haiku-4-5",
		Steps: []string{
			"anthropic/thinking-then-tool-use_claude-haiku-4-5.sse",
			"anthropic/thinking-signature-text_claude-sonnet-4.sse",
		},
		Tools:  []string{"fixed_version"},
		Prompt: "Use the fixed_version tool, tell me the version, then explain how to cross the street safely.",
	},
	{
		Name: "openai", Adapter: "openai", Model: "gpt-4o",
		Steps: []string{
			"openai-chat/parallel-tool-calls-streamed-args_gpt-4o.sse",
			"openai-chat/text-include-usage_gpt-4.1-nano.chunks.jsonl",
		},
		Tools:  []string{"get_weather", "get_product_name"},
		Prompt: "What's the weather in Mexico City, and what is our product called? Then invent a holiday for it.",
	},
	{
		Name: "openai-responses", Adapter: "openai-responses", Model: "gpt-4o",
		Steps: []string{
			"openai-responses/function-call_gpt-4o.sse",
			"openai-responses/reasoning-summary-4-parts-then-text_o3-mini.sse",
		},
		Tools:  []string{"get_capital"},
		Prompt: "What is the capital of France, and how do I cross the street there safely?",
	},
	{
		Name: "gemini", Adapter: "gemini", Model: "gemini-2.0-flash",
		Steps: []string{
			"gemini/function-call_gemini-2.0-flash.sse",
			"gemini/thought-summary-then-text_gemini-2.5-flash.sse",
		},
		Tools:  []string{"get_capital"},
		Prompt: "What is the capital of France, and why is the sky blue?",
	},
}

// Scenarios returns the scenarios in a fixed order.
func Scenarios() []Scenario {
	out := make([]Scenario, len(scenarios))
	for i, s := range scenarios {
		s.Steps = slices.Clone(s.Steps)
		s.Tools = slices.Clone(s.Tools)
		out[i] = s
	}
	return out
}

// Names returns the scenario names ("anthropic", "openai", ...).
func Names() []string {
	out := make([]string, len(scenarios))
	for i, s := range scenarios {
		out[i] = s.Name
	}
	return out
}

// Lookup returns the scenario called name; ErrUnknownScenario if none.
func Lookup(name string) (Scenario, error) {
	for _, s := range Scenarios() {
		if s.Name == name {
			return s, nil
		}
	}
	return Scenario{}, fmt.Errorf("%w: %q (known: %v)", ErrUnknownScenario, name, Names())
}

// StepOf returns the 0-based scenario step a request is at: the number of
// messages carrying tool results since the last user message with text.
// A fresh question is step 0 (the tool call); once the tool answered, the
// model "writes" the text answer.
func StepOf(msgs []events.Message) int {
	n := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		hasResult, hasText := false, false
		for _, p := range m.Content {
			switch p.Type {
			case events.PartToolResult:
				hasResult = true
			case events.PartText:
				hasText = true
			}
		}
		if hasResult {
			n++
			continue
		}
		if m.Role == events.RoleUser && hasText {
			break
		}
	}
	return n
}
