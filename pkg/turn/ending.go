package turn

import (
	"sync"

	"github.com/llmworker/llmworker/pkg/events"
)

// endOverride is what replaces the end the worker reports: a checkpoint
// that was too large (the turn fails too_large), or a completed event
// that could not be published (the llmw.turn.failed published instead).
type endOverride struct {
	mu       sync.Mutex
	tooLarge error
	override *events.TurnEnded
}

func (e *endOverride) setTooLarge(err error) {
	e.mu.Lock()
	e.tooLarge = err
	e.mu.Unlock()
}

func (e *endOverride) set(ov *events.TurnEnded) {
	e.mu.Lock()
	e.override = ov
	e.mu.Unlock()
}

// load returns both: the checkpoint's too_large error and the end
// that replaced completed.
func (e *endOverride) load() (tooLarge error, override *events.TurnEnded) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tooLarge, e.override
}
