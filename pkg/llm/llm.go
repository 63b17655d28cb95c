package llm

import (
	"context"

	"github.com/llmworker/llmworker/pkg/events"
)

// Request is a completion request (docs/protocol.md §3).
type Request = events.CompletionRequest

// Provider opens model streams.
type Provider interface {
	// Stream starts a completion. Cancelling ctx stops the provider call;
	// the stream then ends with status cancelled. Stream must not modify
	// req: its messages may be the caller's own history (pkg/worker
	// passes it without a copy when no on_message_send hook runs).
	Stream(ctx context.Context, req *Request) (Stream, error)
}

// ProviderFunc adapts a function to Provider.
type ProviderFunc func(ctx context.Context, req *Request) (Stream, error)

// Stream implements Provider.
func (f ProviderFunc) Stream(ctx context.Context, req *Request) (Stream, error) { return f(ctx, req) }

// Stream is an iterator over provider stream events, in the style of
// openai-go's ssestream:
//
//	for s.Next() {
//		ev := s.Current()
//	}
//	if err := s.Err(); err != nil { ... }
//
// A well-formed stream (see Normalize) starts with status started and ends
// with a terminal status; Err is non-nil only when the stream could not be
// read to that end.
type Stream interface {
	Next() bool
	Current() events.Event
	Err() error
	// Close releases the stream; it is safe to call more than once and
	// after the stream ended.
	Close() error
}

// Warner is implemented by streams that can say which settings of their
// request the provider does not have, so were not sent
// (events.ModelOptions): the built-in adapters' streams, the streams
// Normalize returns over such a source, and ingest's Client streams (from
// the completion reply). The list is known when the stream is returned.
type Warner interface {
	Warnings() []events.Warning
}

// WellFormed is implemented by streams that are well-formed by
// construction (see Normalize): the streams Normalize returns, and a
// client's stream of events that a producer normalized before sending
// them (ingest's Client). Normalize returns such a stream unchanged, so
// that a stream is normalized once however many hops it takes.
type WellFormed interface {
	Stream
	WellFormed()
}

// SelfBounded is implemented by sources that bound their own waits, as the
// built-in provider adapters' streams do (they cancel their HTTP request):
// Next returns when the context the stream was opened with is cancelled
// (the stream then ends cancelled) and when the provider is silent for the
// idle timeout the source was given (it then ends with error idle_timeout
// and status failed), and Close may be called from any goroutine,
// concurrently with Next. Normalize reads such a source inline, without the
// goroutine and read-ahead it otherwise needs to bound a wait; the source's
// own idle timeout applies.
type SelfBounded interface {
	Stream
	SelfBounded()
}

// Buffered is implemented by streams that can tell how much of what they
// will yield is already read: Buffered returns how many events (the
// stream's end counting as one) Next can return without waiting for the
// provider. It is a hint for batching, not a promise: a stream may still
// wait when what it had buffered turns out to yield nothing (an event that
// normalization drops). The streams Normalize returns implement it
// (counting what the read-ahead holds, or asking a source that implements
// it in turn), as do SliceStream's. A consumer that publishes what it
// reads (ingest) joins the deltas that are already waiting into one
// message instead of one message per token.
type Buffered interface {
	Stream
	Buffered() int
}
