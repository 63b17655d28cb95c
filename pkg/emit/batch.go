package emit

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
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

// How the sender stores a queue of several events (Publisher.batching).
const (
	batchUnknown int32 = iota // LLMW_EVENTS not read yet
	batchAtomic               // atomic batches from 2 events
	batchLarge                // atomic batches from fileBatchMin events
	batchNever                // one fenced publish per event
)

// fileBatchMin is the fewest queued events stored as one atomic batch on
// a file-storage stream with one replica, where the server stages every
// batch in a file store of its own (a directory, a synced file, removed
// after the commit): 4–5 ms a batch here, against about 0.6 ms for one
// event's fenced publish with its fsync, even at about ten events
// (docs/benchmarks.md). Memory and replicated streams stage in memory,
// and a batch wins there from two events.
const fileBatchMin = 16

// batchMin returns the fewest queued events the sender stores as one
// atomic batch, 0 for none. The first call reads LLMW_EVENTS' config:
// atomic publish allowed (nats-server ≥ 2.12 and `allow_atomic`, which
// provision sets), and how it stages a batch. A stream that cannot be
// read (not provisioned yet, no leader, an identity that may not read it)
// means no batches, and is asked again after batchReadRetry, not at
// every batch: the read is on the sender's path. A server that refuses a
// batch as unsupported turns batches off (storeOnce).
func (p *Publisher) batchMin() int {
	mode := p.batching.Load()
	if mode == batchUnknown {
		if time.Now().UnixNano() < p.readAfter.Load() {
			return 0
		}
		if mode = p.readBatching(); mode == batchUnknown {
			p.readAfter.Store(time.Now().Add(batchReadRetry).UnixNano())
			return 0
		}
		p.batching.Store(mode)
	}
	switch mode {
	case batchAtomic:
		return 2
	case batchLarge:
		return fileBatchMin
	}
	return 0
}

// batchReadRetry is how long batchMin waits before it reads LLMW_EVENTS'
// config again after a failed read.
const batchReadRetry = time.Minute

// readBatching reads LLMW_EVENTS' config for batchMin; batchUnknown when
// it cannot.
func (p *Publisher) readBatching() int32 {
	ctx, cancel := context.WithTimeout(context.Background(), p.ackTimeout)
	defer cancel()
	st, err := p.js.Stream(ctx, events.StreamEvents)
	if err != nil {
		return batchUnknown
	}
	switch c := st.CachedInfo().Config; {
	case !c.AllowAtomicPublish:
		return batchNever
	case c.Storage == jetstream.FileStorage && c.Replicas <= 1:
		return batchLarge
	}
	return batchAtomic
}
