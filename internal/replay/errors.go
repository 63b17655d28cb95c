package replay

import "errors"

var (
	// ErrUnknownScenario is returned by Server.Factory's factory (wrapped
	// with ingest.ErrUnknownModel, so ingest answers unknown_model) and by
	// Lookup for a name that is not one of Names().
	ErrUnknownScenario = errors.New("replay: unknown scenario")

	// ErrClosed is returned by a replay provider's Stream after the Server
	// was closed.
	ErrClosed = errors.New("replay: server closed")
)
