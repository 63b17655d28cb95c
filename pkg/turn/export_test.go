package turn

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/transcript"
)

// StateKey is the key of a turn's state in LLMW_TURN_STATE.
func StateKey(id string) string { return kvKey(id) }

// CancelKey is the key of a turn's cancel request in LLMW_TURN_STATE.
func CancelKey(id string) string { return cancelKey(id) }

// AnswerCancel has s answer a cancel of turn id as the one replica of
// the queue group that a client's cancel reaches, without it reaching any
// replica's onCancel: the cancel that the turn's own replica heard before
// it held the run.
func AnswerCancel(s *Service, id string) {
	s.onQueuedCancel(&nats.Msg{Subject: s.subjects.TurnCancel(id)})
}

// Transcripts is the service's store of LLMW_TRANSCRIPTS (for a test
// that counts what its turns read).
func Transcripts(s *Service) *transcript.Store { return s.tx }

// FetchWait is how long one fetch of the turn consumer waits.
const FetchWait = fetchWait

// SetBeforeChildSubmit has f run between a sub-agent call's
// llmw.tool.child started and its child's submit, until the test ends.
func SetBeforeChildSubmit(t interface{ Cleanup(func()) }, f func(ctx context.Context, parentID, childID string)) {
	beforeChildSubmit.set(t, f)
}

// SetAfterRemoteFiles has f run when a remote agent's turn stored the
// files of its answer and before it publishes the answer, until the test
// ends.
func SetAfterRemoteFiles(t interface{ Cleanup(func()) }, f func(turnID string)) {
	afterRemoteFiles.Store(&f)
	t.Cleanup(func() { afterRemoteFiles.Store(nil) })
}

// TreeKey is the key of the ledger of the tree rooted at root in
// LLMW_TURN_STATE.
func TreeKey(root string) string { return treeKey(root) }

// SetBeforeResolvePinned has f fail reads of pinned sub-agents with the
// error it returns, until the test ends.
func SetBeforeResolvePinned(t interface{ Cleanup(func()) }, f func(ref string) error) {
	beforeResolvePinned.set(t, f)
}

// SetAfterChildWatch has f get every watch of a child's state that a
// parent starts, until the test ends.
func SetAfterChildWatch(t interface{ Cleanup(func()) }, f func(childID string, w jetstream.KeyWatcher)) {
	afterChildWatch.set(t, f)
}

// SetDispatchHook has f called as a replica dispatches each turn request
// (stage "arrived", then "registered", or "found run" when another run of
// the turn is on the replica), until the test ends.
func SetDispatchHook(t interface{ Cleanup(func()) }, f func(stage, turnID string, redelivered bool)) {
	dispatchHook.set(t, f)
}

// SetAfterStateCreated has f fail, with the error it returns, each
// create of a turn's state that was stored, until the test ends.
func SetAfterStateCreated(t interface{ Cleanup(func()) }, f func(turnID string) error) {
	afterStateCreated.set(t, f)
}
