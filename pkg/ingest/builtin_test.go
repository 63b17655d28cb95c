package ingest_test

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/openai"
)

func TestBuiltinFactories(t *testing.T) {
	for _, k := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"} {
		t.Setenv(k, "")
	}
	fs := ingest.DefaultFactories()
	want := []string{"anthropic", "gemini", "openai", "openai-responses"} // DESIGN.md §3
	if got := slices.Sorted(maps.Keys(fs)); !reflect.DeepEqual(got, want) {
		t.Fatalf("providers %v, want %v", got, want)
	}
	for name, f := range fs {
		if _, err := f("some-model"); !errors.Is(err, ingest.ErrMissingAPIKey) {
			t.Errorf("%s without a key: %v", name, err)
		}
	}

	// With keys each factory builds its provider once.
	fs = ingest.Builtin(ingest.BuiltinConfig{
		OpenAI:    openai.Config{APIKey: "k"},
		Anthropic: anthropic.Config{APIKey: "k"},
		Gemini:    gemini.Config{APIKey: "k"},
	})
	for name, f := range fs {
		p1, err := f("a")
		if err != nil || p1 == nil {
			t.Fatalf("%s: %v, %v", name, p1, err)
		}
		p2, err := f("b")
		if err != nil || p2 != p1 {
			t.Errorf("%s: not cached (%v)", name, err)
		}
	}

	// The key from the environment is enough.
	t.Setenv("OPENAI_API_KEY", "from-env")
	if p, err := ingest.DefaultFactories()["openai"]("gpt-4o"); err != nil || p == nil {
		t.Errorf("openai with $OPENAI_API_KEY: %v", err)
	}
}

func TestAllowModels(t *testing.T) {
	f := ingest.AllowModels(ingest.Static(&fake{}), "a", "b")
	if p, err := f("b"); err != nil || p == nil {
		t.Errorf("allowed model: %v", err)
	}
	if _, err := f("c"); !errors.Is(err, ingest.ErrUnknownModel) {
		t.Errorf("other model: %v", err)
	}
}

// A local OpenAI-compatible server (OPENAI_BASE_URL without a key) works
// without inventing a key; without either the request names the missing key.
func TestBuiltinLocalOpenAIServer(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	env := map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}
	local := ingest.Builtin(ingest.BuiltinConfig{Getenv: func(k string) string { return env[k] }})
	for _, name := range []string{"openai", "openai-responses"} {
		if p, err := local[name]("llama3.2"); err != nil || p == nil {
			t.Fatalf("%s with only a base URL: %v", name, err)
		}
	}
	none := ingest.Builtin(ingest.BuiltinConfig{Getenv: func(string) string { return "" }})
	if _, err := none["openai"]("gpt-4.1-mini"); !errors.Is(err, ingest.ErrMissingAPIKey) {
		t.Fatalf("no key, no base URL: %v", err)
	}
}
