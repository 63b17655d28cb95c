package llm

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
)

// NormalizeOptions configures Normalize. The zero value is ready to use.
type NormalizeOptions struct {
	// IdleTimeout ends the stream as failed (error code "idle_timeout") when
	// the source sends no event for this long, before the first event too.
	// 0 means no limit.
	IdleTimeout time.Duration
}

// UnnamedTool is the name Normalize gives a tool_use block that came
// without a name. Such a block is aborted right after its start, so it is
// never collected or run; the name only tells the UI what happened.
const UnnamedTool = "_unnamed"

// Normalize wraps any stream so that what it yields is well-formed by
// docs/protocol.md §3 (CheckWellFormed holds), whatever the source does:
//
//   - The first event is status started (synthesized when the source sends
//     none; later started statuses are dropped).
//   - A delta for an index with no open block starts one, its type taken from
//     the delta (text, thinking, input_json → tool_use). A delta whose kind
//     does not fit its block is dropped.
//   - A start for an index that is still open stops the open block first.
//     Stops and aborts for indexes that are not open are dropped.
//   - Block indexes are unique: an index the source reuses is renumbered.
//   - A tool_use block without an id (or with the id of an earlier block) gets
//     "call_" + a random hex id; one without a name is aborted at once (see
//     UnnamedTool) and its deltas and stop are dropped.
//   - Exactly one terminal status comes last, every block ended before it.
//     On completed (or a source that just ends) open blocks are stopped; on
//     failed and cancelled they are aborted. A failed status always follows an
//     error event. A source Err becomes error {code: "stream_error"} and
//     failed; a cancelled ctx becomes status cancelled; IdleTimeout becomes
//     error {code: "idle_timeout"} and failed. Events after the terminal
//     status are dropped and the source is closed.
//
// The normalized stream never hangs on a source that blocks: when ctx can be
// cancelled or IdleTimeout is set the source is read by one goroutine, which
// ends when the source returns from Next after Close (or after the terminal
// status, when Normalize closes the source itself). Sources must therefore
// let Close unblock a pending Next, as SDK streams over HTTP bodies do. A
// source that bounds its waits itself (SelfBounded: the built-in provider
// adapters) is read inline instead, and enforces its own idle timeout.
//
// A panic in the source's Next or Close is a source error like any other
// (error {code: "stream_error"}, status failed): a broken provider fails
// its model call, not the process.
//
// A stream that is already well-formed (it implements WellFormed, as
// Normalize's own streams and ingest's client do) is returned unchanged,
// with its own idle and cancel handling: a stream is normalized once, where
// it is first consumed, however many hops it takes.
//
// The normalized stream is a Warner: it returns the source's Warnings (none
// when the source is not a Warner).
//
// Err of the normalized stream is always nil: failures are events. Next and
// Current must be called from one goroutine; Close may be called from any
// goroutine, concurrently with Next, and more than once. Close waits until
// nothing reads the source.
func Normalize(ctx context.Context, s Stream, o NormalizeOptions) Stream {
	if _, ok := s.(WellFormed); ok {
		return s // normalized once already: no second goroutine or buffer
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if s == nil {
		s = &failedStream{err: ErrNilStream}
	}
	ns := &normStream{ctx: ctx, src: s, opt: o}
	// Without a way to be cancelled and without an idle limit, waiting for
	// the source is all Next could do anyway: read it inline and spare the
	// goroutine.
	// A source whose events are in memory (SliceStream: scripted models,
	// replays) never makes Next wait, so there is no wait to cancel or to
	// time either: it is read inline too, sparing a goroutine per model call.
	// A source that ends its own waits on cancel and on silence needs no
	// goroutine to bound them either.
	_, inMemory := s.(*sliceStream)
	_, bounded := s.(SelfBounded)
	ns.pumped = !inMemory && !bounded && (ctx.Done() != nil || o.IdleTimeout > 0)
	if ns.pumped {
		ns.done = make(chan struct{})
		ns.pipe.ready = make(chan struct{}, 1)
		ns.pipe.space = make(chan struct{}, 1)
	}
	return ns
}

// pumpBuffer is how many events the pump may read ahead of the consumer.
const pumpBuffer = 256

// keepBuffer is the largest queue capacity (in events) kept while the
// consumer waits for the source: a burst may grow the queue, a slow model
// must not keep paying for it.
const keepBuffer = 32

// pipe hands events from the pump to the consumer. The pump appends to in;
// the consumer swaps in for its drained batch, so one lock and at most one
// wake-up deliver every event read ahead, and the two slices are reused for
// the whole stream. Its memory grows with what is actually buffered: nothing
// while the model is silent.
type pipe struct {
	mu      sync.Mutex
	in      []events.Event
	ended   bool  // the source ended (after the events in in)
	err     error // the source's error when ended
	waiting bool  // the consumer waits on ready
	full    bool  // the pump waits on space
	ready   chan struct{}
	space   chan struct{}
}

type normStream struct {
	ctx context.Context
	src Stream
	opt NormalizeOptions
	n   normalizer
	cur events.Event

	// pumped is set when the source is read by the pump goroutine, not
	// inline; pipe, batch and pumpWG are used only then.
	pumped bool
	pipe   pipe
	batch  []events.Event // taken from the pipe, consumed from bi
	bi     int
	pumpWG sync.WaitGroup
	timer  *time.Timer

	// startMu orders starting the pump against Close, so that Close knows
	// whether it has a pump to wait for.
	startMu sync.Mutex
	started bool

	closed    atomic.Bool
	done      chan struct{} // closed when the consumer stops reading (pumped only)
	doneOnce  sync.Once
	closeOnce sync.Once
	closeErr  error
	// panicErr is set when the source panicked; only the goroutine that
	// reads the source (the consumer, or the pump) touches it.
	panicErr error
}

var (
	_ Stream     = (*normStream)(nil)
	_ WellFormed = (*normStream)(nil)
	_ Buffered   = (*normStream)(nil)
	_ Warner     = (*normStream)(nil)
)

// WellFormed marks the stream as normalized.
func (s *normStream) WellFormed() {}

// srcNext is src.Next with a panic turned into the source's error.
func (s *normStream) srcNext() (ok bool) {
	if s.panicErr != nil {
		return false
	}
	defer func() {
		if v := recover(); v != nil {
			s.panicErr, ok = fmt.Errorf("%w: %v", ErrSourcePanic, v), false
		}
	}()
	return s.src.Next()
}

func (s *normStream) srcErr() error {
	if s.panicErr != nil {
		return s.panicErr
	}
	return s.src.Err()
}

func (s *normStream) srcClose() (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w on close: %v", ErrSourcePanic, v)
		}
	}()
	return s.src.Close()
}

