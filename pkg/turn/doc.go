// Package turn is the turn service (docs/protocol.md §5–§8): it consumes turn
// requests from the JetStream work queue LLMW_TURNS and runs each turn with
// the worker core (pkg/worker) wired to NATS — model calls go to ingest,
// tools to toolexec, worker events to the subjects UIs subscribe to, and the
// turn's state to a KV checkpoint so that any replica can finish it.
//
//	svc, err := turn.New(nc, turn.Config{Hooks: chain})
//	err = svc.Start(ctx) // provisions, binds the shared consumer, serves
//	...
//	err = svc.Stop(ctx)  // drains
//
// # How a turn runs
//
// A request is a CloudEvent (binary or structured mode) on P.turn.submit
// (llmw.turn.submit, events.TurnRequest) or P.turn.resume
// (llmw.turn.resume, events.ResumeRequest). Every replica pulls from one
// durable consumer (ConsumerName) and runs up to Config.MaxConcurrent turns
// at once, one goroutine each. For a new turn the service
//
//   - selects the tools the request's "tools" names ("*" = every tool):
//     Config.Tools run in-process, the rest are the catalog's (KV
//     LLMW_TOOLS) and run on toolexec through toolexec.RemoteTool; a name that
//     is in neither fails the turn (code "unknown_tool"). Without "tools" a
//     turn gets Config.DefaultTools (none by default);
//   - puts the session's transcript (LLMW_TRANSCRIPTS, named by the
//     session's record in KV LLMW_SESSIONS) before "messages" when the
//     request has a session_id;
//   - runs the worker: model calls go to ingest over NATS
//     (ingest.Client: it subscribes before it asks, checks the
//     stream's seq for gaps and ends a silent stream after IdleTimeout); a
//     call that failed for a transport reason (see DefaultRetryable) is made
//     again up to StepRetries times within its step (the worker's
//     Config.RetryStep), after block.abort events for its partial blocks
//     and a new llmw.turn.step with the attempt number; the failed
//     attempt's finished blocks are dropped; a step that still failed
//     before its first block goes on with the request's fallback_models
//     (else Config.FallbackModels) on a retryable failure or a rate
//     limit; hooks are Config.Hooks, a chain shared with whoever
//     keeps it in sync with LLMW_HOOKS;
//   - publishes every worker event on P.events.<session|_>.<turn>.<channel>
//     (stream LLMW_EVENTS) with a seq that counts per turn across channels,
//     so a UI can rebuild the turn live or replay it later with an ordered
//     consumer;
//   - on completion appends the turn's messages to the session (expected
//     revision; re-read and retried on a conflict) before it publishes
//     llmw.turn.completed — so a client that submits the session's next
//     turn on that event finds this one's transcript — and acknowledges
//     the request.
//
// A request that cannot be decoded or does not validate is answered
// llmw.turn.rejected (code "invalid_request", the reason names the field;
// status the turn's when its id names one, which is left as it was) and
// is terminated — never redelivered; a submit whose id has no turn also
// gets llmw.turn.failed as its only event (docs/protocol.md §5, "Invalid
// requests").
//
// # Durability
//
// The request stays unacknowledged while the turn runs (in-progress acks
// every AckWait/3). The turn's State — the worker's checkpoint plus the
// request and the seq of the last event — is written to KV LLMW_TURN_STATE
// at every step boundary with the expected revision; a revision conflict,
// or a worker event the stream refuses (see Worker events), means another
// replica owns the turn, and this run stops without publishing anything
// more. A run's state writes go one at a time, in order. The checkpoint
// before a model call is written behind, while the call is made (the call
// has no effect outside the turn, and a replica continuing from the
// checkpoint before it makes the call again); the run's fence — every
// tool call and hook request, the terminal event and the session's
// transcript, the run's end — waits for it, and its failure stops the
// call and the run.
//
// When a request is delivered, a run of its turn on this replica, or else
// the turn's state, decides (docs/architecture.md, "A turn request's
// life"): none → a fresh run; running (a replica died, or stopped at a
// step boundary) and the request delivered again → the turn continues
// from the checkpoint on this replica: block.abort events for the blocks
// the previous replica left open (read back from LLMW_EVENTS), seq
// continuing where it stopped, then worker.RunFrom — tool calls whose
// results are in LLMW_TOOLRESULTS are not run again, an interrupted model
// call is made again; finished → nothing is published again and the
// request is answered (docs/protocol.md §5). A paused turn acknowledges
// its request; a resume request (decisions approve / deny / edit, extra
// messages) continues it with llmw.turn.resumed. A resume the turn cannot
// apply (no decision while calls wait, a decision for a call that does
// not wait for one) is answered with llmw.turn.rejected (invalid_request);
// the turn stays paused, its events untouched.
//
// A state larger than the NATS max payload less 1024 bytes without its
// transcript (the system prompt, the tools, the pending calls' outputs)
// fails the turn with code "too_large" and a reason saying so. A
// completed event whose messages do not fit one NATS message carries the
// last of them alone (messages_truncated; all are in the turn's
// transcript), or none; one too large even so fails the turn (too_large).
//
// # Cancellation
//
// P.turn.cancel.<turn_id> reaches every replica, and one of them through
// a queue group on P.turn.cancel.> (which answers a subject of more
// tokens with llmw.turn.rejected, invalid_request). The replica running
// the turn cancels its context: the model call stops (the IngestClient
// publishes P.llm.cancel.<request>), running remote tools are cancelled
// (P.tool.cancel.<turn>.<call>), the on_abort hooks run and the turn ends
// as llmw.turn.aborted with its checkpoint marked aborted. For a turn it
// does not run, the queue group's replica looks at the turn's state: a
// paused turn is aborted there (its on_abort hooks run there); a turn id
// with no state gets a cancelled state (Config.CancelTTL), so its submit
// ends aborted when it arrives; the cancel of a running turn is stored
// (Config.CancelTTL) for the replica that takes the turn over if its
// replica died, and published again on P.turn.cancel.<turn_id> with the
// header Llmw-Cancel-Forwarded-By (events.HeaderCancelForwardedBy), which
// the replica running the turn applies and the queue group ignores: that
// replica may have had the client's cancel before it registered the run,
// and it registers the run before it writes the running state this
// replica read; one that ended is answered llmw.turn.rejected
// (turn_ended), with nothing written.
//
// A cancel of a turn cancels its sub-agents' child turns (below), at any
// depth, but those whose agent says on_parent_cancel "abandon".
//
// A turn waiting for a sub-agent's child turn is handed off as soon as
// Stop starts to drain: the replica that continues it waits for the
// child.
//
// Stop drains: no more requests are fetched, running turns go on to their
// end or their next step boundary, where the checkpoint is written and the
// request is negatively acknowledged, so another replica continues at once.
// Turns still running when Stop's context ends are cancelled silently and
// left to another replica the same way. A hand-off is not an abort: it
// ends the run with worker.ErrDetached, so no on_abort hook runs and no
// terminal event is published; the replica that continues the turn ends
// it.
//
// # Sub-agents
//
// A turn of an agent whose definition lists agents offers each as a tool,
// pinned (NAME@REV, State.SubAgents) when the turn starts. A call runs a
// child turn: submitted on P.turn.submit with the id ChildTurnID(parent
// turn, call) and TurnRequest.Parent, followed through its state in
// LLMW_TURN_STATE, and answered with the child's final answer (or an
// error result naming its failure). The parent's checkpoint lists the
// children it waits for (State.Children); a replica that continues the
// parent submits the same child again, a duplicate the child's turn
// answers as its own, and takes its answer from its state and terminal
// event. The parent's stream names each child with llmw.tool.child. The
// root turn's budgets bound the whole tree (a ledger per tree in
// LLMW_TURN_STATE), and the parent's usage events include its
// children's. Config.MaxDepth and Config.MaxChildren bound the tree
// (docs/protocol.md §5, "Sub-agents"; Example_subAgents).
//
// # Worker events
//
// The service publishes a turn's worker events with pkg/emit:
// emit.Publisher.Turn returns a turn's EventPublisher, which stamps source,
// subject (the turn id), turnid, sessionid and a seq counting per turn
// across channels. Publish queues an event (deltas encoded without
// reflection) and returns; a sender goroutine publishes the turn's events
// in order on P.emit.<session|_>.<turn>.<channel>, each a JetStream publish
// fenced on the turn's previous event (Nats-Expected-Last-Subject-Sequence
// on P.events.<session|_>.<turn>.*); what queued behind an
// acknowledgement goes as one atomic batch fenced on its first event,
// stored whole or refused whole, where the stream allows atomic publish
// (emit.PublisherOptions.NoAtomicBatches turns it off). LLMW_EVENTS
// stores it as P.events.<session|_>.<turn>.<channel> and republishes it
// there, so live
// subscribers see only stored events. Once another replica published for
// the turn, the server refuses the rest (ErrFenced) and the run stops
// quietly; Flush waits for the events published before it to be stored
// (not for those published while it waits), and the service calls it (or
// FlushTo the checkpoint's seq) before every checkpoint and before it
// acknowledges the request, and FlushTo before every tool call and hook
// request (pkg/fence: every event but the calls' own llmw.tool.started,
// whose calls a stored checkpoint lists already). A replica continuing a
// turn reads where its events end with emit.LastEvent
// (docs/architecture.md#fencing).
//
// # Configuration
//
// Config's zero value works. The fields that matter most in production:
// Hooks (the shared chain), AckWait (how fast a dead replica's turns move:
// the request reappears after AckWait), MaxConcurrent, IdleTimeout and
// StepRetries. Config.Provider replaces ingest with an in-process provider
// (tests, benchmarks, embedding). cmd/turn is the service as a command.
package turn
