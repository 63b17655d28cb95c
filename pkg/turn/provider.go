package turn

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/natsrt"
)

// retryProvider makes a model call again within its step when it failed for
// a transport reason (Config.Retryable), at most Config.StepRetries times.
// The retry is spliced into one stream for the worker: the failed attempt's
// open blocks are aborted (its error event and failed status are dropped),
// llmw.turn.step is published with the next attempt number, and the new
// attempt's blocks follow under fresh indexes. Other failures pass through
// unchanged, so a refusal or an invalid request fails the step at once.
type retryProvider struct {
	t *turnRun
	p llm.Provider
}

var _ llm.Provider = (*retryProvider)(nil)

func (rp *retryProvider) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	rs := &retryStream{rp: rp, ctx: ctx, req: req, attempt: 1, base: req.RequestID}
	s, err := rp.p.Stream(ctx, req)
	for err != nil {
		if !rs.canRetry(openErrorCode(err)) {
			return nil, err
		}
		if !rs.nextAttempt() {
			return nil, err
		}
		s, err = rp.p.Stream(ctx, rs.req)
	}
	rs.cur = s
	return rs, nil
}

// openErrorCode classifies an error of Provider.Stream for Retryable.
func openErrorCode(err error) string {
	var pe *natsrt.ProviderError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	case errors.Is(err, natsrt.ErrNoIngest):
		return codeNoIngest
	case errors.As(err, &pe):
		return pe.Code
	}
	return "provider_error"
}

type retryStream struct {
	rp      *retryProvider
	ctx     context.Context
	req     *llm.Request
	base    string
	attempt int
	cur     llm.Stream

	// mu orders Close against Next: llm.Normalize closes the stream from
	// another goroutine while its pump may be in Next, and the source
	// (natsrt's ingest stream) must not be closed during its Next. A Close
	// during Next is carried out by Next when the source returns (a
	// blocked source is ended by the call's context or idle timeout).
	mu        sync.Mutex
	inNext    bool
	closed    bool
	curClosed bool

	offset, maxIndex int
	started          bool
	held             *events.ErrorEvent
	pending          []events.Event
	ev               events.Event
	done             bool
}

func (s *retryStream) canRetry(code string) bool {
	return s.attempt <= s.rp.t.s.cfg.StepRetries && s.ctx.Err() == nil && s.rp.t.s.cfg.Retryable(code)
}

// nextAttempt prepares the next attempt: waits the backoff, publishes
// llmw.turn.step with the attempt number and gives the request a new id.
// false means ctx ended meanwhile.
func (s *retryStream) nextAttempt() bool {
	s.attempt++
	d := s.rp.t.s.cfg.RetryBackoff << (s.attempt - 2)
	if d > time.Second {
		d = time.Second
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
		return false
	case <-t.C:
	}
	r := *s.req
	r.RequestID = s.base + "-t" + strconv.Itoa(s.attempt)
	s.req = &r
	s.rp.t.publishStep(s.attempt)
	return true
}

func (s *retryStream) Next() bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.inNext = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inNext = false
		closeNow := s.closed && !s.curClosed && s.cur != nil
		if closeNow {
			s.curClosed = true
		}
		s.mu.Unlock()
		if closeNow {
			_ = s.cur.Close()
		}
	}()
	return s.next1()
}

func (s *retryStream) next1() bool {
	for {
		if len(s.pending) > 0 {
			s.ev, s.pending = s.pending[0], s.pending[1:]
			return true
		}
		if s.done || s.cur == nil {
			return false
		}
		if !s.cur.Next() {
			// A source without a terminal status (its Err says why): the
			// worker's Normalize turns that into a failure.
			s.flushHeld()
			s.done = true
			continue
		}
		switch e := s.cur.Current().(type) {
		case events.StatusEvent:
			switch e.Status {
			case events.StatusStarted:
				if s.started {
					continue
				}
				s.started = true
			case events.StatusFailed:
				code := llm.CodeProviderFailed
				if s.held != nil {
					code = s.held.Code
				}
				if s.canRetry(code) && s.retry() {
					continue
				}
			}
			s.flushHeld()
			s.pending = append(s.pending, e)
		case events.ErrorEvent:
			s.flushHeld()
			s.held = &e
		case events.BlockStart:
			e.Index = s.index(e.Index)
			s.emit(e)
		case events.BlockDelta:
			e.Index = s.index(e.Index)
			s.emit(e)
		case events.BlockStop:
			e.Index = s.index(e.Index)
			s.emit(e)
		case events.BlockAbort:
			e.Index = s.index(e.Index)
			s.emit(e)
		default:
			s.emit(e)
		}
	}
}

func (s *retryStream) emit(ev events.Event) {
	s.flushHeld()
	s.pending = append(s.pending, ev)
}

func (s *retryStream) flushHeld() {
	if s.held != nil {
		s.pending = append(s.pending, *s.held)
		s.held = nil
	}
}

func (s *retryStream) index(i int) int {
	i += s.offset
	if i > s.maxIndex {
		s.maxIndex = i
	}
	return i
}

// retry replaces the failed source with a new attempt; the failed one's
// error is dropped (its open blocks were aborted by its own stream). false
// means no new attempt could be opened and the failure goes through.
func (s *retryStream) retry() bool {
	_ = s.cur.Close()
	for {
		if !s.nextAttempt() {
			return false
		}
		src, err := s.rp.p.Stream(s.ctx, s.req)
		if err == nil {
			s.held = nil
			s.cur = src
			s.offset = s.maxIndex + 1
			return true
		}
		s.held = &events.ErrorEvent{Code: openErrorCode(err), Message: "model call failed: " + err.Error()}
		if !s.canRetry(s.held.Code) {
			s.cur = llm.SliceStream() // ends; the failed status follows
			return false
		}
	}
}

func (s *retryStream) Current() events.Event { return s.ev }

func (s *retryStream) Err() error {
	if s.cur == nil {
		return nil
	}
	return s.cur.Err()
}

func (s *retryStream) Close() error {
	s.mu.Lock()
	s.closed = true
	if s.inNext || s.curClosed || s.cur == nil {
		s.mu.Unlock()
		return nil
	}
	s.curClosed = true
	s.mu.Unlock()
	return s.cur.Close()
}
