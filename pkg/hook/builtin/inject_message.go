package builtin

import (
	"context"
	"regexp"
	"strconv"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
)

// InjectMessage adds a message to the context sent to the model
// (on_message_send), e.g. "Current date: {{date}}". It is added to each
// request, not to the transcript.
type InjectMessage struct {
	// Text may contain {{date}} (2006-01-02), {{time}} (RFC 3339),
	// {{weekday}}, {{turn_id}}, {{session_id}}, {{step}} and {{var:NAME}}
	// (a turn variable); nothing else is expanded.
	Text string `yaml:"text"`
	// Role of the message: user (default) or assistant.
	Role events.Role `yaml:"role,omitempty"`
	// Position is start (default: the message goes first) or end.
	Position string `yaml:"position,omitempty"`
	// Timezone is an IANA zone name for the clock ("" = local time).
	Timezone string `yaml:"timezone,omitempty"`
	// Now is the clock (nil = time.Now); for tests.
	Now func() time.Time `yaml:"-"`
}

func (InjectMessage) Type() string            { return "inject_message" }
func (InjectMessage) Event() events.HookEvent { return events.HookOnMessageSend }

// Validate checks text, role, position and time zone.
func (c InjectMessage) Validate() error {
	_, err := c.location()
	return err
}

func (c InjectMessage) location() (*time.Location, error) {
	switch {
	case c.Text == "":
		return nil, fieldErr("text", "is required")
	case c.Role != "" && c.Role != events.RoleUser && c.Role != events.RoleAssistant:
		return nil, fieldErr("role", "must be user or assistant, got %q", c.Role)
	case c.Position != "" && c.Position != "start" && c.Position != "end":
		return nil, fieldErr("position", "must be start or end, got %q", c.Position)
	case c.Timezone == "":
		return nil, nil
	}
	loc, err := time.LoadLocation(c.Timezone)
	if err != nil {
		return nil, fieldErr("timezone", "unknown time zone %q", c.Timezone)
	}
	return loc, nil
}

// Hook returns the hook.
func (c InjectMessage) Hook() (hook.MessageSendHook, error) {
	loc, err := c.location()
	if err != nil {
		return nil, err
	}
	role, now := c.Role, c.Now
	if role == "" {
		role = events.RoleUser
	}
	if now == nil {
		now = time.Now
	}
	atEnd := c.Position == "end"
	return hook.MessageSendFunc(func(_ context.Context, in *hook.MessageSendInput) (hook.MessageSendResult, error) {
		t := now()
		if loc != nil {
			t = t.In(loc)
		}
		msg := events.Message{Role: role, Content: []events.Part{events.TextPart(expand(c.Text, t, in.Turn))}}
		msgs := make([]events.Message, 0, len(in.Messages)+1)
		if atEnd {
			msgs = append(append(msgs, in.Messages...), msg)
		} else {
			msgs = append(append(msgs, msg), in.Messages...)
		}
		in.Messages = msgs
		return hook.MessageSendResult{}, nil
	}), nil
}

func (c InjectMessage) build() (any, error) { return c.Hook() }

var placeholderRE = regexp.MustCompile(`\{\{\s*([a-z_]+)(?::([^}\s]+))?\s*\}\}`)

func expand(text string, now time.Time, t *hook.Turn) string {
	if t == nil {
		t = &hook.Turn{}
	}
	return placeholderRE.ReplaceAllStringFunc(text, func(m string) string {
		sub := placeholderRE.FindStringSubmatch(m)
		switch sub[1] {
		case "date":
			return now.Format("2006-01-02")
		case "time":
			return now.Format(time.RFC3339)
		case "weekday":
			return now.Weekday().String()
		case "turn_id":
			return t.ID
		case "session_id":
			return t.SessionID
		case "step":
			return strconv.Itoa(t.Step)
		case "var":
			return t.Vars.Get(sub[2])
		}
		return m
	})
}
