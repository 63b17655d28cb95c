package agents

import (
	"bytes"
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/llmworker/llmworker/pkg/events"
)

// ParseDefinition reads a definition from JSON or YAML (a document that
// starts with '{' is JSON), refusing fields a definition does not have,
// and validates it. Errors match events.ErrInvalid and name the field.
func ParseDefinition(data []byte) (events.AgentDefinition, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '{' {
		return events.DecodeAgentDefinition(data)
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return events.AgentDefinition{}, &events.FieldError{Problem: "not JSON or YAML: " + err.Error()}
	}
	if _, ok := v.(map[string]any); !ok {
		return events.AgentDefinition{}, &events.FieldError{Problem: fmt.Sprintf("want a mapping of the definition's fields, got %T", v)}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return events.AgentDefinition{}, &events.FieldError{Problem: "cannot be read as JSON: " + err.Error()}
	}
	return events.DecodeAgentDefinition(b)
}
