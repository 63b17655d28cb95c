package builtin

import (
	"context"
	"fmt"
	"strconv"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// LimitToolCalls allows at most Max calls per turn (of the tools the
// hook's matcher selects) and skips the calls beyond it with Reason
// (default "tool call limit of N per turn reached"). The count lives in the
// turn variable "tool_calls:<Name>", so it survives pauses and replicas.
type LimitToolCalls struct {
	Max    int    `yaml:"max"`
	Reason string `yaml:"reason,omitempty"`
	// Name keys the counter; hookbridge sets the hook's name. "" = "limit".
	Name string `yaml:"-"`
}

func (LimitToolCalls) Type() string            { return "limit_tool_calls" }
func (LimitToolCalls) Event() events.HookEvent { return events.HookBeforeToolCall }

// Validate checks Max.
func (c LimitToolCalls) Validate() error {
	if c.Max < 0 {
		return fieldErr("max", "must not be negative")
	}
	return nil
}

// VarKey is the turn variable that counts the calls.
func (c LimitToolCalls) VarKey() string {
	name := c.Name
	if name == "" {
		name = "limit"
	}
	return "tool_calls:" + name
}

// Hook returns the hook.
func (c LimitToolCalls) Hook() (hook.BeforeToolCallHook, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	key := c.VarKey()
	return hook.BeforeToolCallFunc(func(_ context.Context, in *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
		if in.Turn == nil {
			in.Turn = &hook.Turn{}
		}
		n, _ := strconv.Atoi(in.Turn.Vars.Get(key))
		if n >= c.Max {
			r := c.Reason
			if r == "" {
				r = fmt.Sprintf("tool call limit of %d per turn reached", c.Max)
			}
			return hook.BeforeToolCallResult{Action: hook.ToolSkip, Reason: r}, nil
		}
		if in.Turn.Vars == nil {
			in.Turn.Vars = hook.Variables{}
		}
		in.Turn.Vars[key] = strconv.Itoa(n + 1)
		return hook.BeforeToolCallResult{}, nil
	}), nil
}

func (c LimitToolCalls) build() (any, error) { return c.Hook() }
