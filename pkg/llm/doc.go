// Package llm is the provider side of the core: the Provider interface that
// yields the provider stream events of DESIGN.md §3, with no provider SDK and
// no NATS. The provider adapters (pkg/provider/...) implement it; so does the
// turn service's NATS client of ingest, and tests use Scripted.
//
// # Streams
//
// A Stream is an iterator of events.Event (Next, Current, Err, Close).
// SliceStream plays a fixed list; Collect reads a stream to its end.
//
// # Well-formed streams
//
// Consumers (the Timeline, the worker, ingest's publisher) rely on the
// invariants of DESIGN.md §3: status started first, every block started,
// streamed and ended exactly once on an index of its own, tool_use blocks
// with an id and a name, exactly one terminal status last. Normalize wraps
// any stream so that these hold whatever the provider does, and turns
// source errors, cancellation and idle timeouts into events. CheckWellFormed
// checks the invariants (in tests).
//
// # Testing with Scripted
//
// Scripted is a Provider that plays one Script per call and records the
// requests it gets. Step builders cover the usual answers: TextStep,
// ThinkingStep, ToolStep (parallel calls), TextToolStep, BlockingStep (hangs
// until cancelled), FailStep (the call fails) and FailMidStep (the stream
// breaks); NewStep with TextBlockEvents, ThinkingBlockEvents and
// ToolUseBlockEvents builds others.
package llm
