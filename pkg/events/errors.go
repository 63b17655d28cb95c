package events

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is matched (errors.Is) by every decoding or validation
	// error of this package: a payload that is not JSON, a field of the wrong
	// type, a missing required field, or a value outside its enumeration.
	ErrInvalid = errors.New("events: invalid payload")

	// ErrUnknownType is returned by DecodeStreamEvent when a CloudEvent
	// type is not one of the provider stream event types of
	// docs/protocol.md §3, and by DecodeWorkerEvent when it is not one of
	// the worker event types of §5.
	ErrUnknownType = errors.New("events: unknown event type")

	// ErrNotCloudEvent is returned by DecodeEnvelope when a message carries
	// neither binary-mode ce- headers nor a structured-mode CloudEvent body.
	ErrNotCloudEvent = errors.New("events: not a CloudEvent")
)

// FieldError names the field of a payload that is missing, of the wrong type
// or has a value that is not allowed. It matches ErrInvalid.
type FieldError struct {
	// Field is the JSON path of the field, e.g. "messages[2].content[0].id".
	Field string
	// Problem says what is wrong: "is required", "must be a string", ...
	Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return "invalid payload: " + e.Problem
	}
	return fmt.Sprintf("field %q %s", e.Field, e.Problem)
}

// Is makes errors.Is(err, ErrInvalid) true for every FieldError.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

func missing(field string) error { return &FieldError{Field: field, Problem: "is required"} }

func invalidf(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// prefixField puts a parent path in front of the field of a FieldError.
func prefixField(parent string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		f := parent
		if fe.Field != "" {
			if fe.Field[0] == '[' {
				f += fe.Field
			} else {
				f += "." + fe.Field
			}
		}
		return &FieldError{Field: f, Problem: fe.Problem}
	}
	return err
}
