// Package timeline is the Timeline of docs/architecture.md#the-timeline: it turns the flat stream
// of provider events (pkg/events, docs/protocol.md §3) into calls of typed handlers,
// so that code consuming a model's answer needs no loop-and-switch state
// machine of its own.
//
// # Kinds and handlers
//
// A Kind is a typed token for a class of events. Meta kinds (Usage, Ping,
// Status, Error) carry one provider event each; block kinds (TextBlock,
// ThinkingBlock, ToolUseBlock) carry one event per phase of a content block
// (PhaseStart, PhaseDelta, PhaseStop, PhaseAbort).
//
// A Handler[E, S] handles the events E of one kind and chooses its own scope
// type S: state that lives as long as one block. Several handlers of the same
// kind may use different scopes:
//
//	tl := timeline.New()
//	timeline.OnFunc(tl, timeline.TextBlock, func(_ *struct{}, ev timeline.TextBlockEvent) {
//		fmt.Print(ev.Text) // no scope needed
//	})
//	timeline.OnFunc(tl, timeline.TextBlock, func(buf *string, ev timeline.TextBlockEvent) {
//		*buf += ev.Text // a string per block
//	})
//	for s.Next() {
//		tl.Dispatch(s.Current())
//	}
//
// # Dispatch order and scopes
//
// Meta events are dispatched at once, in the order the handlers were
// registered, so they never move relative to block events. For block events
// every handler gets a fresh zero scope when the block starts; the scope is
// dropped after the stop or abort. A delta that arrives without a start (as
// OpenAI-style streams do) starts the block and its scopes implicitly.
// tool_result blocks go to text handlers. Blocks are tracked by index, so
// interleaved blocks each keep their own scopes.
//
// Events are passed by value and dispatching a delta allocates nothing
// (BenchmarkDispatchTextDelta2Handlers).
//
// # Aborting
//
// When a stream is cancelled or fails mid-block, AbortCurrentBlock sends
// PhaseAbort to every open block and drops their scopes.
//
// # Collectors
//
// TextBlockCollector, ThinkingBlockCollector and ToolCallCollector are the
// built-in handlers the worker uses: they keep the text, thinking and tool
// calls of the blocks that stopped. ToolCallCollector parses the input JSON at
// the stop; input that is not a JSON object is reported on the call
// (CollectedCall.Err matches ErrInvalidToolInput), never by a panic.
//
// # Concurrency
//
// A Timeline is driven by one goroutine. The collectors may be read from
// other goroutines while it runs.
package timeline
