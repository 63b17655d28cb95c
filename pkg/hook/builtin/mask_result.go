package builtin

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// DefaultMask is the replacement text of MaskResult.
const DefaultMask = "[REDACTED]"

// MaskResult replaces every match of its rules in the content of tool
// results (after_tool_call); a changed result replaces the original.
type MaskResult struct {
	// Presets name rule sets: "emails" (e-mail addresses) and "secrets"
	// (API keys of common providers, bearer tokens, private key blocks,
	// and password/secret/token/api_key assignments, whose name is kept).
	Presets []string `yaml:"presets,omitempty"`
	// Patterns are regular expressions, each with its own replacement or
	// Replacement.
	Patterns []MaskPattern `yaml:"patterns,omitempty"`
	// Replacement of presets and of patterns without one ("" = DefaultMask).
	Replacement string `yaml:"replacement,omitempty"`
}

// MaskPattern is one masking rule. In YAML it is either the regular
// expression alone or {regex, replacement}.
type MaskPattern struct {
	Regex string `yaml:"regex"`
	// Replacement may use $1 for submatches; "" = MaskResult.Replacement.
	Replacement string `yaml:"replacement,omitempty"`
}

// UnmarshalYAML accepts a bare regular expression as well as the mapping
// (yaml.v3 calls it with its decoder).
func (p *MaskPattern) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if unmarshal(&s) == nil {
		*p = MaskPattern{Regex: s}
		return nil
	}
	type plain MaskPattern
	return unmarshal((*plain)(p))
}

func (MaskResult) Type() string            { return "mask_result" }
func (MaskResult) Event() events.HookEvent { return events.HookAfterToolCall }

// Validate checks presets and patterns.
func (c MaskResult) Validate() error {
	_, err := c.rules()
	return err
}

// maskRule replaces every match of re with repl.
type maskRule struct {
	re   *regexp.Regexp
	repl string
}

func (c MaskResult) rules() ([]maskRule, error) {
	repl := c.Replacement
	if repl == "" {
		repl = DefaultMask
	}
	lit := strings.ReplaceAll(repl, "$", "$$")
	var rules []maskRule
	for i, name := range c.Presets {
		rs, ok := maskPreset(name, lit)
		if !ok {
			return nil, fieldErr(fmt.Sprintf("presets[%d]", i), "unknown preset %q (emails, secrets)", name)
		}
		rules = append(rules, rs...)
	}
	for i, p := range c.Patterns {
		field := fmt.Sprintf("patterns[%d].regex", i)
		if p.Regex == "" {
			return nil, fieldErr(field, "is required")
		}
		re, err := regexp.Compile(p.Regex)
		if err != nil {
			return nil, fieldErr(field, "is not a valid regular expression: %v", err)
		}
		r := lit
		if p.Replacement != "" {
			r = p.Replacement
		}
		rules = append(rules, maskRule{re, r})
	}
	if len(rules) == 0 {
		return nil, fieldErr("", "needs presets or patterns")
	}
	return rules, nil
}

// maskPreset returns the rules of a named preset replacing with lit (a
// literal replacement, "$" escaped).
func maskPreset(name, lit string) ([]maskRule, bool) {
	switch name {
	case "emails":
		return []maskRule{{regexp.MustCompile(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}`), lit}}, true
	case "secrets":
		return []maskRule{
			{regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`), lit},
			{regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), lit},
			{regexp.MustCompile(`\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}`), lit},
			{regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36,}\b`), lit},
			{regexp.MustCompile(`\bxox[abpors]-[A-Za-z0-9\-]{10,}`), lit},
			{regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}\b`), lit},
			{regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9._~+/=\-]{16,}`), "${1}" + lit},
			{regexp.MustCompile(`(?i)\b((?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token|token)"?\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,;]+)`), "${1}" + lit},
		}, true
	}
	return nil, false
}

// Hook returns the hook.
func (c MaskResult) Hook() (hook.AfterToolCallHook, error) {
	rules, err := c.rules()
	if err != nil {
		return nil, err
	}
	return hook.AfterToolCallFunc(func(_ context.Context, in *hook.ToolResultInput) (hook.AfterToolCallResult, error) {
		s := in.Result.Content
		for _, r := range rules {
			s = r.re.ReplaceAllString(s, r.repl)
		}
		in.Result.Content = s
		return hook.AfterToolCallResult{}, nil
	}), nil
}

func (c MaskResult) build() (any, error) { return c.Hook() }
