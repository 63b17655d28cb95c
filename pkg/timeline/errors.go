package timeline

import "errors"

// ErrInvalidToolInput is matched (errors.Is) by CollectedCall.Err when the
// input JSON a model streamed for a tool call does not parse or is not a JSON
// object. The call is still collected, so that the worker can answer it with
// an error result the model can correct, instead of dropping it.
var ErrInvalidToolInput = errors.New("timeline: invalid tool input")
