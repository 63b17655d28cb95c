package cli

import (
	"errors"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/pkg/turn"
)

var (
	// ErrUsage is returned for bad flags or arguments; Main prints the
	// problem with the command's usage and exits 2.
	ErrUsage = service.ErrUsage

	// ErrNoCredentials is returned by chat when it would start the system
	// embedded but no provider credentials are set and --replay was not
	// given; the message names every variable to set.
	ErrNoCredentials = errors.New("no provider credentials")

	// ErrTurnFailed and ErrTurnAborted are returned when the turn chat (or
	// tail --turn) followed ended failed or aborted; Main exits 1.
	ErrTurnFailed  = errors.New("turn failed")
	ErrTurnAborted = errors.New("turn aborted")
	// ErrTurnRejected is returned when the turn service answered a request
	// with llmw.turn.rejected (it did not run it); Main exits 1.
	ErrTurnRejected = errors.New("turn request rejected")

	// ErrNoTurnService is returned by session compact when no turn
	// service answers its request: the compaction is the service's to make.
	ErrNoTurnService = errors.New("no turn service")

	// ErrNotProvisioned is returned when the streams or buckets of the
	// runtime do not exist on the NATS server: nothing runs there yet.
	ErrNotProvisioned = turn.ErrNotProvisioned
)
