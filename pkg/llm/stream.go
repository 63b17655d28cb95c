package llm

import (
	"sync/atomic"

	"github.com/llmworker/llmworker/pkg/events"
)

// Collect reads s to its end, closes it and returns the events it yielded.
// The error is s.Err(), or else the error of Close.
func Collect(s Stream) ([]events.Event, error) {
	var evs []events.Event
	for s.Next() {
		evs = append(evs, s.Current())
	}
	err := s.Err()
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return evs, err
}

// SliceStream returns a stream that yields evs in order. The events are
// played as given, not normalized. Close may be called from any goroutine;
// after it Next returns false and, if events were left, Err is
// ErrStreamClosed.
func SliceStream(evs ...events.Event) Stream {
	return &sliceStream{evs: evs, i: -1}
}

type sliceStream struct {
	evs    []events.Event
	i      int
	closed atomic.Bool
	err    error
}

func (s *sliceStream) Next() bool {
	if s.err != nil {
		return false
	}
	if s.closed.Load() {
		if s.i+1 < len(s.evs) {
			s.err = ErrStreamClosed
		}
		s.i = len(s.evs)
		return false
	}
	if s.i+1 >= len(s.evs) {
		s.i = len(s.evs)
		return false
	}
	s.i++
	return true
}

func (s *sliceStream) Current() events.Event {
	if s.i < 0 || s.i >= len(s.evs) {
		return nil
	}
	return s.evs[s.i]
}

func (s *sliceStream) Err() error { return s.err }

// Buffered implements Buffered: every event left, and the end.
func (s *sliceStream) Buffered() int {
	if s.err != nil || s.i >= len(s.evs) || s.closed.Load() {
		return 0
	}
	return len(s.evs) - s.i
}

func (s *sliceStream) Close() error {
	s.closed.Store(true)
	return nil
}
