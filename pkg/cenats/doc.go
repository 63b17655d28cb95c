// Package cenats is llmworker's CloudEvents binding for NATS messages: the
// one writer and reader every publisher and consumer of the module uses, so
// that no code builds ce- headers by hand.
//
// # Modes
//
// Binary content mode (the default) carries the attributes as ce- headers
// and the JSON data as the body; structured mode carries one
// application/cloudevents+json document. Readers accept both (Decode).
// docs/protocol.md ("CloudEvents on NATS") is the contract.
//
// # Writers
//
// NewMsg builds one message from an events.Envelope, for requests, calls
// and control messages. Writer is for streams of events that share their
// attributes (a provider stream, a turn's worker events): it writes the
// fixed attributes once, reuses its header map, value strings and buffers,
// and sets only id, type, time and seq per event, so an event costs one
// small allocation. Ids are "<random>.<seq>", unique per writer. A writer
// that may wait long between events (a turn's, while the turn waits on its
// model or a tool) gives its header map and buffers back with Release; its
// next event makes them again.
//
// Why not cloudevents/sdk-go's NATS binding: it builds a binding.Message
// and a header map per event (several allocations per streamed token,
// see BenchmarkWriterDelta and BenchmarkSDKEncode). pkg/events still uses
// sdk-go to validate and to marshal structured events, so the two agree on
// the format.
package cenats
