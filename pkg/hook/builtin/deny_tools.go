package builtin

import (
	"context"
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// DenyTools skips every call whose tool name matches Pattern
// (before_tool_call); the model reads Reason (default "tool <name> is not
// allowed") as the error result.
type DenyTools struct {
	// Pattern is a regular expression on the tool name (unanchored).
	Pattern string `yaml:"pattern"`
	Reason  string `yaml:"reason,omitempty"`
}

func (DenyTools) Type() string            { return "deny_tools" }
func (DenyTools) Event() events.HookEvent { return events.HookBeforeToolCall }

// Matcher is Pattern: only matching calls need the hook.
func (c DenyTools) Matcher() string { return c.Pattern }

// Validate checks Pattern.
func (c DenyTools) Validate() error {
	_, err := compile("pattern", c.Pattern)
	return err
}

// Hook returns the hook.
func (c DenyTools) Hook() (hook.BeforeToolCallHook, error) {
	return toolGate(c.Pattern, hook.ToolSkip, c.Reason, "tool %s is not allowed")
}

func (c DenyTools) build() (any, error) { return c.Hook() }

// toolGate is the hook of DenyTools and RequireApproval: calls of the
// tools matching pattern get action, with reason or the default naming
// the tool; other calls go on.
func toolGate(pattern string, action hook.BeforeToolCallAction, reason, defaultReason string) (hook.BeforeToolCallHook, error) {
	re, err := compile("pattern", pattern)
	if err != nil {
		return nil, err
	}
	return hook.BeforeToolCallFunc(func(_ context.Context, in *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
		if !re.MatchString(in.Call.Name) {
			return hook.BeforeToolCallResult{}, nil
		}
		r := reason
		if r == "" {
			r = fmt.Sprintf(defaultReason, in.Call.Name)
		}
		return hook.BeforeToolCallResult{Action: action, Reason: r}, nil
	}), nil
}
