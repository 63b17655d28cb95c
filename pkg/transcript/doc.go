// Package transcript stores turn and session transcripts append-only in
// the JetStream stream LLMW_TRANSCRIPTS: one stream message per item (an
// events.Message, JSON as events.Message encodes it) on
// P.transcript.<kind>.<key>, so that a transcript is not bounded by one
// NATS message and a writer stores only what it adds.
//
// # Positions, refs and the chain
//
// A transcript's items are at positions 0..Len-1. A Ref names one
// transcript as a writer stored it: its length and the stream sequence
// of its last item. Every item carries its position (Llmw-Transcript-Pos)
// and the stream sequence of the item before it in the same transcript
// (Llmw-Transcript-Prev, 0 for the first stored item). A reader walks
// that chain back from Ref.Seq, so what it returns is exactly the
// transcript the Ref names, whatever else was appended to the subject:
// items of a writer that lost a race (a replica that had lost its turn,
// a session append whose record was not written) are off the chain and
// never read.
//
// # Appending
//
// Append publishes each message expecting the subject's last message at
// the sequence the one before it got (Nats-Expected-Last-Subject-Sequence):
// of two writers that read one tail, only one appends; the other gets
// ErrConflict and must re-read where it stands. The first publish of an
// append expects the tail the caller names, which is the subject's last
// message (Tail), not necessarily the Ref's: items off the chain may lie
// between.
//
// # Items larger than a message
//
// A turn request's large image and file parts go to LLMW_MEDIA before
// they are appended (the turn service offloads them, pkg/media). An item
// larger than what one
// message may carry (the connection's max payload less MessageOverhead)
// is stored in chunks: consecutive messages with the same position and
// Llmw-Transcript-Part: i/n, each chained to the one before; the reader
// joins them. An item is read only when its last chunk is on the chain,
// so an append cut off mid-item leaves nothing a Ref names.
package transcript