func (s *normStream) Next() bool {
	for {
		if s.closed.Load() {
			s.cur = nil
			return false
		}
		if ev, ok := s.n.pop(); ok {
			s.cur = ev
			return true
		}
		if s.n.done {
			// Terminal status delivered: free the source even if the
			// caller never calls Close.
			s.release()
			s.cur = nil
			return false
		}
		s.pull()
	}
}

// pull feeds the normalizer from the source, or ends the stream on cancel,
// idle timeout or the source's end.
func (s *normStream) pull() {
	if s.ctx.Err() != nil {
		s.n.terminate(events.StatusCancelled, nil, "cancelled")
		return
	}
	if !s.pumped {
		if !s.srcNext() {
			s.feedEnd(s.srcErr())
			return
		}
		ev := s.src.Current()
		if s.ctx.Err() != nil {
			// Cancelled while the source was read: what it says after
			// the cancel is not the answer (the same as from the pump).
			s.n.terminate(events.StatusCancelled, nil, "cancelled")
			return
		}
		s.n.feed(ev)
		return
	}
	if !s.started {
		s.startMu.Lock()
		if s.closed.Load() {
			s.startMu.Unlock()
			return
		}
		s.started = true
		s.pumpWG.Add(1)
		go s.pump()
		s.startMu.Unlock()
	}
	// Fast path: an event is already waiting, so there is nothing to time.
	if s.take() {
		return
	}
	var idle <-chan time.Time
	if s.opt.IdleTimeout > 0 {
		if s.timer == nil {
			s.timer = time.NewTimer(s.opt.IdleTimeout)
		} else {
			s.timer.Reset(s.opt.IdleTimeout)
		}
		idle = s.timer.C
	}
	for {
		select {
		case <-s.pipe.ready:
			if s.take() {
				s.stopTimer()
				return
			}
			// Spurious (the events were taken before the wake-up): wait on.
			continue
		case <-s.ctx.Done():
			s.n.terminate(events.StatusCancelled, nil, "cancelled")
		case <-idle:
			msg := fmt.Sprintf("no event from the provider for %s", s.opt.IdleTimeout)
			s.n.terminate(events.StatusFailed, &events.ErrorEvent{Code: CodeIdleTimeout, Message: msg}, "idle timeout")
		case <-s.done:
			// Closed concurrently; Next sees s.closed.
		}
		s.stopTimer()
		return
	}
}

func (s *normStream) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
	}
}

