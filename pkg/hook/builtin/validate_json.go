package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/tool"
)

// DefaultFixMessage is the message ValidateJSON sends by default.
const DefaultFixMessage = "Your final answer is not valid: {{error}}. Reply again with only the corrected JSON, without any other text."

// ValidateJSON checks the last assistant message as JSON (and against a
// schema) at on_turn_end; when it does not pass it answers
// continue_with_messages with a user message saying what is wrong, so the
// model fixes it (the worker bounds the retries by max_turn_end_retries).
type ValidateJSON struct {
	// Schema, if set, is a JSON Schema the answer must satisfy (a
	// json.RawMessage, or a value decoded from YAML/JSON); otherwise any
	// JSON value passes.
	Schema any `yaml:"schema,omitempty"`
	// Message asks the model to fix its answer; {{error}} is replaced by
	// what is wrong. "" = DefaultFixMessage.
	Message string `yaml:"message,omitempty"`
	// KeepCodeFence validates the text as is; by default one surrounding
	// ``` or ```json fence is removed first (models like to add it).
	KeepCodeFence bool `yaml:"keep_code_fence,omitempty"`
}

func (ValidateJSON) Type() string            { return "validate_json" }
func (ValidateJSON) Event() events.HookEvent { return events.HookOnTurnEnd }

// Validate compiles the schema.
func (c ValidateJSON) Validate() error {
	_, err := c.validator()
	return err
}

func (c ValidateJSON) validator() (*tool.Validator, error) {
	if c.Schema == nil {
		return nil, nil
	}
	b, err := jsonValue(c.Schema)
	if err != nil {
		return nil, fieldErr("schema", "is not JSON: %v", err)
	}
	v, err := tool.NewValidator(b)
	if err != nil {
		return nil, fieldErr("schema", "%v", err)
	}
	return v, nil
}

// Hook returns the hook.
func (c ValidateJSON) Hook() (hook.TurnEndHook, error) {
	v, err := c.validator()
	if err != nil {
		return nil, err
	}
	msg := c.Message
	if msg == "" {
		msg = DefaultFixMessage
	}
	return hook.TurnEndFunc(func(_ context.Context, in *hook.TurnEndInput) (hook.TurnEndResult, error) {
		text, ok := lastAssistantText(in.Messages)
		if !ok {
			return hook.TurnEndResult{}, nil
		}
		if !c.KeepCodeFence {
			text = stripFence(text)
		}
		var problem string
		if !json.Valid([]byte(text)) {
			problem = "it is not JSON (" + jsonSyntaxProblem(text) + ")"
		} else if v != nil {
			if err := v.Validate(json.RawMessage(text)); err != nil {
				problem = "it does not match the JSON Schema: " + err.Error()
			}
		}
		if problem == "" {
			return hook.TurnEndResult{}, nil
		}
		fix := strings.ReplaceAll(msg, "{{error}}", problem)
		return hook.TurnEndResult{Action: hook.TurnContinueWithMessages, Reason: problem,
			Messages: []events.Message{events.UserText(fix)}}, nil
	}), nil
}

func (c ValidateJSON) build() (any, error) { return c.Hook() }

func lastAssistantText(msgs []events.Message) (string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == events.RoleAssistant {
			return msgs[i].Text(), true
		}
	}
	return "", false
}

var fenceRE = regexp.MustCompile("(?s)^\\s*```[A-Za-z0-9_-]*[ \\t]*\\r?\\n(.*?)\\r?\\n?```\\s*$")

func stripFence(s string) string {
	if m := fenceRE.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return s
}

func jsonSyntaxProblem(s string) string {
	var v any
	err := json.Unmarshal([]byte(s), &v)
	var se *json.SyntaxError
	switch {
	case strings.TrimSpace(s) == "":
		return "the answer is empty"
	case errors.As(err, &se):
		return fmt.Sprintf("%v at byte %d", se, se.Offset)
	case err != nil:
		return err.Error()
	}
	return "invalid"
}
