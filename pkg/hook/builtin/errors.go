package builtin

import "errors"

// ErrInvalidConfig is matched by every *FieldError: a built-in hook's
// config that does not validate (Validate, New, AddTo).
var ErrInvalidConfig = errors.New("builtin: invalid hook config")

// FieldError says which field of a config is wrong. Field is the path
// below the config ("pattern", "presets[1]", "patterns[0].regex",
// "set.a..b"); "" blames the config as a whole.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return "builtin: " + e.Problem
	}
	return "builtin: " + e.Field + ": " + e.Problem
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidConfig }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: sprintf(format, args...)}
}
