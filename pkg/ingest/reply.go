package ingest

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/llmworker/llmworker/pkg/events"
)

// DecodeReply reads the reply to a completion request: the CompletionReply,
// or, for a micro error reply, an *Error that matches the sentinel of its
// kind (ErrUnknownModel, ErrInvalidRequest, ...). A message that is neither
// gives an error matching ErrNoReply.
func DecodeReply(m *nats.Msg) (events.CompletionReply, error) {
	if m == nil {
		return events.CompletionReply{}, ErrNoReply
	}
	if codeStr := m.Header.Get(micro.ErrorCodeHeader); codeStr != "" {
		code, err := strconv.Atoi(codeStr)
		if err != nil {
			return events.CompletionReply{}, fmt.Errorf("%w: error code %q", ErrNoReply, codeStr)
		}
		e := &Error{Code: code, Kind: Kind(m.Header.Get(HeaderErrorKind)), Message: m.Header.Get(micro.ErrorHeader)}
		var body Error
		if json.Unmarshal(m.Data, &body) == nil {
			e.Field = body.Field
			if body.Message != "" {
				e.Message = body.Message
			}
		}
		if e.Kind == "" {
			e.Kind = kindOfCode(code)
		}
		return events.CompletionReply{}, e
	}
	r, err := events.Decode[events.CompletionReply](m.Data)
	if err != nil {
		return r, fmt.Errorf("%w: %w", ErrNoReply, err)
	}
	return r, nil
}
