package llm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
)

// Guard bounds the waits of one streamed request, so that the stream
// reading it can be SelfBounded (read inline by Normalize, without a
// goroutine per call): the request runs on Context, which is cancelled
// with the caller's context, by Stop, and when the provider is silent for
// the idle timeout (Idle then reports it). Touch marks an event from the
// provider. The built-in adapters (pkg/provider/...) share it.
type Guard struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	idle   time.Duration
}

// NewGuard returns a Guard for a request made under ctx with idle timeout
// idle (0 or less = none). The idle timer starts with Start, once the
// request was answered.
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
		g.timer = time.AfterFunc(g.idle, func() { g.cancel(ErrIdle) })
	}
}

// Touch restarts the idle timer: the provider sent something.
func (g *Guard) Touch() {
	if g.timer != nil {
		g.timer.Reset(g.idle)
	}
}

// Idle reports whether the idle timer cancelled the request.
func (g *Guard) Idle() bool { return errors.Is(context.Cause(g.ctx), ErrIdle) }

// IdleError is the error event of a stream that Idle cut (the code and
// message Normalize gives its own idle timeout).
func (g *Guard) IdleError() events.ErrorEvent {
	return events.ErrorEvent{Code: CodeIdleTimeout, Message: "no event from the provider for " + g.idle.String()}
}

// Stop stops the timer and cancels the request; it may be called more than
// once and from any goroutine.
func (g *Guard) Stop() {
	if g.timer != nil {
		g.timer.Stop()
	}
	g.cancel(context.Canceled)
}

// Pump is the pull loop a provider adapter's Stream is made of: the
// adapter embeds it, gives it (Init) the function that reads one provider
// event, and that function queues the §3 events it translates to with
// Emit and, at the source's end, the terminal ones, then calls Finish.
// Next yields status started first, then the queue, pulling whenever the
// queue is empty. The embedding stream is SelfBounded: the request runs
// under the Guard, which the caller's cancel, the idle timer and Close
// cancel, and Close may be called while Next waits for the provider.
type Pump struct {
	g        *Guard
	pull     func()
	closeSrc func() error

	// mu serializes reading the source (Read) with closing it: Normalize
	// may call Close from another goroutine while Next waits for the
	// provider, and some sources (iter.Pull) forbid that overlap.
	mu       sync.Mutex
	released bool // the source was closed (guarded by mu)
	closed   atomic.Bool

	q   []events.Event
	qi  int
	cur events.Event

	started, done bool
}

var _ SelfBounded = (*Pump)(nil)

// Init sets the request's Guard, the function that reads the provider's
// next event, and the one that closes the provider's stream (nil for
// none). It is called once, before Next.
func (p *Pump) Init(g *Guard, pull func(), closeSrc func() error) {
	p.g, p.pull, p.closeSrc = g, pull, closeSrc
	p.q = make([]events.Event, 0, 8)
}

// Guard returns the request's Guard.
func (p *Pump) Guard() *Guard { return p.g }

// Emit queues events.
func (p *Pump) Emit(evs ...events.Event) { p.q = append(p.q, evs...) }

// Finish marks the end of the source, whose last events are queued, and
// closes it.
func (p *Pump) Finish() {
	p.done = true
	_ = p.Release()
}

// Finished reports whether Finish was called.
func (p *Pump) Finished() bool { return p.done }

// Next implements Stream.
func (p *Pump) Next() bool {
	for {
		if p.closed.Load() {
			p.cur = nil
			return false
		}
		if p.qi < len(p.q) {
			p.cur = p.q[p.qi]
			p.q[p.qi] = nil
			p.qi++
			return true
		}
		p.q, p.qi = p.q[:0], 0
		if p.done {
			return false
		}
		if !p.started {
			p.started = true
			p.Emit(events.StatusEvent{Status: events.StatusStarted})
			continue
		}
		p.pull()
	}
}

// Current implements Stream.
func (p *Pump) Current() events.Event { return p.cur }

// Err implements Stream: an adapter reports every failure in the stream.
func (p *Pump) Err() error { return nil }

// SelfBounded implements SelfBounded.
func (p *Pump) SelfBounded() {}

// Read runs read, the read of the source's next event, unless the source
// was closed (then it returns context.Canceled): Close waits for a read in
// progress, after cancelling the request, which ends a wait for the
// provider.
func (p *Pump) Read(read func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return context.Canceled
	}
	return read()
}

// Close implements Stream. It may be called from any goroutine, also while
// Next waits for the provider, and more than once; Next returns false
// after it.
func (p *Pump) Close() error {
	p.closed.Store(true)
	// Cancel first: it ends a read in progress, which holds mu.
	if p.g != nil {
		p.g.Stop()
	}
	return p.Release()
}

// Release closes the source and stops the Guard, once, as Finish does
// without marking the end (for a stream given up before it is returned);
// Next goes on yielding what is queued.
func (p *Pump) Release() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return nil
	}
	p.released = true
	if p.g != nil {
		p.g.Stop()
	}
	if p.closeSrc == nil {
		return nil
	}
	return p.closeSrc()
}

// Source is the SDK stream an adapter reads: Next, then Current, until
// Next is false and Err says why.
type Source[E any] interface {
	Next() bool
	Current() E
	Err() error
}

// ReadNext reads src's next event through p.Read: ok is false at the end
// of src (err is then src's error, or context.Canceled after Close).
func ReadNext[E any](p *Pump, src Source[E]) (ev E, ok bool, err error) {
	err = p.Read(func() error {
		if ok = src.Next(); ok {
			ev = src.Current()
			return nil
		}
		return src.Err()
	})
	return ev, ok && err == nil, err
}
