package emit

import (
	"fmt"

	"github.com/llmworker/llmworker/pkg/worker"
)

var (
	// ErrFenced is returned by EventPublisher.Publish and Flush once
	// LLMW_EVENTS refused a batch of the turn's events because another
	// event of the turn was stored since this publisher's last one: another
	// replica took the turn over. The run stops without a trace; it
	// matches worker.ErrDetached.
	ErrFenced = fmt.Errorf("turn: worker events refused: another replica published for the turn (%w)", worker.ErrDetached)

	// ErrEventsUnavailable is returned by EventPublisher.Publish and Flush
	// once a batch of events was not acknowledged within the publisher's
	// RetryTimeout, or was refused for a reason other than fencing. The
	// run hands the turn off (its request is redelivered; the next replica
	// continues from the checkpoint); it matches worker.ErrDetached.
	ErrEventsUnavailable = fmt.Errorf("turn: LLMW_EVENTS did not store worker events (%w)", worker.ErrDetached)
)
