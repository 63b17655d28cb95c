package events

// TypeTurnRejected is the CloudEvent type of the answer to a turn request
// (submit or resume) the turn service does not run, published on
// P.turn.rejected.<turn_id> (Subjects.TurnRejected).
const TypeTurnRejected = "llmw.turn.rejected"

// Codes of llmw.turn.rejected.
const (
	// RejectInvalidRequest: the request could not be decoded or is not
	// valid (the reason names the field), or its turn id cannot be a
	// subject token.
	RejectInvalidRequest = "invalid_request"
	// RejectUnknownTurn: a resume or cancel of a turn id that has no turn
	// (never started, or its state expired).
	RejectUnknownTurn = "unknown_turn"
	// RejectTurnExists: a submit with the id of a turn that exists (running,
	// paused or ended) and a different request; an identical submit (a
	// retried publish) is ignored instead.
	RejectTurnExists = "turn_exists"
	// RejectNotPaused: a resume of a turn that is not paused (it runs, or
	// it ended), for example a resume sent twice.
	RejectNotPaused = "not_paused"
	// RejectTurnEnded: a cancel of a turn that already ended (completed,
	// failed or aborted); Status says how.
	RejectTurnEnded = "turn_ended"
	// RejectUnknownAgent: a submit whose agent ("NAME" or "NAME@REV")
	// names no definition in LLMW_AGENTS (deleted, never put, or a
	// revision past the history the bucket keeps).
	RejectUnknownAgent = "unknown_agent"
)

// TurnRejected is the data of llmw.turn.rejected: a request that was not
// run, and why. Requests that were run are answered by the turn's own
// events (P.events.…) instead.
type TurnRejected struct {
	// TurnID is the turn id the request named ("" when it named none).
	TurnID string `json:"turn_id,omitempty"`
	// Request is the CloudEvent type of the request: llmw.turn.submit,
	// llmw.turn.resume or llmw.turn.cancel ("" when it was not readable).
	Request string `json:"request,omitempty"`
	// Code says why, for programs.
	Code string `json:"code" jsonschema:"enum=invalid_request,enum=unknown_turn,enum=turn_exists,enum=not_paused,enum=turn_ended,enum=unknown_agent"`
	// Reason says why, for people: what was wrong and what to change.
	Reason string `json:"reason"`
	// Status is the status of the existing turn (turn_exists, not_paused,
	// turn_ended, and invalid_request for a request that names a turn
	// that exists): running, paused, completed, failed or aborted.
	Status string `json:"status,omitempty"`
}
