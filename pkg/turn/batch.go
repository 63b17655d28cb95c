package turn

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// nats.go's JetStream API has no atomic batch publish (nats-server ≥ 2.12)
// and no error codes for its refusals. The EventPublisher sends a batch
// itself: every message but the last with a core publish, the last (the
// commit) through jetstream.JetStream.PublishMsg, whose acknowledgement
// answers for the batch. What it relies on from the server is pinned by
// publisher_batch_test.go: a batch is stored whole or refused whole, its
// fence is checked at the commit, and a stream without atomic publish
// refuses a batch before storing any of it.

// The headers of an atomic batch.
const (
	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"
)

var commitHdr = []string{"1"}

// deleteBatchHeaders leaves the writer's reused header map as a single
// event's.
func deleteBatchHeaders(h nats.Header) {
	delete(h, headerBatchID)
	delete(h, headerBatchSeq)
	delete(h, headerBatchCommit)
}

// The server's refusals of an atomic batch, all before anything of it was
// stored (nats-server's server/errors.json).
const (
	errCodeBatchDisabled          jetstream.ErrorCode = 10174 // the stream does not allow atomic publish (any more)
	errCodeBatchMissingSeq        jetstream.ErrorCode = 10175
	errCodeBatchIncomplete        jetstream.ErrorCode = 10176 // a message of it was refused (with no one to tell) or lost
	errCodeBatchUnsupportedHeader jetstream.ErrorCode = 10177
	errCodeBatchInvalidID         jetstream.ErrorCode = 10179
	errCodeBatchTooLarge          jetstream.ErrorCode = 10199 // the server's max batch size is below maxAtomicBatch
	errCodeBatchInvalidCommit     jetstream.ErrorCode = 10200
	errCodeBatchTooManyInflight   jetstream.ErrorCode = 10210 // the stream's or server's limit of batches in flight
)

// batchRefusal says what a refusal code means for the publisher:
// errNotBatched (store the events one by one this time), errBatchesOff
// (and stop batching), nil for a code that is no batch refusal.
func batchRefusal(code jetstream.ErrorCode) error {
	switch code {
	case errCodeBatchIncomplete, errCodeBatchTooManyInflight:
		return errNotBatched
	case errCodeBatchDisabled, errCodeBatchMissingSeq, errCodeBatchUnsupportedHeader, errCodeBatchInvalidID,
		errCodeBatchTooLarge, errCodeBatchInvalidCommit:
		return errBatchesOff
	}
	return nil
}

// maxAtomicBatch and maxAtomicBatchBytes bound one atomic batch: well
// below the server's default limit of events (1,000), and what the server
// holds staged until the commit (a few large tool results go one by one).
const (
	maxAtomicBatch      = 100
	maxAtomicBatchBytes = 1 << 20
)

// batchLen is how many of qs go in the next atomic batch: as many as
// maxAtomicBatch and maxAtomicBatchBytes allow, at least one.
func batchLen(qs []queued) int {
	size := 0
	for i, q := range qs[:min(len(qs), maxAtomicBatch)] {
		if size += q.end - q.off; size > maxAtomicBatchBytes && i > 0 {
			return i
		}
	}
	return min(len(qs), maxAtomicBatch)
}
