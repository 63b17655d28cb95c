package turn

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
)

// handle runs one delivered request to its end (or hand-off).
func (s *Service) handle(m jetstream.Msg) {
	defer s.turns.Done()
	defer func() { <-s.sem }()
	r := newRequest(m, s.log)
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("turn: panic while handling a request", "panic", p, "stack", string(debug.Stack()))
			r.give(redeliver)
		}
	}()
	r.give(s.read(r, m))
}

// read decodes a delivered request and processes it, or rejects one that
// cannot be read; it returns the request's answer.
func (s *Service) read(r *request, m jetstream.Msg) answer {
	env, err := events.DecodeEnvelope(m.Headers(), m.Data())
	if err != nil {
		return s.invalid(m, nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err))
	}
	switch env.Type {
	case events.TypeTurnSubmit:
		req, err := events.DecodeData[events.TurnRequest](env)
		if err != nil {
			return s.invalid(m, env, fmt.Errorf("%w: %w", ErrInvalidRequest, err))
		}
		r.ack = newRequestAck(s.nc, m) // the run keeps the answer, not the message
		return s.process(r, env, &req, nil, digest(env.Data))
	case events.TypeTurnResume:
		req, err := events.DecodeData[events.ResumeRequest](env)
		if err != nil {
			return s.invalid(m, env, fmt.Errorf("%w: %w", ErrInvalidRequest, err))
		}
		r.ack = newRequestAck(s.nc, m)
		return s.process(r, env, nil, &req, "")
	}
	return s.invalid(m, env, fmt.Errorf("%w: CloudEvent type %q is neither %s nor %s", ErrInvalidRequest, env.Type,
		events.TypeTurnSubmit, events.TypeTurnResume))
}

// invalid answers a request that cannot be read: llmw.turn.rejected
// (invalid_request) on P.turn.rejected.<turn_id>, with the turn id taken
// from the body, the CloudEvent or else the Nats-Msg-Id header ("_" when
// there is none a subject can carry). A submit of an id that has no turn
// also gets llmw.turn.failed on the turn's events, so a UI that waits there
// ends too (an existing turn's events are not disturbed). The message is
// terminated, never redelivered.
func (s *Service) invalid(m jetstream.Msg, env *events.Envelope, err error) answer {
	var ids struct {
		TurnID    string `json:"turn_id"`
		SessionID string `json:"session_id"`
	}
	data := m.Data()
	if env != nil {
		data = env.Data
	}
	_ = json.Unmarshal(data, &ids)
	if ids.TurnID == "" && env != nil {
		ids.TurnID = env.TurnID
		if ids.TurnID == "" {
			ids.TurnID = env.Subject
		}
	}
	if ids.TurnID == "" {
		ids.TurnID = m.Headers().Get(jetstream.MsgIDHeader)
	}
	if env != nil && ids.SessionID == "" {
		ids.SessionID = env.SessionID
	}
	if !events.ValidToken(ids.SessionID) {
		ids.SessionID = ""
	}
	rj := events.TurnRejected{TurnID: ids.TurnID, Code: events.RejectInvalidRequest, Reason: err.Error()}
	if env != nil {
		rj.Request = env.Type
	}
	if events.ValidToken(ids.TurnID) {
		st, _, gerr := s.leaderRead(ids.TurnID)
		switch {
		case gerr == nil && st.Status != StatusCancelled:
			// The id's turn is left as it was (a paused one stays
			// paused): say how it stands.
			rj.Status = string(st.Status)
			if st.Status == StatusPaused && rj.Request == events.TypeTurnResume {
				rj.Reason += "; the turn is still paused"
			}
		case errors.Is(gerr, jetstream.ErrKeyNotFound) && (env == nil || env.Type != events.TypeTurnResume):
			if perr := s.publishEndAlone(ids.TurnID, ids.SessionID, events.TurnFailed{Reason: err.Error(), Code: CodeInvalidRequest}); perr != nil {
				s.log.Warn("turn: publish failed event", "turn_id", ids.TurnID, "err", perr)
			}
		}
	}
	return s.termRejected(rj)
}

// digest is the RequestDigest of a submit's data.
func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

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

// answer is how reading or running a request ended, which give turns
// into the request's one answer to JetStream: the functions of a run say
// why it ends (done, retry, hand off, leave, terminate), and give alone
// chooses the acknowledgement and the delay of a redelivery.
type answer struct {
	kind   answerKind
	reason string // term: why
}

type answerKind uint8

const (
	answerLeave     answerKind = iota // no answer
	answerAck                         // done
	answerRetry                       // nak after retryDelay
	answerRetrySoon                   // nak after retrySoonDelay
	answerRedeliver                   // nak at once
	answerTerm                        // never delivered again
)

const (
	// retryDelay is how long a request waits for its next delivery when
	// a read or write it needs failed for now (the bucket, the stream or
	// the transcript unavailable, a state write whose outcome is unknown).
	retryDelay = time.Second
	// retrySoonDelay is the wait of a resume that found the turn about to
	// change (a resume's claim conflicted, and the turn is paused again).
	retrySoonDelay = 100 * time.Millisecond
)

var (
	// leave is no answer: the request goes to its next delivery after the
	// consumer's AckWait (or is another run's to answer).
	leave     = answer{kind: answerLeave}
	ackAnswer = answer{kind: answerAck}
	// retry has the request delivered again after retryDelay.
	retry = answer{kind: answerRetry}
	// retrySoon has the request delivered again after retrySoonDelay.
	retrySoon = answer{kind: answerRetrySoon}
	// redeliver has the request delivered again at once: a replica
	// continues the turn from its checkpoint (a hand-off), or the
	// handler panicked.
	redeliver = answer{kind: answerRedeliver}
)

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
	case answerRetry:
		_ = r.ack.NakWithDelay(retryDelay)
	case answerRetrySoon:
		_ = r.ack.NakWithDelay(retrySoonDelay)
	case answerRedeliver:
		_ = r.ack.NakWithDelay(0)
	case answerTerm:
		_ = r.ack.TermWithReason(a.reason)
	}
}

// publishRejected publishes the answer to a request the service does not run:
// llmw.turn.rejected on P.turn.rejected.<turn_id> (core NATS: a client
// subscribes before it publishes, as for the turn's events).
func (s *Service) publishRejected(rj events.TurnRejected) {
	s.log.Warn("turn: request rejected", "turn_id", rj.TurnID, "request", rj.Request, "code", rj.Code, "reason", rj.Reason)
	env, err := events.NewEnvelope(s.source, events.TypeTurnRejected, rj)
	if err == nil {
		if events.ValidToken(rj.TurnID) {
			env.Subject, env.TurnID = rj.TurnID, rj.TurnID
		}
		err = s.nc.PublishMsg(cenats.NewMsg(s.subjects.TurnRejected(rj.TurnID), env))
	}
	if err != nil {
		s.log.Warn("turn: publish rejection", "turn_id", rj.TurnID, "err", err)
	}
}

// termRejected publishes llmw.turn.rejected and returns the request's answer:
// terminated, it is never redelivered.
func (s *Service) termRejected(rj events.TurnRejected) answer {
	s.publishRejected(rj)
	return termWith(rj.Code)
}
