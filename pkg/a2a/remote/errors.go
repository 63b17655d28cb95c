package remote

import "errors"

var (
	// ErrCard is returned by Open for a card that cannot be fetched or
	// read, or that offers no interface this client speaks.
	ErrCard = errors.New("a2a remote: agent card")

	// ErrRemote wraps a call the remote agent refused or that did not
	// reach it (Send, Follow, Reply, Cancel).
	ErrRemote = errors.New("a2a remote: call")
)