// take feeds the next event from the pump (or the source's end) to the
// normalizer. When none is buffered it returns false, and the pump will
// signal ready when one is.
func (s *normStream) take() bool {
	if s.bi == len(s.batch) {
		p := &s.pipe
		p.mu.Lock()
		if len(p.in) == 0 && !p.ended {
			p.waiting = true
			// Nothing buffered: the model is slow. Give back what a burst
			// made the queues grow to.
			if cap(p.in) > keepBuffer {
				p.in = nil
			}
			p.mu.Unlock()
			if cap(s.batch) > keepBuffer {
				s.batch = nil
			}
			s.bi = 0
			return false
		}
		clear(s.batch)
		s.batch, p.in = p.in, s.batch[:0]
		s.bi = 0
		ended, err := p.ended && len(s.batch) == 0, p.err
		wake := p.full
		p.full = false
		p.mu.Unlock()
		if wake {
			select {
			case p.space <- struct{}{}:
			default:
			}
		}
		if ended {
			s.feedEnd(err)
			return true
		}
	}
	ev := s.batch[s.bi]
	s.batch[s.bi] = nil
	s.bi++
	if s.ctx.Err() != nil {
		// The source may have failed because ctx was cancelled; say
		// cancelled, not failed.
		s.n.terminate(events.StatusCancelled, nil, "cancelled")
		return true
	}
	s.n.feed(ev)
	return true
}

// feedEnd takes the source's end from the pump.
func (s *normStream) feedEnd(err error) {
	if s.ctx.Err() != nil {
		s.n.terminate(events.StatusCancelled, nil, "cancelled")
		return
	}
	s.sourceEnded(err)
}

func (s *normStream) sourceEnded(err error) {
	if err != nil {
		s.n.terminate(events.StatusFailed, &events.ErrorEvent{Code: CodeStreamError, Message: err.Error()}, "stream error")
		return
	}
	// A source that ends without a terminal status but without an error
	// finished its answer (SDK streams end on the provider's last chunk).
	s.n.terminate(events.StatusCompleted, nil, "")
}

// pump reads the source ahead of the consumer. It stops when the source
// ends or the consumer is done.
func (s *normStream) pump() {
	defer s.pumpWG.Done()
	for s.srcNext() {
		if !s.put(s.src.Current()) {
			return
		}
	}
	err := s.srcErr()
	p := &s.pipe
	p.mu.Lock()
	p.ended, p.err = true, err
	wake := p.waiting
	p.waiting = false
	p.mu.Unlock()
	if wake {
		p.ready <- struct{}{} // never blocks: one signal per wait
	}
}

// put queues ev for the consumer, waiting while pumpBuffer events are
// queued. It returns false when the consumer is done.
func (s *normStream) put(ev events.Event) bool {
	p := &s.pipe
	p.mu.Lock()
	for len(p.in) >= pumpBuffer {
		p.full = true
		p.mu.Unlock()
		select {
		case <-p.space:
		case <-s.done:
			return false
		}
		p.mu.Lock()
	}
	p.in = append(p.in, ev)
	wake := p.waiting
	p.waiting = false
	p.mu.Unlock()
	if wake {
		p.ready <- struct{}{} // never blocks: one signal per wait
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// release stops the pump and closes the source, without waiting.
func (s *normStream) release() {
	if s.done != nil {
		s.doneOnce.Do(func() { close(s.done) })
	}
	s.closeOnce.Do(func() { s.closeErr = s.srcClose() })
}

func (s *normStream) Current() events.Event { return s.cur }

// Buffered implements Buffered: the events normalized and not yet
// returned, and what the read-ahead holds (or, read inline, what the
// source says it holds). It is called from the goroutine that calls Next.
func (s *normStream) Buffered() int {
	if s.closed.Load() {
		return 0
	}
	n := len(s.n.q) - s.n.qi
	if s.n.done {
		return n
	}
	if !s.pumped {
		if b, ok := s.src.(Buffered); ok {
			n += b.Buffered()
		}
		return n
	}
	n += len(s.batch) - s.bi
	p := &s.pipe
	p.mu.Lock()
	n += len(p.in)
	if p.ended {
		n++
	}
	p.mu.Unlock()
	return n
}

func (s *normStream) Err() error { return nil }

// Warnings returns the source's warnings (Warner): a consumer sees the
// adapter's stream only through Normalize. They are known when the source
// is returned, so reading them races with nothing.
func (s *normStream) Warnings() []events.Warning {
	if w, ok := s.src.(Warner); ok {
		return w.Warnings()
	}
	return nil
}

// Close stops the stream, closes the source and waits until nothing reads
// the source. It returns the error of the source's Close.
func (s *normStream) Close() error {
	s.startMu.Lock()
	s.closed.Store(true)
	started := s.started
	s.startMu.Unlock()
	s.release()
	if started {
		s.pumpWG.Wait()
	}
	return s.closeErr
}

// failedStream is a source that fails at once with err.
type failedStream struct{ err error }

func (f *failedStream) Next() bool            { return false }
func (f *failedStream) Current() events.Event { return nil }
func (f *failedStream) Err() error            { return f.err }
func (f *failedStream) Close() error          { return nil }

// Limit applies the rule of every duration setting of llmworker: zero
// means def, a negative value means no limit (0 is returned), anything
// else is itself.
func Limit(d, def time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d == 0:
		return def
	}
	return d
}
