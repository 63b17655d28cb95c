// Package natsrt holds the NATS building blocks of the llmworker services
// (DESIGN.md §2, §3, §5, §6, §8). The core packages (events, llm, tool,
// worker, ...) never import NATS; this package adapts them to it.
//
// # Provisioning
//
// Provision creates or updates, idempotently and safely from many replicas
// at once, the streams and KV buckets every service relies on:
//
//	LLMW_TURNS        work queue   P.turn.submit, P.turn.resume       dup window 10m
//	LLMW_EVENTS       limits, age  P.events.>                         max age 24h, direct get
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
//
// # Worker events
//
// Publisher sends CloudEvents in binary content mode (events.Envelope
// headers as NATS headers, data as the body) with core NATS publishes that
// the streams capture. Publisher.Turn returns a turn's EventPublisher, which
// stamps source, subject (the turn id), turnid, sessionid and a seq
// counting per turn across channels, publishing on
// P.events.<session|_>.<turn>.<channel>. Deltas are encoded without
// reflection into a reused buffer. After a crash, LastEventSeq reads the
// last seq of a turn from LLMW_EVENTS so that the next replica continues
// the sequence.
//
// # Model calls
//
// IngestClient is an llm.Provider over NATS (§3): it subscribes to
// P.llm.stream.<request_id> first, then requests P.llm.complete; a micro
// error reply is a *ProviderError (ErrProvider) naming code and message.
// The stream is read from a buffered channel subscription, so the NATS
// dispatcher never blocks; a lost or repeated seq (CodeStreamGap), an idle
// stream (CodeIdleTimeout) or an undecodable event (CodeInvalidEvent) end
// the stream well-formed: open blocks aborted, an error event, status
// failed. Cancelling the context publishes P.llm.cancel.<request_id> and
// ends the stream with status cancelled.
//
// # Tools
//
// ToolClient and RemoteTool (a tool.Tool) run calls on toolexec replicas
// (§6, §8): subscribe to P.tool.result.<turn>.<call>, return the stored
// result if LLMW_TOOLRESULTS already has one (a resumed turn never runs a
// finished call again), else publish the llmw.tool.call to JetStream with
// Nats-Msg-Id = <turn id>.<call id> (events.ToolMsgID) and a deadline, and wait. The call ids come from
// the context: WithCall, or else worker.CallInfoFrom (the worker sets it
// for every tool execution). Cancelling publishes P.tool.cancel.<call_id>; no result by the
// deadline is ErrToolDeadline, so a tool nobody hosts never hangs a turn.
// Catalog reads, writes and watches KV LLMW_TOOLS.
package natsrt
