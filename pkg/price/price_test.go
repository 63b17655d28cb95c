package price_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/price"
)

func u(in, read, write, out int64) events.UsageEvent {
	return events.UsageEvent{InputTokens: &in, CacheReadInputTokens: &read, CacheCreationInputTokens: &write, OutputTokens: &out}
}

const table = `{"currency":"USD","models":{
  "anthropic:claude-x": {"input": 3, "cached_input": 0.3, "cache_creation": 3.75, "output": 15},
  "openai:gpt-x": {"input": 2, "cached_input": 0.5, "output": 8},
  "replay:inclusive": {"input": 1, "output": 1, "input_includes_cached": true}
}}`

// Costs by hand, per million tokens. Anthropic counts cache reads and
// writes apart from input_tokens; OpenAI counts them in it.
func TestCost(t *testing.T) {
	tb, err := price.Parse([]byte(table), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model string
		u     events.UsageEvent
		want  float64
	}{
		// 100·3 + 2000·0.3 + 1000·3.75 + 50·15 = 300+600+3750+750 = 5400
		{"anthropic:claude-x", u(100, 2000, 1000, 50), 0.0054},
		// (3000−2000)·2 + 2000·0.5 + 100·8 = 2000+1000+800 = 3800
		{"openai:gpt-x", u(3000, 2000, 0, 100), 0.0038},
		// input_includes_cached: 400 input tokens of which 300 cache writes,
		// priced as input when cache_creation is not given: 100·1 + 300·1 + 10·1 = 410
		{"replay:inclusive", u(400, 0, 300, 10), 0.00041},
	} {
		got, ok := tb.Cost(tc.model, tc.u)
		if !ok || got-tc.want > 1e-15 || tc.want-got > 1e-15 {
			t.Errorf("%s: cost %v %v, want %v", tc.model, got, ok, tc.want)
		}
	}
	if _, ok := tb.Cost("openai:other", u(1, 0, 0, 1)); ok {
		t.Error("an unpriced model has a cost")
	}
	// Tokens: every input token once, cached or not, plus output.
	if got := price.Split("openai:gpt-x", u(3000, 2000, 0, 100)).Total(); got != 3100 {
		t.Errorf("openai total %d, want 3100", got)
	}
	if got := price.Split("anthropic:claude-x", u(100, 2000, 1000, 50)).Total(); got != 3150 {
		t.Errorf("anthropic total %d, want 3150", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		yaml       bool
		want       string
	}{
		{"not json", `{"models":`, false, "unexpected EOF"},
		{"unknown field", `{"models":{"openai:a":{"input":1,"output":1,"cached":1}}}`, false, `unknown field "cached"`},
		{"no models", `{"currency":"USD"}`, false, "no models"},
		{"model without provider", `{"models":{"gpt-4.1":{"input":1,"output":1}}}`, false, `model "gpt-4.1" must be provider:model`},
		{"missing output", `{"models":{"openai:a":{"input":1}}}`, false, `models["openai:a"].output is required`},
		{"negative", `{"models":{"openai:a":{"input":1,"output":1,"cached_input":-0.5}}}`, false, `models["openai:a"].cached_input must be a finite number ≥ 0, got -0.5`},
		{"null entry", `{"models":{"openai:a":null}}`, false, `models["openai:a"] has no prices`},
		{"yaml unknown field", "models:\n  openai:a:\n    input: 1\n    output: 1\n    outptu: 2\n", true, "field outptu not found"},
		{"yaml missing input", "models:\n  openai:a:\n    output: 1\n", true, `models["openai:a"].input is required`},
	} {
		_, err := price.Parse([]byte(tc.data), tc.yaml)
		if !errors.Is(err, price.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestLoadAndReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "prices.yaml")
	if err := os.WriteFile(path, []byte("models:\n  openai:a:\n    input: 1\n    output: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := price.NewFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := f.Table().Lookup("openai:a"); !ok || p.Input != 1 || p.Output != 2 || p.CachedInput != 1 || !p.InputIncludesCached {
		t.Fatalf("price %+v %v", p, ok)
	}
	// A broken file leaves the table in force and says why.
	later := time.Now().Add(time.Minute)
	if err := os.WriteFile(path, []byte("models:\n  openai:a:\n    input: -1\n    output: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(path, later, later)
	if changed, err := f.Reload(); changed || !errors.Is(err, price.ErrInvalid) || !strings.Contains(err.Error(), path) {
		t.Fatalf("reload of a broken file: %v %v", changed, err)
	}
	if p, _ := f.Table().Lookup("openai:a"); p.Input != 1 {
		t.Fatalf("price after a broken reload %+v", p)
	}
	if err := os.WriteFile(path, []byte("models:\n  openai:a:\n    input: 4\n    output: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	later = later.Add(time.Minute)
	_ = os.Chtimes(path, later, later)
	if changed, err := f.Reload(); !changed || err != nil {
		t.Fatalf("reload: %v %v", changed, err)
	}
	if p, _ := f.Table().Lookup("openai:a"); p.Input != 4 {
		t.Fatalf("price after reload %+v", p)
	}
	if _, err := price.Load(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Fatalf("missing file: %v", err)
	}
}
