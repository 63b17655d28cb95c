package a2a

import "errors"

var (
	// ErrConfig is returned by New for a Config it cannot serve.
	ErrConfig = errors.New("a2a: bad config")

	// ErrUnknownAgent is the answer (HTTP 404) for a card or an endpoint
	// of a name the registry LLMW_AGENTS does not hold, and for the root
	// card when no default agent is configured.
	ErrUnknownAgent = errors.New("a2a: unknown agent")
)
