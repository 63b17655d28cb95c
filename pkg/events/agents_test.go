package events_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
)

// A turn request takes each field it leaves unset from the agent, and
// keeps each one it sets (docs/protocol.md §5, "Agents").
func TestWithAgent(t *testing.T) {
	temp, seed, cache := 0.3, int64(7), false
	def := events.AgentDefinition{
		Name: "a", Model: "openai:gpt-4.1", FallbackModels: []string{"anthropic:claude-haiku-4-5"}, System: "def",
		Tools: []string{"x"}, MaxSteps: 5, MaxTokens: 100, Temperature: &temp, MaxTotalTokens: 1000, MaxCost: 0.5,
		Compaction: &events.CompactionConfig{Threshold: 0.8, KeepRecent: 4},
		ModelOptions: events.ModelOptions{Seed: &seed, ReasoningEffort: "low",
			ProviderOptions: map[string]json.RawMessage{"openai": json.RawMessage(`{"a":1}`), "anthropic": json.RawMessage(`{"b":2}`)}},
	}

	got := events.TurnRequest{TurnID: "t", Agent: "a"}.WithAgent(&def, 9)
	if got.Agent != "a@9" || got.Model != def.Model || !slices.Equal(got.FallbackModels, def.FallbackModels) || got.System != "def" ||
		!slices.Equal(got.Tools, []string{"x"}) || got.MaxSteps != 5 || got.MaxTokens != 100 || *got.Temperature != 0.3 ||
		got.MaxTotalTokens != 1000 || got.MaxCost != 0.5 || got.Compaction.Threshold != 0.8 || *got.Seed != 7 || got.ReasoningEffort != "low" {
		t.Fatalf("an empty request did not take the definition: %+v", got)
	}

	hot := 0.9
	req := events.TurnRequest{TurnID: "t", Agent: "a@9", Model: "anthropic:claude-sonnet-4-5", System: "mine", Tools: []string{}, Messages: []events.Message{events.UserText("hi")},
		Temperature: &hot, Compaction: &events.CompactionConfig{KeepRecent: 10},
		ModelOptions: events.ModelOptions{Cache: &cache, ProviderOptions: map[string]json.RawMessage{"openai": json.RawMessage(`{"c":3}`)}}}
	got = req.WithAgent(&def, 9)
	switch {
	case got.Model != "anthropic:claude-sonnet-4-5" || got.FallbackModels != nil:
		t.Errorf("model %s fallbacks %v: a request's model keeps the request's fallbacks (none: the service's)", got.Model, got.FallbackModels)
	case got.System != "mine" || got.Tools == nil || len(got.Tools) != 0 || *got.Temperature != 0.9:
		t.Errorf("system %q tools %v temperature %v: the request's fields must win, [] included", got.System, got.Tools, *got.Temperature)
	case got.Compaction.Threshold != 0.8 || got.Compaction.KeepRecent != 10:
		t.Errorf("compaction %+v: want merged field by field", *got.Compaction)
	case *got.Seed != 7 || *got.Cache || string(got.ProviderOptions["openai"]) != `{"c":3}` || string(got.ProviderOptions["anthropic"]) != `{"b":2}`:
		t.Errorf("model options %+v: want merged option by option, provider options key by key", got.ModelOptions)
	}
	if def.Compaction.KeepRecent != 4 || string(def.ProviderOptions["openai"]) != `{"a":1}` {
		t.Errorf("WithAgent changed the definition: %+v", def)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("resolved request: %v", err)
	}
}

// A request names an agent as NAME or NAME@REV; with one, model may be
// left out.
func TestTurnRequestAgentField(t *testing.T) {
	msgs := []events.Message{events.UserText("hi")}
	for _, ok := range []string{"a", "support-2", "a@1", "a_b@18446744073709551615"} {
		if err := (events.TurnRequest{TurnID: "t", Agent: ok, Messages: msgs}).Validate(); err != nil {
			t.Errorf("agent %q: %v", ok, err)
		}
	}
	for _, bad := range []string{"a.b", "a@", "a@0", "a@x", "@3", "a@1@2", "a b"} {
		err := events.TurnRequest{TurnID: "t", Agent: bad, Messages: msgs}.Validate()
		var fe *events.FieldError
		if !errors.As(err, &fe) || fe.Field != "agent" {
			t.Errorf("agent %q: %v, want an error naming agent", bad, err)
		}
	}
	var fe *events.FieldError
	if err := (events.TurnRequest{TurnID: "t", Messages: msgs}).Validate(); !errors.As(err, &fe) || fe.Field != "model" {
		t.Errorf("no agent, no model: %v, want model required", err)
	}
}

// Native is merged like every other compaction field: set over unset,
// false over true.
func TestCompactionConfigMergeNative(t *testing.T) {
	on, off := true, false
	base := events.CompactionConfig{Threshold: 0.7}
	if got := base.Merge(&events.CompactionConfig{Native: &on}); !got.NativeOn() || got.Threshold != 0.7 {
		t.Errorf("merged %+v, want native on and the threshold kept", got)
	}
	if got := base.Merge(&events.CompactionConfig{Native: &on}).Merge(&events.CompactionConfig{Native: &off}); got.NativeOn() {
		t.Error("native false over true is on")
	}
	if got := base.Merge(&events.CompactionConfig{Native: &on}).Merge(&events.CompactionConfig{KeepRecent: 3}); !got.NativeOn() {
		t.Error("native unset over true is off")
	}
}
