package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// Validator is implemented by payloads that have required fields or
// enumerations. Decode calls Validate after unmarshalling.
type Validator interface {
	Validate() error
}

// Decode unmarshals a JSON payload into a T and validates it. Unknown fields
// are ignored (docs/protocol.md §1). Every error matches ErrInvalid; where a field is
// to blame it is a *FieldError naming the field.
func Decode[T any](data []byte) (T, error) {
	var v T
	if r, ok := any(&v).(*CompletionRequest); ok {
		// Ingest decodes one at every step of every turn, with the whole
		// conversation in it: the form MarshalData writes is read
		// without encoding/json (decodeCompletionFast).
		data, err := checkBody(data)
		if err != nil {
			return v, err
		}
		if fast, ok := decodeCompletionFast(data); ok {
			*r = fast
			return v, r.Validate()
		}
	}
	err := Unmarshal(data, &v)
	return v, err
}

// Unmarshal is Decode for an existing value.
func Unmarshal(data []byte, v any) error {
	data, err := checkBody(data)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return jsonError(err)
	}
	if val, ok := v.(Validator); ok {
		return val.Validate()
	}
	return nil
}

// checkBody trims the body and refuses an empty or too deeply nested one.
func checkBody(data []byte) ([]byte, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, &FieldError{Problem: "empty body, want a JSON object"}
	}
	return data, checkDepth(data)
}

// MaxDepth is how deeply a payload's JSON may nest (objects and arrays).
// A deeper body is refused before it is decoded: encoding/json would
// build every level (and recurse once per level) first.
const MaxDepth = 100

// checkDepth refuses JSON nesting deeper than MaxDepth in one pass over
// the bytes, without decoding.
func checkDepth(data []byte) error {
	depth, inString, escaped := 0, false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > MaxDepth {
				return &FieldError{Problem: fmt.Sprintf("JSON nests deeper than %d levels (events.MaxDepth)", MaxDepth)}
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}

// jsonError turns encoding/json errors into FieldErrors that name the field.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			return &FieldError{Problem: fmt.Sprintf("must be %s, got JSON %s", goTypeName(te.Type), te.Value)}
		}
		return &FieldError{Field: field, Problem: fmt.Sprintf("must be %s, got JSON %s", goTypeName(te.Type), te.Value)}
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

// goTypeName says what JSON a Go type wants, by its kind: named string
// types (HookEvent, FailurePolicy, ...) want a string, whatever they are
// called.
func goTypeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}
