package builtin

import (
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// RequireApproval pauses the turn before every call whose tool name
// matches Pattern (before_tool_call), until a resume approves, edits or
// denies it. Reason defaults to "tool <name> needs approval".
type RequireApproval struct {
	// Pattern is a regular expression on the tool name (unanchored).
	Pattern string `yaml:"pattern"`
	Reason  string `yaml:"reason,omitempty"`
}

func (RequireApproval) Type() string            { return "require_approval" }
func (RequireApproval) Event() events.HookEvent { return events.HookBeforeToolCall }

// Matcher is Pattern: only matching calls need the hook.
func (c RequireApproval) Matcher() string { return c.Pattern }

// Validate checks Pattern.
func (c RequireApproval) Validate() error {
	_, err := compile("pattern", c.Pattern)
	return err
}

// Hook returns the hook.
func (c RequireApproval) Hook() (hook.BeforeToolCallHook, error) {
	return toolGate(c.Pattern, hook.ToolPause, c.Reason, "tool %s needs approval")
}

func (c RequireApproval) build() (any, error) { return c.Hook() }
