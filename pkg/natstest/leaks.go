package natstest

import "go.uber.org/goleak"

// NotOurGoroutines are the goleak options of packages whose tests run
// JetStream mirrors or object stores: they ignore three goroutines that
// nats-server and nats.go leave running by their own design, and that a
// test cannot end.
//
//   - nats-server's mirror consumer setup, which waits up to 30 s for an
//     answer past the server's Shutdown (server/stream.go,
//     setupMirrorConsumer); LaggingReplica's mirrors start it.
//   - nats-server's delete of a mirror's consumer at the source, sent
//     when a mirror is deleted, which waits for its answer up to the
//     server's source health-check interval on a goroutine of its own
//     (server/stream.go, tryDeleteSourcingConsumer); LaggingReplica's
//     cleanup deletes its mirror.
//   - nats.go's reconnect watcher of the JetStream context that
//     ObjectStore.Put makes for its chunks (jetstream/object.go): Put
//     removes the watcher's status channel as it returns, and a watcher
//     that had not read the channel by then waits on a nil channel for
//     good (jetstream/publish.go, resetPendingAcksOnReconnect). Every
//     pkg/media Put goes through it. leaks_test.go reproduces it on the
//     nats.go of go.mod (testdata/putleak, with a watcher that starts
//     late) and fails on a release that does not leak it.
func NotOurGoroutines() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*stream).setupMirrorConsumer.func3"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*stream).tryDeleteSourcingConsumer.func1"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
	}
}
