package turn

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
)

// rejected publishes the answer to a request the service does not run:
// llmw.turn.rejected on P.turn.rejected.<turn_id> (core NATS: a client
// subscribes before it publishes, as for the turn's events).
func (s *Service) rejected(rj events.TurnRejected) {
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

// reject publishes llmw.turn.rejected and returns the request's answer:
// terminated, it is never redelivered.
func (s *Service) reject(rj events.TurnRejected) answer {
	s.rejected(rj)
	return termWith(rj.Code)
}

// digest is the RequestDigest of a submit's data.
func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
