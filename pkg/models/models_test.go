package models_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/models"
)

// The expected numbers are the providers' model pages cited in
// shipped.go.
func TestShippedLookup(t *testing.T) {
	claude45 := llm.ModelLimits{ContextWindow: 200_000, MaxOutputTokens: 64_000}
	for _, tc := range []struct {
		model string
		want  llm.ModelLimits
	}{
		{"anthropic:claude-sonnet-4-5", claude45},
		{"anthropic:claude-sonnet-4-5-20250929", claude45},
		{"bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0", claude45},
		{"bedrock:global.anthropic.claude-sonnet-4-5-20250929-v1:0", claude45},
		{"bedrock:arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0", claude45},
		{"vertex-anthropic:claude-sonnet-4-5@20250929", claude45},
		{"anthropic:claude-opus-4-1-20250805", lim(200_000, 32_000)},
		{"anthropic:claude-3-7-sonnet-latest", lim(200_000, 64_000)},
		{"anthropic:claude-opus-4-6", lim(1_000_000, 128_000)},
		{"openai:gpt-4o", lim(128_000, 16_384)},
		{"openai:gpt-4o-2024-08-06", lim(128_000, 16_384)},
		{"openai-responses:gpt-4o-mini", lim(128_000, 16_384)},
		{"openai:gpt-4.1-mini", lim(1_047_576, 32_768)},
		{"openai-responses:gpt-5", lim(400_000, 128_000)},
		{"openai:o3-2025-04-16", lim(200_000, 100_000)},
		{"openai:o4-mini", lim(200_000, 100_000)},
		{"gemini:gemini-2.5-flash", lim(1_048_576, 65_536)},
		{"gemini:gemini-2.5-flash-lite", lim(1_048_576, 65_536)},
		{"vertex:gemini-2.5-pro", lim(1_048_576, 65_536)},
		{"gemini:gemini-2.0-flash-001", lim(1_048_576, 8_192)},
		{"gemini:gemini-3-pro-preview", lim(1_048_576, 65_536)},
		{"replay:anthropic", lim(32_768, 4_096)},
		{"replay:anything", lim(32_768, 4_096)},
	} {
		got, ok := models.Default().Lookup(tc.model)
		if !ok || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.model, got, ok, tc.want)
		}
	}
	// Unknown: an operator's deployment, a variant the table does not
	// name, a local model, no provider.
	for _, m := range []string{"azure:gpt-4o", "azure-responses:my-deployment", "openai:gpt-4o-audio-preview-x", "openai:llama3.1:8b", "gemini:gemini-2.5-flash-image", "gpt-4o", "bedrock:amazon.nova-pro-v1:0", ""} {
		if l, ok := models.Default().Lookup(m); ok {
			t.Errorf("%s: %+v, want unknown", m, l)
		}
	}
	var nilTable *models.Table
	if _, ok := nilTable.Lookup("openai:gpt-4o"); !ok {
		t.Error("a nil table does not hold the shipped one")
	}
}

