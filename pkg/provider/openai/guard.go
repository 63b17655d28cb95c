package openai

import (
	"context"
	"errors"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// errIdle is the cancel cause set by a Guard's idle timer.
var errIdle = errors.New("openai: idle timeout")

// Guard bounds the waits of one streamed request, so that its stream can be
// llm.SelfBounded (read inline by llm.Normalize, without a goroutine per
// call): the request runs on Context, which is cancelled with the caller's
// context, by Stop, and when the provider is silent for the idle timeout
// (Idle then reports it). Touch marks an event from the provider. It is
// shared with pkg/provider/openairesponses.
type Guard struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	idle   time.Duration
}

// NewGuard returns a Guard for a request made under ctx with idle timeout
// idle (0 = none). The idle timer starts with Start, once the request was
// answered.
func NewGuard(ctx context.Context, idle time.Duration) *Guard {
	g := &Guard{idle: idle}
	g.ctx, g.cancel = context.WithCancelCause(ctx)
	return g
}

// Context is the request's context.
func (g *Guard) Context() context.Context { return g.ctx }

// Start starts the idle timer.
func (g *Guard) Start() {
	if g.idle > 0 {
		g.timer = time.AfterFunc(g.idle, func() { g.cancel(errIdle) })
	}
}

// Touch restarts the idle timer: the provider sent something.
func (g *Guard) Touch() {
	if g.timer != nil {
		g.timer.Reset(g.idle)
	}
}

// Idle reports whether the idle timer cancelled the request.
func (g *Guard) Idle() bool { return errors.Is(context.Cause(g.ctx), errIdle) }

// IdleEvent ends a stream that Idle cut: open blocks aborted, error
// idle_timeout (the message llm.Normalize gives its own), status failed.
func (g *Guard) IdleEvent(em *Emitter) {
	em.Fail(events.ErrorEvent{Code: llm.CodeIdleTimeout, Message: "no event from the provider for " + g.idle.String()})
}

// Stop stops the timer and cancels the request; it may be called more than
// once and from any goroutine.
func (g *Guard) Stop() {
	if g.timer != nil {
		g.timer.Stop()
	}
	g.cancel(context.Canceled)
}
