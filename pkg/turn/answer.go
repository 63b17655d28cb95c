package turn

import (
	"log/slog"
	"sync"
	"time"
)

// request is a delivered turn request and its answer to JetStream, given
// once: acknowledged, negatively acknowledged (with a delay, for a
// redelivery then), terminated, or left to its next delivery after the
// consumer's AckWait. Service.handle gives the one answer that reading
// and running the request returned (every function of a run returns the
// answer it ends with, none gives it); give drops a second answer, a
// fault of the caller, and logs it.
type request struct {
	ack acker
	log *slog.Logger

	mu    sync.Mutex
	given *answer
	gives int // how often give was called
}

// answer is one of the answers to a request.
type answer struct {
	kind   answerKind
	delay  time.Duration // nak: redeliver after this
	reason string        // term: why
}

type answerKind uint8

const (
	answerLeave answerKind = iota
	answerAck
	answerNak
	answerTerm
)

var (
	// leave is no answer: the request goes to its next delivery after the
	// consumer's AckWait (or is another run's to answer).
	leave     = answer{kind: answerLeave}
	ackAnswer = answer{kind: answerAck}
)

// nakAfter is the negative acknowledgement that has the request
// delivered again after d (at once for 0).
func nakAfter(d time.Duration) answer { return answer{kind: answerNak, delay: d} }

// termWith terminates the request: it is never delivered again.
func termWith(reason string) answer { return answer{kind: answerTerm, reason: reason} }

func newRequest(a acker, log *slog.Logger) *request { return &request{ack: a, log: log} }

// give sends a, unless an answer was given already.
func (r *request) give(a answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gives++
	if r.given != nil {
		r.log.Error("turn: a second answer to a request dropped", "first", r.given.kind, "second", a.kind)
		return
	}
	r.given = &a
	switch a.kind {
	case answerLeave:
	case answerAck:
		_ = r.ack.Ack()
	case answerNak:
		_ = r.ack.NakWithDelay(a.delay)
	case answerTerm:
		_ = r.ack.TermWithReason(a.reason)
	}
}
