// Package provision creates the JetStream streams and KV buckets every
// llmworker service relies on. Every replica of every service calls
// Provision on start: it is idempotent and safe to run from many replicas
// at once.
//
//	LLMW_TURNS        work queue   P.turn.submit, P.turn.resume       dup window 10m
//	LLMW_EVENTS       limits, age  P.events.>                         max age 24h, direct get, atomic batches
//	LLMW_TOOLCALLS    work queue   P.tool.call.>                      max age 24h, dup window 10m
//	LLMW_TOOLRESULTS  limits, age  P.tool.result.>                    max age 24h, dup window 10m, direct get
//	KV LLMW_SESSIONS, LLMW_TOOLS, LLMW_HOOKS, LLMW_TURN_STATE         history 1
//
// Choices: file storage (Memory for tests), one replica (Replicas: 3 in a
// cluster), worker events kept 24 hours so that a late UI can replay a
// turn (EventsMaxAge). The duplicate windows exceed a few tool-call
// redeliveries (AckWait is 30 s) and a turn replica taking a turn over, so
// a call id or turn id sent twice as Nats-Msg-Id is stored once; beyond the
// window the executors still check LLMW_TOOLRESULTS before running a call.
// Unconsumed tool calls expire after ToolCallsMaxAge (a tool nobody hosts
// any more must not keep calls forever). Every replica applies the same
// configuration; the last writer wins when options differ.
package provision
