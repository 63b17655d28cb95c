// Package telemetry traces llmworker turns with OpenTelemetry, one trace per
// turn across every service (docs/architecture.md, "Tracing").
//
// # Spans
//
// The core packages make their spans with the global tracer provider
// (Tracer): pkg/worker the turn (invoke_agent), each model call
// (chat {model}) and each tool execution (execute_tool {tool}); pkg/hook
// each hook call (hook {event} {hook}). The services add the server side
// of each hop: ingest's completion, toolexec's call, a hook server's
// answer. Attribute names follow the OpenTelemetry GenAI semantic
// conventions (the gen_ai.* constants here). Until a program installs a
// tracer provider (Setup, or its own otel.SetTracerProvider) the global
// one is a no-op and a span costs a few nanoseconds.
//
// # Propagation
//
// Trace context crosses NATS in the traceparent/tracestate extensions of
// the CloudEvents distributed-tracing extension (events.Envelope's
// TraceParent and TraceState, ce-traceparent and ce-tracestate in binary
// mode), written and read by the W3C trace-context propagator: Inject
// before a request is published, Extract where it is received. Injection
// does not depend on Setup: a library user with its own provider
// propagates too.
//
// # Configuration
//
// Setup installs an SDK tracer provider configured only by the standard
// OTEL_* environment variables; without an OTLP endpoint (or with
// OTEL_SDK_DISABLED=true) it installs nothing.
package telemetry
