// Package emit publishes the worker events of a turn (docs/protocol.md
// §5) on P.emit.<session|_>.<turn>.<channel>, which the stream
// LLMW_EVENTS stores as P.events.… and republishes there. A Publisher
// stamps the CloudEvents source of its service; Publisher.Turn returns a
// turn's EventPublisher, which gives the events one seq per turn across
// channels and stores them fenced: each expects the turn's last stored
// event to be the one this publisher stored before it, so that once
// another replica published for the turn, the server refuses the rest
// (ErrFenced). Events that queue behind an acknowledgement go as one
// atomic batch where the stream allows it, and deltas of one block
// coalesce while they wait (EventPublisher).
//
// The turn service (pkg/turn) publishes every turn's events with it, and
// pkg/mcp's gateway the events of the calls it serves. LastEvent reads
// where a turn's events end, for a replica that continues the turn.
package emit
