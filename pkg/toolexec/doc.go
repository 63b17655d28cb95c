// Package toolexec hosts tool.Tool values on NATS (docs/protocol.md §6): the
// library behind cmd/toolexec, and the way to serve one's own typed tools
// from one's own binary:
//
//	weather := tool.Must("get_weather", "Current weather.", getWeather)
//	err := toolexec.Serve(ctx, nc, weather) // until ctx ends, then drain
//
// # What a replica does
//
// Start provisions the streams and buckets if missing (provision.Provision),
// claims each tool in KV LLMW_TOOLS (Catalog.Claim: the replica's claim
// <name>.<host id> and the catalog entry <name> — name, description,
// input_schema, timeout_ms and version from the tool's optional Timeout
// and Version methods — both with a per-key TTL of Config.CatalogTTL,
// renewed every CatalogTTL/3 and a failed renewal again at once until it
// succeeds, renewals unanswered for CatalogTTL/6 moving the connection to
// another server, so that the tools of a replica that died
// leave the catalog, while a tool stays listed as long as any replica of
// it lives), registers the micro service "llmw-toolexec" with
// one endpoint per tool (metadata: description, input_schema, timeout_ms,
// version, call_subject) so that $SRV discovery lists the tools, and
// creates or updates one durable consumer per tool, "tool_<name>" filtered
// on P.tool.call.<name>, that all replicas share.
//
// The endpoint subject is P.tool.invoke.<name> (InvokeSubject): a direct
// request/reply call (data a llmw.tool.call, reply a llmw.tool.result)
// without JetStream, for discovery tools and quick checks. The durable path
// used by turns is P.tool.call.<name>.
//
// # Running a call
//
// Each of Config.Concurrency slots per tool pulls one call at a time (a
// busy replica leaves work to idle ones; after a reconnect the slot pulls
// on a new inbox, so that its requests from before, which stay at the
// server until they expire, deliver no call it would drop), then: decodes it (an undecodable
// call is terminated, after an error result if its ids can be read); acks
// it without running if LLMW_TOOLRESULTS already holds its result (a
// duplicate delivery; not looked for at the first delivery of a call
// whose turn publishes it for the first time, first_publish); validates the input against the schema; runs the
// tool under the earlier of the call's deadline and the tool's timeout,
// sending in-progress acks every AckWait/3; publishes the result to
// P.tool.result.<turn>.<call> with Nats-Msg-Id = <turn id>.<call id>; acks. Invalid
// input, a name mismatch, an expired deadline, a timeout, a panic and a
// cancel (P.tool.cancel.<turn_id>.<call_id>: the turn's call only, since
// call ids repeat across turns) are results with is_error true and a
// message the model can act on. A tool that ignores its context does not
// hold the result past the deadline.
//
// # Client and catalog
//
// Client and RemoteTool (a tool.Tool) are the calling side: subscribe to
// P.tool.stored.<turn>.<call>, where LLMW_TOOLRESULTS republishes each
// result it stored (on a stream without that setting, to
// P.tool.result.<turn>.<call>, and read the stored result back when a
// message comes), return the stored result if
// LLMW_TOOLRESULTS already has one (a resumed turn never runs a finished
// call again; a call the model asked for in this run, tool.CallInfo.First,
// has none and is not looked up), else publish the llmw.tool.call to JetStream with
// Nats-Msg-Id = <turn id>.<call id> (events.ToolMsgID) and a deadline, and
// wait. The ids come from tool.CallFrom(ctx), which the worker sets for
// every tool execution. Cancelling publishes
// P.tool.cancel.<turn_id>.<call_id>; no
// result by the deadline is ErrToolDeadline, so a tool nobody hosts never
// hangs a turn. A stored result that cannot be read (ReadResult: it does
// not decode or validate, or names another call or turn than its
// subject) is still the call's only one, the stream refusing any later
// result as a duplicate: it becomes the error result Unreadable makes,
// naming the field, at once and logged. Catalog reads, writes and
// watches KV LLMW_TOOLS.
//
// # Stopping and failures
//
// Stop drains: no new calls are pulled, the replica withdraws its catalog
// claims (Catalog.Release; the entry goes too when no other replica claims
// the tool), running calls finish, publish and ack. If Stop's context ends first, running calls are cancelled and
// negatively acknowledged so that another replica runs them. A replica
// that dies holds its calls only until AckWait passes without an
// in-progress ack; they are then redelivered to another replica, and the
// stored-result check plus the result's Nats-Msg-Id keep it at one result
// per call.
package toolexec
