package builtin

import (
	"fmt"
	"regexp"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// Config is the config of one built-in hook.
type Config interface {
	// Type is the hook's name in a config file, e.g. "deny_tools".
	Type() string
	// Event is the hook point the hook runs at.
	Event() events.HookEvent
	// Validate reports the first problem as a *FieldError.
	Validate() error
}

// Matcher is implemented by configs whose hook only acts on some tools:
// registering the hook with this matcher spares the calls of the others
// (for a remote hook, a round trip).
type Matcher interface {
	Matcher() string
}

// Types lists the built-in hooks by Type, in the order of the package doc.
var Types = []string{"deny_tools", "require_approval", "rewrite_input", "limit_tool_calls", "mask_result", "inject_message", "validate_json"}

// ConfigOf returns a new zero config of the built-in hook named typ, to
// decode a config file into; ok is false for an unknown name.
func ConfigOf(typ string) (c Config, ok bool) {
	switch typ {
	case "deny_tools":
		return &DenyTools{}, true
	case "require_approval":
		return &RequireApproval{}, true
	case "rewrite_input":
		return &RewriteInput{}, true
	case "limit_tool_calls":
		return &LimitToolCalls{}, true
	case "mask_result":
		return &MaskResult{}, true
	case "inject_message":
		return &InjectMessage{}, true
	case "validate_json":
		return &ValidateJSON{}, true
	}
	return nil, false
}

// New builds the hook of c: a hook.MessageSendHook, BeforeToolCallHook,
// AfterToolCallHook or TurnEndHook, by c.Event(). c may be a config or a
// pointer to one. Each config's Hook method gives the same typed.
func New(c Config) (any, error) {
	if b, ok := c.(builder); ok {
		return b.build()
	}
	return nil, fmt.Errorf("%w: %T is not a built-in hook config", ErrInvalidConfig, c)
}

// builder is implemented by every config of this package.
type builder interface{ build() (any, error) }

// AddTo registers the hook of c in chain at its hook point. An empty
// o.Matcher takes the config's Matcher, if it has one.
func AddTo(chain *hook.Chain, c Config, o hook.Options) error {
	h, err := New(c)
	if err != nil {
		return err
	}
	if m, ok := c.(Matcher); ok && o.Matcher == "" {
		o.Matcher = m.Matcher()
	}
	switch h := h.(type) {
	case hook.MessageSendHook:
		return chain.OnMessageSend(h, o)
	case hook.BeforeToolCallHook:
		return chain.BeforeToolCall(h, o)
	case hook.AfterToolCallHook:
		return chain.AfterToolCall(h, o)
	case hook.TurnEndHook:
		return chain.OnTurnEnd(h, o)
	}
	return fmt.Errorf("%w: %T has no hook point", ErrInvalidConfig, h)
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// compile checks a regular expression field.
func compile(field, pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, fieldErr(field, "is required: a regular expression on the tool name")
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fieldErr(field, "is not a valid regular expression: %v", err)
	}
	return re, nil
}