func TestFileOverridesShipped(t *testing.T) {
	tb, err := models.Parse([]byte(`{"models":{
	  "anthropic:claude-sonnet-4-5": {"context_window": 1000000, "max_output_tokens": 64000},
	  "azure:my-4o": {"context_window": 128000, "max_output_tokens": 16384},
	  "replay:openai": {"context_window": 8000, "max_output_tokens": 1000}
	}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model string
		want  llm.ModelLimits
	}{
		{"anthropic:claude-sonnet-4-5", lim(1_000_000, 64_000)},
		// The file's key is matched by the same name rule.
		{"anthropic:claude-sonnet-4-5-20250929", lim(1_000_000, 64_000)},
		{"azure:my-4o", lim(128_000, 16_384)},
		{"replay:openai", lim(8_000, 1_000)},
		// The rest of the shipped table stays.
		{"replay:anthropic", models.Replay},
		{"openai:gpt-4o", lim(128_000, 16_384)},
		// Another provider's id of the family is not the file's key.
		{"bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0", lim(200_000, 64_000)},
	} {
		if got, ok := tb.Lookup(tc.model); !ok || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.model, got, ok, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		yaml       bool
		want       string
	}{
		{"not json", `{"models":`, false, "unexpected EOF"},
		{"two values", `{"models":{"openai:a":{"context_window":2,"max_output_tokens":1}}} {}`, false, "more than one JSON value"},
		{"unknown field", `{"models":{"openai:a":{"context_window":2,"max_output_tokens":1,"window":3}}}`, false, `unknown field "window"`},
		{"unknown top field", `{"models":{"openai:a":{"context_window":2,"max_output_tokens":1}},"currency":"USD"}`, false, `unknown field "currency"`},
		{"no models", `{}`, false, "no models"},
		{"model without provider", `{"models":{"gpt-4.1":{"context_window":2,"max_output_tokens":1}}}`, false, `model "gpt-4.1" must be provider:model`},
		{"missing window", `{"models":{"openai:a":{"max_output_tokens":1}}}`, false, `models["openai:a"].context_window is required`},
		{"missing output", `{"models":{"openai:a":{"context_window":1}}}`, false, `models["openai:a"].max_output_tokens is required`},
		{"negative", `{"models":{"openai:a":{"context_window":100,"max_output_tokens":-5}}}`, false, `models["openai:a"].max_output_tokens must be a number of tokens > 0, got -5`},
		{"zero window", `{"models":{"openai:a":{"context_window":0,"max_output_tokens":1}}}`, false, `models["openai:a"].context_window must be a number of tokens > 0, got 0`},
		{"window = output", `{"models":{"openai:a":{"context_window":4096,"max_output_tokens":4096}}}`, false, `models["openai:a"].context_window (4096) must be above max_output_tokens (4096)`},
		{"window < output", `{"models":{"openai:a":{"context_window":1000,"max_output_tokens":4096}}}`, false, `models["openai:a"].context_window (1000) must be above max_output_tokens (4096)`},
		{"fraction", `{"models":{"openai:a":{"context_window":1000.5,"max_output_tokens":1}}}`, false, "context_window"},
		{"null entry", `{"models":{"openai:a":null}}`, false, `models["openai:a"] has no limits`},
		{"yaml unknown field", "models:\n  openai:a:\n    context_window: 10\n    max_output_tokens: 1\n    max_output: 2\n", true, "field max_output not found"},
		{"yaml window ≤ output", "models:\n  openai:a:\n    context_window: 10\n    max_output_tokens: 10\n", true, `models["openai:a"].context_window (10) must be above max_output_tokens (10)`},
		{"yaml not yaml", "models: [", true, "yaml"},
	} {
		_, err := models.Parse([]byte(tc.data), tc.yaml)
		if !errors.Is(err, models.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestLoadAndReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "models.yaml")
	write := func(s string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		_ = os.Chtimes(path, at, at)
	}
	now := time.Now()
	write("models:\n  azure:a:\n    context_window: 1000\n    max_output_tokens: 100\n", now)
	f, err := models.NewFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lookup := llm.LimitsFunc(f.Lookup)
	if l, ok := lookup("azure:a"); !ok || l != (llm.ModelLimits{ContextWindow: 1000, MaxOutputTokens: 100}) {
		t.Fatalf("limits %+v %v", l, ok)
	}
	// A bad file is refused at reload; the last good table stays.
	write("models:\n  azure:a:\n    context_window: 100\n    max_output_tokens: 100\n", now.Add(time.Minute))
	if changed, err := f.Reload(); changed || !errors.Is(err, models.ErrInvalid) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `models["azure:a"].context_window`) {
		t.Fatalf("reload of a bad file: %v %v", changed, err)
	}
	if l, _ := lookup("azure:a"); l.ContextWindow != 1000 {
		t.Fatalf("limits after a bad reload %+v", l)
	}
	write("models:\n  azure:a:\n    context_window: 2000\n    max_output_tokens: 100\n", now.Add(2*time.Minute))
	if changed, err := f.Reload(); !changed || err != nil {
		t.Fatalf("reload: %v %v", changed, err)
	}
	if l, _ := lookup("azure:a"); l.ContextWindow != 2000 {
		t.Fatalf("limits after reload %+v", l)
	}
	if changed, err := f.Reload(); changed || err != nil {
		t.Fatalf("reload of an unchanged file: %v %v", changed, err)
	}
	// Refused at start.
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"models":{"openai:x":{"context_window":-1,"max_output_tokens":1}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := models.NewFile(bad); !errors.Is(err, models.ErrInvalid) || !strings.Contains(err.Error(), "bad.json") {
		t.Fatalf("bad file at start: %v", err)
	}
	if _, err := models.NewFile(filepath.Join(dir, "missing.json")); err == nil {
		t.Fatal("a missing file was read")
	}
}

// Every shipped entry keeps the rule a file is held to.
func TestShippedIsValid(t *testing.T) {
	for _, m := range []string{"anthropic:claude-3-haiku", "openai:gpt-3.5-turbo", "openai:o1-mini", "openai:gpt-5-chat-latest"} {
		l, ok := models.Default().Lookup(m)
		if !ok || l.ContextWindow <= l.MaxOutputTokens || l.MaxOutputTokens <= 0 {
			t.Errorf("%s: %+v %v", m, l, ok)
		}
	}
}

func lim(window, out int64) llm.ModelLimits {
	return llm.ModelLimits{ContextWindow: window, MaxOutputTokens: out}
}
