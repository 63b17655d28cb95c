package emit

import (
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// The publisher reads LLMW_EVENTS' config on the sender's path: a read
// that fails is not repeated at every batch but after batchReadRetry, and
// a config once read decides. The stream info API is answered by a
// stand-in under a prefix of its own.
func TestBatchMinReadsTheStreamOnce(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	var (
		reads  atomic.Int32
		answer atomic.Value
	)
	answer.Store(`{"error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}`)
	sub, err := e.NC.Subscribe("stand-in.STREAM.INFO."+events.StreamEvents, func(m *nats.Msg) {
		reads.Add(1)
		_ = m.Respond([]byte(answer.Load().(string)))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	p := NewPublisher(e.NC, PublisherOptions{})
	js, err := jetstream.NewWithAPIPrefix(e.NC, "stand-in.")
	if err != nil {
		t.Fatal(err)
	}
	p.js = js

	for range 3 {
		if m := p.batchMin(); m != 0 {
			t.Fatalf("batchMin = %d with the stream unreadable, want 0", m)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads of the stream's config within batchReadRetry, want 1", n)
	}

	answer.Store(`{"config":{"name":"LLMW_EVENTS","storage":"memory","num_replicas":1,"allow_atomic":true}}`)
	p.readAfter.Store(0) // batchReadRetry has passed
	for range 3 {
		if m := p.batchMin(); m != 2 {
			t.Fatalf("batchMin = %d on a memory stream with atomic publish, want 2", m)
		}
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("%d reads of the stream's config, want 2: once read, the config decides", n)
	}
}
