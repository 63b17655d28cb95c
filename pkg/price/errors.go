package price

import "errors"

// ErrInvalid is returned by Parse and Load (wrapped, naming the file,
// the model and the field) for a price table that cannot be read: not
// JSON or YAML, an unknown field, a model that is not provider:model, a
// missing or negative price.
var ErrInvalid = errors.New("price: invalid price table")
