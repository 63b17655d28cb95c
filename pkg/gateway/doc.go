// Package gateway serves llmworker turns to web UIs over HTTP in the
// Vercel AI SDK's UI message stream protocol (v1) — what useChat speaks —
// and serves a web UI that speaks it too (docs/protocol.md, "Gateway").
//
//	POST /api/chat                 a chat request (id, messages, trigger): a new
//	                               user message starts a turn of session <id>;
//	                               approval responses resume its paused turn.
//	                               Answer: the turn's UI message stream (SSE).
//	GET  /api/chat/{id}/stream     resume: the session's running or paused
//	                               turn, replayed from LLMW_EVENTS and then
//	                               live; 204 when none. ?turn=<id> replays any
//	                               turn of the session.
//	POST /api/chat/{id}/stop       cancel the session's turn (closing a
//	                               stream does not).
//	POST /api/chat/{id}/compact    compact the session at once, by a turn service
//	                               (P.session.compact.<id>).
//	GET  /api/sessions             the sessions the caller may read.
//	GET  /api/info                 the models and tools a request may pick.
//	GET  /                         the web UI (embedded; no external network).
//
// Every part of a stream is mapped by a Mapper from the turn's worker
// events as LLMW_EVENTS stores them, from the first, and from those of
// the child turns its sub-agent calls run (any depth), which the stream
// follows from the parent's llmw.tool.child on and writes into the
// parent's message under the child's turn id: the same turn gives
// the same parts with the same ids on every replica, which is why a
// stream can be resumed after a page reload or on another replica with
// nothing lost or doubled, without a store of the gateway's own. Client
// reads a stream from Go.
package gateway
