// Package ingest is the llmw-ingest service of docs/protocol.md §3: it takes
// completion requests over NATS, runs them against LLM providers (anything
// implementing llm.Provider, normally the adapters of pkg/provider) and
// publishes each provider stream as CloudEvents.
//
// # Protocol
//
// The service is a nats.go/micro service named llmw-ingest with one
// endpoint, complete, on P.llm.complete (P is the subject prefix, llmw by
// default) in the default queue group, so that replicas share the load and
// show up in $SRV discovery. A request is a CloudEvent of type
// llmw.llm.complete, in binary or structured content mode, whose data is an
// events.CompletionRequest. The requester subscribes to the stream subject
// first, P.llm.stream.<stream_group>.<request_id> when the request names a
// stream_group and P.llm.stream.<request_id> otherwise, then sends the
// request. Ingest opens the
// provider call, replies {"request_id", "stream_subject"} before the first
// stream event, then
// publishes the stream there: one CloudEvent per event (binary content mode
// by default, Config.Structured for structured mode) with source
// /llmw/ingest/<instance>, seq 1, 2, 3 … per stream, subject and turnid set
// to the request's turnid extension, and the request's sessionid and
// traceparent extensions carried over. Deltas of one block that the
// provider's stream has already delivered while earlier events were still
// being published are joined into one delta (up to MaxJoinedDelta;
// Config.KeepDeltas turns this off); a delta with nothing waiting behind it
// goes out at once. Publishing P.llm.cancel.<request_id>
// (to every replica; only the one running the stream acts) cancels the
// provider call: the stream ends with block aborts and status cancelled.
//
// A request whose data does not fit one NATS message (longer than the
// connection's max payload less RequestHeadroom) travels by name: Client
// stores the data in the LLMW_REQUESTS object store and sends the
// request's headers with no data and Llmw-Request-Object naming the
// object; the service reads it before anything else (stored.go), and the
// Client deletes it once the service answered.
//
// Every stream is normalized once (llm.Normalize with Config.IdleTimeout;
// the built-in adapters' streams are normalized already, with
// provider.Config.IdleTimeout, and pass through), so what is published is
// well-formed whatever the provider does: status
// started first, every block started and then stopped or aborted, exactly
// one terminal status last. A provider that fails mid-stream, goes silent or
// panics gives a failed stream with an error event, never a hang and never a
// dead service.
//
// # Refusals
//
// A request that cannot be served is answered with a micro error reply
// (Nats-Service-Error, Nats-Service-Error-Code and the Llmw-Error header
// naming the kind; the body is {"code", "message", "field"}) and no stream:
// an invalid request names the field (400), a missing key (401), an unknown
// provider or model (404), a request_id that is already streaming (409), a
// body larger than Config.MaxPayload or a stored one larger than
// Config.MaxStoredRequest (413), a stored request whose object is gone
// (400, naming it), a provider that cannot be set up
// (500) and a replica that is shutting down (503). Because the provider call
// is opened before the reply, the provider's own refusals before its first
// byte are error replies too: an unknown model (404), rejected credentials
// (401), a request it finds invalid (400), a rate limit (429) or an outage
// (502) that outlasted the adapter's bounded retries. DecodeReply turns the
// reply into an *Error matching ErrInvalidRequest, ErrMissingAPIKey, ... with
// errors.Is. The service keeps serving after every refusal.
//
// # Providers
//
// Config.Providers maps the provider prefix of the model ("openai" of
// "openai:gpt-4o") to a Factory; the caller supplies them, so that this
// package links no provider SDK. pkg/provider's Default and Builtin wire
// the built-in adapters ("openai" for Chat Completions and compatible
// servers, "openai-responses", "anthropic", "gemini", and the clouds'
// "bedrock", "vertex", "vertex-anthropic", "azure" and "azure-responses");
// Static serves every model with one Provider and AllowModels refuses
// models not listed.
// A provider's refusal is read through llm.ClassifyError (llm.ProviderError
// or an error with an HTTPStatus method), which every adapter implements.
//
// # Shared provider limits
//
// With Config.Quota (a pkg/quota Limiter), a call waits for the provider
// limits all replicas share before its provider call opens, announced by a
// queued status on its stream subject, and gives them back when its stream
// ends, charged the tokens its usage events reported; a provider's 429
// cools the limits down for every replica (docs/architecture.md, "Shared
// provider limits").
//
// # Client
//
// Client is the requesting side of the same protocol, an llm.Provider over
// NATS. Its requests name a stream group of its own, and one
// subscription to P.llm.stream.<group>.*, made before its first request,
// hands each message to its stream's queue (bounded by
// ClientOptions.Buffer, growing with the backlog), so an open stream costs
// no subscription of its own and the subscription never blocks. An ingest
// that predates stream groups is detected by its reply and served on
// P.llm.stream.<request_id> (Client.Stream). An error reply is the same
// *Error the service sends (DecodeReply), so the kind survives the hop;
// the warnings of a successful reply (settings the provider does not
// have, taken from the adapter's stream, an llm.Warner) are the Warnings
// of the Client's stream. A
// lost or repeated seq (CodeStreamGap), an idle stream (CodeIdleTimeout) or
// an undecodable event (CodeInvalidEvent) end the stream well-formed: open
// blocks aborted, an error event, status failed. Cancelling the context
// publishes P.llm.cancel.<request_id> and ends the stream with status
// cancelled.
//
// # Lifecycle
//
// New, then Start; Stop drains: the endpoint stops taking requests, running
// streams finish (or are cancelled when Stop's context ends), then the
// connection is flushed. Stop leaves the connection open.
//
// # Speed
//
// Publishing is the hot path, up to one message per streamed token: each
// stream keeps one message, one header map and its buffers; deltas are
// encoded without reflection; id, time and seq cost one allocation per
// event, and nothing is flushed per event. When the provider outpaces
// ingest, the deltas already read ahead share a message, so a burst costs
// one message's headers, routing and decoding instead of one per token.
// BenchmarkPublishDeltas measures it.
package ingest
