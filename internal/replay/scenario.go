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
	// Steps are fixture paths in internal/leaf/fixtures, played in order: every
	// step but the last is a tool-call stream, the last a text stream (a
	// scenario of one step answers without tools).
	Steps []string
	// Tools are the names of the tools the recordings call, in order.
	Tools []string
	// Prompt is a question that fits the recordings, used when the user
	// gives none.
	Prompt string
}

// ModelString returns the model string of the scenario for turn requests.
func (s Scenario) ModelString() string { return Prefix + ":" + s.Name }

// scenarios are whole recorded conversations: every step of one scenario
// comes from the same recorded session (internal/leaf/fixtures/MANIFEST.md), so
// the thinking, the tool calls and the answer are about one question, and
// the demo tools answer what the recorded tools answered, which the
// recorded answer then uses. Prompt is the question the recording asked.
var scenarios = []Scenario{
	{
		Name: "anthropic", Adapter: "anthropic", Model: "claude-haiku-4-5",
		Steps: []string{
			"anthropic/thinking-then-tool-use_claude-haiku-4-5.sse",
			"anthropic/text-after-tool-result_claude-haiku-4-5.sse",
		},
		Tools:  []string{"fixed_version"},
		Prompt: "Use the fixed_version tool. Then tell me the version and make one short joke about it. Think about it first.",
	},
	{
		Name: "openai", Adapter: "openai", Model: "gpt-4o-mini",
		Steps: []string{
			"openai-chat/single-tool-call-usage_gpt-4o-mini.sse",
			"openai-chat/text-after-tool-result_gpt-4o-mini.sse",
		},
		Tools:  []string{"get_capital"},
		Prompt: "What is the capital of the UK? Use the tool, then answer.",
	},
	{
		Name: "openai-responses", Adapter: "openai-responses", Model: "gpt-4o",
		Steps: []string{
			"openai-responses/function-call_gpt-4o.sse",
			"openai-responses/text_gpt-4o.sse",
		},
		Tools:  []string{"get_capital"},
		Prompt: "What is the capital of France?",
	},
	{
		Name: "gemini", Adapter: "gemini", Model: "gemini-2.0-flash",
		Steps: []string{
			"gemini/function-call_gemini-2.0-flash.sse",
			"gemini/function-call-after-tool-result_gemini-2.0-flash.sse",
			"gemini/text-after-tool-results_gemini-2.0-flash.sse",
		},
		Tools:  []string{"get_capital", "get_temperature"},
		Prompt: "What is the temperature of the capital of France?",
	},
	{
		// One long recorded answer with no tool: a reasoning summary in
		// four parts, then the text (654 deltas in all).
		Name: "openai-reasoning", Adapter: "openai-responses", Model: "o3-mini",
		Steps:  []string{"openai-responses/reasoning-summary-4-parts-then-text_o3-mini.sse"},
		Prompt: "How do I cross the street?",
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
