package models

import "errors"

// ErrInvalid is returned by Parse and Load (wrapped, naming the file,
// the model and the field) for a models file that cannot be read: not
// JSON or YAML, an unknown field, a model that is not provider:model, a
// missing or negative number, a context window not above the max output
// tokens.
var ErrInvalid = errors.New("models: invalid models file")
