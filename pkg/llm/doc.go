// Package llm is the provider side of the core: the Provider interface that
// yields the provider stream events of docs/protocol.md §3, with no
// provider SDK and no NATS. The provider adapters (pkg/provider/...)
// implement it; so does ingest's NATS client, and tests use llmtest's
// Scripted.
//
// # Streams
//
// A Stream is an iterator of events.Event (Next, Current, Err, Close).
// SliceStream plays a fixed list; Collect reads a stream to its end. An
// adapter's stream embeds a Pump (the pull loop: status started, a queue
// of translated events, a read of the provider per empty queue, Close from
// any goroutine) and runs its request under a Guard (the caller's cancel,
// Close and an idle timer cancel it), so that it is SelfBounded.
//
// # Well-formed streams
//
// Consumers (the Timeline, the worker, ingest's publisher) rely on the
// invariants of docs/protocol.md §3: status started first, every block started,
// streamed and ended exactly once on an index of its own, tool_use blocks
// with an id and a name, exactly one terminal status last. Normalize wraps
// any stream so that these hold whatever the provider does, and turns
// source errors, cancellation and idle timeouts into events. CheckWellFormed
// checks the invariants (in tests).
//
// # Provider errors
//
// A provider that refused or could not be reached reports a
// ProviderError (kind, HTTP status, retryable); ClassifyError reads one
// from any error chain, so callers need no SDK's error types.
//
// # Testing
//
// Package llmtest has Scripted, a Provider that plays one Script per call
// and records the requests it gets, with step builders for the usual
// answers (text, thinking, parallel tool calls, a model that hangs, a call
// or a stream that fails).
package llm
