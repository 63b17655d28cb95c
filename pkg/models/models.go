package models

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/llmworker/llmworker/internal/leaf/tablefile"
	"github.com/llmworker/llmworker/pkg/llm"
)

// Table is a model table: the operator's entries over the shipped ones.
// The zero value and nil hold the shipped table only.
type Table struct {
	models map[string]llm.ModelLimits
}

// Default is the shipped table alone.
func Default() *Table { return &Table{} }

var _ llm.LimitsFunc = (*Table)(nil).Lookup

// Lookup returns the limits of model (provider:model): the table's
// entry for it, else for its canonical name (Canonical), else the
// shipped family's. ok is false for a model neither knows.
func (t *Table) Lookup(model string) (llm.ModelLimits, bool) {
	if t != nil {
		if l, ok := t.models[model]; ok {
			return l, true
		}
	}
	provider, name, found := strings.Cut(model, ":")
	if !found || provider == "" || name == "" {
		return llm.ModelLimits{}, false
	}
	if provider == "replay" {
		return Replay, true
	}
	canon := Canonical(provider, name)
	if t != nil && canon != name {
		if l, ok := t.models[provider+":"+canon]; ok {
			return l, true
		}
	}
	l, ok := shipped[familyOf(provider)][canon]
	return l, ok
}

// Len is the number of the operator's entries.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.models)
}

// Table returns t itself: a fixed table is a Source.
func (t *Table) Table() *Table { return t }

// Source hands out the table in force; *Table and *File are Sources.
type Source interface {
	Table() *Table
}

var (
	// bedrockRegion is the region prefix of a cross-region inference
	// profile id (us.anthropic.…, global.anthropic.…).
	bedrockRegion = regexp.MustCompile(`^(us|eu|apac|global|us-gov|jp|au|ca)\.`)
	// bedrockVersion is the version suffix of a Bedrock model id.
	bedrockVersion = regexp.MustCompile(`-v\d+(:\d+)?$`)
	// snapshot is a dated or numbered snapshot's suffix: Anthropic's
	// -20250929, OpenAI's -2024-08-06 and -0613, Gemini's -001 and
	// -preview-09-2025, and the -latest aliases.
	snapshot = regexp.MustCompile(`-(\d{8}|\d{4}-\d{2}-\d{2}|\d{4}|\d{3}|latest|preview(-\d{2}-\d{2,4})?|exp(-\d{2}-\d{2,4}|-\d{4})?)$`)
)

// Canonical is the name of a model as the table keys it: name without
// the decorations of provider's ids (a Bedrock ARN's path, inference
// profile region, vendor prefix and version; a Vertex @date) and without
// a snapshot suffix (see the package documentation).
func Canonical(provider, name string) string {
	switch provider {
	case "bedrock":
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		}
		name = bedrockRegion.ReplaceAllString(name, "")
		name = strings.TrimPrefix(name, "anthropic.")
		name = bedrockVersion.ReplaceAllString(name, "")
	case "vertex-anthropic", "vertex":
		if i := strings.IndexByte(name, '@'); i >= 0 {
			name = name[:i]
		}
	}
	return snapshot.ReplaceAllString(name, "")
}

// file is a models file as written.
type file struct {
	Models map[string]*entry `json:"models" yaml:"models"`
}

type entry struct {
	ContextWindow   *int64 `json:"context_window" yaml:"context_window"`
	MaxOutputTokens *int64 `json:"max_output_tokens" yaml:"max_output_tokens"`
}

// Parse reads a models file: JSON, or YAML when yamlForm (see the
// package documentation). Errors match ErrInvalid and name the model and
// the field.
func Parse(data []byte, yamlForm bool) (*Table, error) {
	var f file
	if err := tablefile.Decode(data, yamlForm, &f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(f.Models) == 0 {
		return nil, fmt.Errorf("%w: no models (a models file is {\"models\": {\"provider:model\": {\"context_window\": …, \"max_output_tokens\": …}}})", ErrInvalid)
	}
	t := &Table{models: make(map[string]llm.ModelLimits, len(f.Models))}
	for model, e := range f.Models {
		if p, m, ok := strings.Cut(model, ":"); !ok || p == "" || m == "" {
			return nil, fmt.Errorf("%w: model %q must be provider:model, as a turn request names it (e.g. azure:my-gpt-4o)", ErrInvalid, model)
		}
		if e == nil {
			return nil, fmt.Errorf("%w: models[%q] has no limits", ErrInvalid, model)
		}
		l, err := e.limits(model)
		if err != nil {
			return nil, err
		}
		t.models[model] = l
	}
	return t, nil
}

func (e *entry) limits(model string) (llm.ModelLimits, error) {
	get := func(field string, v *int64) (int64, error) {
		if v == nil {
			return 0, fmt.Errorf("%w: models[%q].%s is required (a number of tokens)", ErrInvalid, model, field)
		}
		if *v <= 0 {
			return 0, fmt.Errorf("%w: models[%q].%s must be a number of tokens > 0, got %d", ErrInvalid, model, field, *v)
		}
		return *v, nil
	}
	var l llm.ModelLimits
	var err error
	if l.ContextWindow, err = get("context_window", e.ContextWindow); err != nil {
		return l, err
	}
	if l.MaxOutputTokens, err = get("max_output_tokens", e.MaxOutputTokens); err != nil {
		return l, err
	}
	if l.ContextWindow <= l.MaxOutputTokens {
		return l, fmt.Errorf("%w: models[%q].context_window (%d) must be above max_output_tokens (%d): the window holds the input and the output", ErrInvalid, model, l.ContextWindow, l.MaxOutputTokens)
	}
	return l, nil
}

// Load reads the models file path: YAML when its name ends in .yaml or
// .yml, else JSON. Errors name the file.
func Load(path string) (*Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("models file: %w", err)
	}
	ext := strings.ToLower(filepath.Ext(path))
	t, err := Parse(b, ext == ".yaml" || ext == ".yml")
	if err != nil {
		return nil, fmt.Errorf("models file %s: %w", path, err)
	}
	return t, nil
}
