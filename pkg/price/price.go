package price

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/llmworker/llmworker/internal/leaf/tablefile"
	"github.com/llmworker/llmworker/pkg/events"
)

// Price is what a model's tokens cost, per million tokens.
type Price struct {
	// Input is the price of input tokens read neither from nor into the
	// provider's prompt cache.
	Input float64
	// CachedInput is the price of input tokens read from the cache
	// (cache_read_input_tokens).
	CachedInput float64
	// CacheCreation is the price of input tokens written into the cache
	// (cache_creation_input_tokens).
	CacheCreation float64
	// Output is the price of output tokens, reasoning tokens included.
	Output float64
	// InputIncludesCached says that the provider's input_tokens count the
	// cached ones too (see Split).
	InputIncludesCached bool
}

// Table is a price table. The zero value and nil price nothing.
type Table struct {
	// Currency names the unit of the prices (informative).
	Currency string
	models   map[string]Price
}

// Lookup returns the price of model (its exact provider:model string).
func (t *Table) Lookup(model string) (Price, bool) {
	if t == nil {
		return Price{}, false
	}
	p, ok := t.models[model]
	return p, ok
}

// Len is the number of models with a price.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.models)
}

// Table returns t itself: a fixed table is a Source.
func (t *Table) Table() *Table { return t }

// Source hands out the price table in force; *Table and *File are
// Sources.
type Source interface {
	Table() *Table
}

// Cost is what u cost at model's price, in the table's currency; ok is
// false when the table has no price for model.
func (t *Table) Cost(model string, u events.UsageEvent) (cost float64, ok bool) {
	p, ok := t.Lookup(model)
	if !ok {
		return 0, false
	}
	return p.Cost(SplitWith(u, p.InputIncludesCached)), true
}

// Cost is what tokens cost at p.
func (p Price) Cost(tk Tokens) float64 {
	return (float64(tk.Input)*p.Input + float64(tk.CacheRead)*p.CachedInput +
		float64(tk.CacheCreation)*p.CacheCreation + float64(tk.Output)*p.Output) / 1e6
}

// file is a price table as written.
type file struct {
	Currency string            `json:"currency" yaml:"currency"`
	Models   map[string]*entry `json:"models" yaml:"models"`
}

type entry struct {
	Input               *float64 `json:"input" yaml:"input"`
	CachedInput         *float64 `json:"cached_input" yaml:"cached_input"`
	CacheCreation       *float64 `json:"cache_creation" yaml:"cache_creation"`
	Output              *float64 `json:"output" yaml:"output"`
	InputIncludesCached *bool    `json:"input_includes_cached" yaml:"input_includes_cached"`
}

// Parse reads a price table: JSON, or YAML when yamlForm (see the
// package documentation). Errors match ErrInvalid and name the model and
// the field.
func Parse(data []byte, yamlForm bool) (*Table, error) {
	var f file
	if err := tablefile.Decode(data, yamlForm, &f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(f.Models) == 0 {
		return nil, fmt.Errorf("%w: no models (a table is {\"models\": {\"provider:model\": {\"input\": …, \"output\": …}}})", ErrInvalid)
	}
	t := &Table{Currency: f.Currency, models: make(map[string]Price, len(f.Models))}
	for model, e := range f.Models {
		if p, m, ok := strings.Cut(model, ":"); !ok || p == "" || m == "" {
			return nil, fmt.Errorf("%w: model %q must be provider:model, as a turn request names it (e.g. anthropic:claude-sonnet-4-5)", ErrInvalid, model)
		}
		if e == nil {
			return nil, fmt.Errorf("%w: models[%q] has no prices", ErrInvalid, model)
		}
		p, err := e.price(model)
		if err != nil {
			return nil, err
		}
		t.models[model] = p
	}
	return t, nil
}

func (e *entry) price(model string) (Price, error) {
	get := func(field string, v *float64, def *float64) (float64, error) {
		if v == nil {
			v = def
		}
		if v == nil {
			return 0, fmt.Errorf("%w: models[%q].%s is required (the price of a million tokens; 0 for free)", ErrInvalid, model, field)
		}
		if *v < 0 || math.IsInf(*v, 0) || math.IsNaN(*v) {
			return 0, fmt.Errorf("%w: models[%q].%s must be a finite number ≥ 0, got %v", ErrInvalid, model, field, *v)
		}
		return *v, nil
	}
	var p Price
	var err error
	if p.Input, err = get("input", e.Input, nil); err != nil {
		return p, err
	}
	if p.Output, err = get("output", e.Output, nil); err != nil {
		return p, err
	}
	if p.CachedInput, err = get("cached_input", e.CachedInput, e.Input); err != nil {
		return p, err
	}
	if p.CacheCreation, err = get("cache_creation", e.CacheCreation, e.Input); err != nil {
		return p, err
	}
	p.InputIncludesCached = includesCached(model)
	if e.InputIncludesCached != nil {
		p.InputIncludesCached = *e.InputIncludesCached
	}
	return p, nil
}

// Load reads the price table file path: YAML when its name ends in .yaml
// or .yml, else JSON. Errors name the file.
func Load(path string) (*Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	ext := strings.ToLower(filepath.Ext(path))
	t, err := Parse(b, ext == ".yaml" || ext == ".yml")
	if err != nil {
		return nil, fmt.Errorf("price table %s: %w", path, err)
	}
	return t, nil
}

// Split is Split of package level, but with the rule of model's price
// when the table has one (its input_includes_cached).
func (t *Table) Split(model string, u events.UsageEvent) Tokens {
	if p, ok := t.Lookup(model); ok {
		return SplitWith(u, p.InputIncludesCached)
	}
	return Split(model, u)
}
