package builtin

import (
	"encoding/json"
	"fmt"
)

// jsonValue marshals a config value to JSON. Values decoded from YAML may
// hold maps with non-string keys (map[any]any), which encoding/json
// refuses; their keys are formatted as strings first.
func jsonValue(v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return nil, fmt.Errorf("invalid JSON")
		}
		return raw, nil
	}
	return json.Marshal(stringKeys(v))
}

func stringKeys(v any) any {
	switch t := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[fmt.Sprint(k)] = stringKeys(x)
		}
		return m
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = stringKeys(x)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, x := range t {
			s[i] = stringKeys(x)
		}
		return s
	}
	return v
}
