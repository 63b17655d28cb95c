package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Validator is implemented by payloads that have required fields or
// enumerations. Decode calls Validate after unmarshalling.
type Validator interface {
	Validate() error
}

// Decode unmarshals a JSON payload into a T and validates it. Unknown fields
// are ignored (DESIGN.md §2). Every error matches ErrInvalid; where a field is
// to blame it is a *FieldError naming the field.
func Decode[T any](data []byte) (T, error) {
	var v T
	err := Unmarshal(data, &v)
	return v, err
}

// Unmarshal is Decode for an existing value.
func Unmarshal(data []byte, v any) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return &FieldError{Problem: "empty body, want a JSON object"}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return jsonError(err)
	}
	if val, ok := v.(Validator); ok {
		return val.Validate()
	}
	return nil
}

// jsonError turns encoding/json errors into FieldErrors that name the field.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			return &FieldError{Problem: fmt.Sprintf("must be %s, got JSON %s", goTypeName(te.Type.String()), te.Value)}
		}
		return &FieldError{Field: field, Problem: fmt.Sprintf("must be %s, got JSON %s", goTypeName(te.Type.String()), te.Value)}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &FieldError{Problem: fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se)}
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe
	}
	return &FieldError{Problem: err.Error()}
}

func goTypeName(t string) string {
	switch {
	case t == "string" || strings.HasSuffix(t, "Role") || strings.HasSuffix(t, "Type") || strings.HasSuffix(t, "Reason") || strings.HasSuffix(t, "Status"):
		return "a string"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint") || strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	case strings.HasPrefix(t, "map"):
		return "an object"
	}
	return "an object"
}
