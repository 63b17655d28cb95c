package turn

import "github.com/llmworker/llmworker/pkg/events"

// ownMessages makes the worker's llmw.turn.completed, which holds the
// turn's whole transcript (the session's messages before the turn, then
// the turn's own), the event the wire carries: the turn's own messages
// and the transcript's length after the turn (docs/protocol.md §5,
// "Turn completed"). A session's later turns then publish events that do
// not grow with it; the session's transcript stays readable whole
// through LoadSession.
//
// The worker's messages are the transcript from the run's Base on (the
// session's active compaction's To when the turn started): the session's
// items [Base, SessionPrefix), then the turn's own.
func (t *turnRun) ownMessages(d events.TurnCompleted) events.TurnCompleted {
	base := t.tx.base
	d.TranscriptLength = base + len(d.Messages)
	d.Messages = turnOwn(d.Messages, base, t.base.SessionPrefix)
	d.SessionID = t.session
	return d
}

// turnOwn is the turn's own part of msgs, a transcript held from
// position base on whose positions [0, sessionPrefix) are the
// session's.
func turnOwn(msgs []events.Message, base, sessionPrefix int) []events.Message {
	return msgs[min(max(sessionPrefix-base, 0), len(msgs)):]
}
