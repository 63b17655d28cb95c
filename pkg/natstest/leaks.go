package natstest

import "go.uber.org/goleak"

// NotOurGoroutines are the goleak options of packages whose tests run
// JetStream mirrors or object stores: they ignore two goroutines that
// nats-server and nats.go leave running by their own design, and that a
// test cannot end.
//
//   - nats-server's mirror consumer setup, which waits up to 30 s for an
//     answer past the server's Shutdown (server/stream.go,
//     setupMirrorConsumer); LaggingReplica's mirrors start it.
//   - nats.go's reconnect watcher of the JetStream context that
//     ObjectStore.Put makes for its chunks (jetstream/object.go): Put
//     removes the watcher's status channel as it returns, and a watcher
//     that had not read the channel by then waits on a nil channel for
//     good (jetstream/publish.go, resetPendingAcksOnReconnect). Every
//     pkg/media Put goes through it.
func NotOurGoroutines() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*stream).setupMirrorConsumer.func3"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
	}
}
