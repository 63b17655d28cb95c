package providertest

import (
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// A Pause holds a Response mid-body (Response.Hold) until it ends.
type Pause struct {
	ch    chan struct{}
	ended bool
}

// NewPause returns a Pause that ends at the latest when the test does.
func NewPause(t testing.TB) *Pause {
	p := &Pause{ch: make(chan struct{})}
	t.Cleanup(p.End)
	return p
}

// Hold is the channel for Response.Hold.
func (p *Pause) Hold() <-chan struct{} { return p.ch }

// End lets the held body go on; it may be called more than once (from the
// test's goroutine).
func (p *Pause) End() {
	if !p.ended {
		p.ended = true
		close(p.ch)
	}
}

// StopDuringPause reads s while p holds its provider's body, until the
// block stop of the tool call callID, and fails the test if that stop has
// not come within pause (the longest the model pauses); then it ends the
// pause and reads s to its end. It returns every event of s.
func StopDuringPause(t testing.TB, s llm.Stream, p *Pause, callID string, pause time.Duration) []events.Event {
	t.Helper()
	evs := make(chan events.Event)
	go func() {
		defer close(evs)
		for s.Next() {
			evs <- s.Current()
		}
	}()
	t.Cleanup(func() {
		_ = s.Close()
		for range evs {
		}
	})
	var all []events.Event
	index := -1
	deadline := time.After(pause)
wait:
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatalf("the stream ended during the pause: %d events", len(all))
			}
			all = append(all, ev)
			switch e := ev.(type) {
			case events.BlockStart:
				if e.ID == callID {
					index = e.Index
				}
			case events.BlockStop:
				if index >= 0 && e.Index == index {
					break wait
				}
			}
		case <-deadline:
			p.End()
			t.Fatalf("the block stop of call %s did not come during a pause of %s after its arguments were whole (%d events came)", callID, pause, len(all))
		}
	}
	p.End()
	for ev := range evs {
		all = append(all, ev)
	}
	return all
}
