// Package events is llmworker's wire contract in Go: the payloads of every
// message of docs/protocol.md, the CloudEvents codec they travel in, and
// the NATS subjects they travel on. It has no I/O of its own; every other
// package (the in-process core and the NATS services alike) speaks these
// types, so that what the core produces is what the services publish, one
// to one.
//
// # Provider stream events
//
// Event is a sealed interface over the flat event enumeration of the
// Timeline (docs/architecture.md, "The Timeline"): PingEvent, UsageEvent,
// StatusEvent, ErrorEvent and the block lifecycle BlockStart, BlockDelta,
// BlockStop, BlockAbort. They are value types, so that dispatching a token
// costs no allocation; BlockDelta has a hand-written encoder (AppendJSON)
// because it is the hot path of every streamed token. DecodeStreamEvent
// turns a CloudEvent type and its data back into an Event; MarshalEvent is
// its inverse.
//
// # Worker events
//
// WorkerEvent is a sealed interface with one Go type per worker event for
// UIs (TurnStarted … UsageReport, worker.go and workerevent.go): each
// knows its CloudEvent type (WorkerType) and channel (Channel), so a UI
// switches on Go types. DecodeWorkerEvent reads one back and
// MarshalWorkerEvent writes its data.
//
// # Messages, tools and requests
//
// Message and Part are the transcript; ToolDefinition, ToolCall and
// ToolResult are what models and hooks see of tools. CompletionRequest,
// TurnRequest, ResumeRequest (with Decision: approve, deny or an edited
// input), ToolCallRequest/ToolCallResult/ToolCatalogEntry and
// HookRegistration/HookRequest/HookResponse are the request payloads of the
// services.
//
// # Decoding
//
// Decode[T] unmarshals JSON and runs T's Validate. Unknown fields are
// ignored (docs/protocol.md, "Compatibility"), and every error matches
// ErrInvalid; where a field is to blame it is a *FieldError whose Field is
// the JSON path ("messages[2].content[0].id", "decisions.call_1") so that
// whoever sent the payload can fix it without reading this code.
//
// # CloudEvents
//
// Envelope is one CloudEvent: the attributes, the llmworker extensions
// (turnid, sessionid, seq, traceparent) and the JSON data. BinaryHeader /
// WriteBinaryHeader give binary content mode's headers, StructuredBody
// structured mode; DecodeEnvelope accepts both, and DecodeData[T] decodes
// the data. pkg/cenats binds them to NATS messages (the only package that
// writes ce- headers). The attribute names match cloudevents/sdk-go's NATS
// bindings, so either side may be the SDK.
//
// # Subjects
//
// Subjects builds every subject of docs/protocol.md under one prefix (zero
// value: "llmw"); ValidToken says whether an id can be a subject token and
// a KV key, which is why client-chosen ids are checked with it on decode.
package events
