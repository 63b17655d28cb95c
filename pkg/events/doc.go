// Package events is llmworker's wire contract in Go: the payloads of every
// message of DESIGN.md, the CloudEvents codec they travel in, and the NATS
// subjects they travel on. It has no I/O of its own; every other package
// (the in-process core and the NATS services alike) speaks these types, so
// that what the core produces is what the services publish, one to one.
//
// # Provider stream events (DESIGN.md §3)
//
// Event is a sealed interface over the flat event enumeration of
// timeline.md: PingEvent, UsageEvent, StatusEvent, ErrorEvent and the block
// lifecycle BlockStart, BlockDelta, BlockStop, BlockAbort. They are value
// types, so that dispatching a token costs no allocation; BlockDelta has a
// hand-written encoder (AppendJSON) because it is the hot path of every
// streamed token. DecodeStreamEvent turns a CloudEvent type and its data
// back into an Event; MarshalEvent is its inverse.
//
// # Messages, tools and requests (§4–§7)
//
// Message and Part are the transcript; ToolDefinition, ToolCall and
// ToolResult are what models and hooks see of tools. CompletionRequest,
// TurnRequest, ResumeRequest (with Decision: approve, deny or an edited
// input), ToolCallRequest/ToolCallResult/ToolCatalogEntry and
// HookRegistration/HookRequest/HookResponse are the request payloads of the
// services; TurnStarted … UsageReport (worker.go) are the worker events for
// UIs, with their CloudEvent types (Type*) and channels (Channel*).
//
// # Decoding
//
// Decode[T] unmarshals JSON and runs T's Validate. Unknown fields are
// ignored (DESIGN.md §2), and every error matches ErrInvalid; where a field
// is to blame it is a *FieldError whose Field is the JSON path
// ("messages[2].content[0].id", "decisions.call_1") so that whoever sent the
// payload can fix it without reading this code.
//
// # CloudEvents
//
// Envelope is one CloudEvent: the attributes, the llmworker extensions
// (turnid, sessionid, seq, traceparent) and the JSON data. Publishers write
// binary content mode (BinaryHeader / WriteBinaryHeader into NATS headers);
// StructuredBody gives structured mode; DecodeEnvelope accepts both, as
// DESIGN.md §2 requires, and DecodeData[T] decodes the data. The attribute
// names match cloudevents/sdk-go's NATS JetStream binding, so either side
// may be the SDK.
//
// # Subjects
//
// Subjects builds every subject of DESIGN.md under one prefix (zero value:
// "llmw"); ValidToken says whether an id can be a subject token and a KV
// key, which is why client-chosen ids are checked with it on decode.
package events
