package turn

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/natstest"
)

// A KV watch that JetStream refuses fails with nats.go's older
// *nats.APIError, not a *jetstream.APIError (seen here with a real
// server: the watch of a bucket whose stream is gone). So a parent's
// watch of its child refused while a node restarts — 503, "JetStream
// system temporarily unavailable" (nats-server's JSClusterNotAvailErr) —
// must count as unavailable, as the same refusal of any other request
// does: the watch is tried again, and past RetryTimeout the parent is
// handed off instead of failing its sub-agent call.
func TestAWatchRefusalIsUnavailableOnlyWhenItPasses(t *testing.T) {
	s := natstest.Start(t, natstest.Options{})
	ctx := natstest.Context(t)
	kv, err := s.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "WATCHED", Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.JS.DeleteStream(ctx, "KV_WATCHED"); err != nil {
		t.Fatal(err)
	}
	_, werr := kv.Watch(ctx, "k")
	var old *nats.APIError
	if !errors.As(werr, &old) {
		t.Fatalf("the watch of a deleted bucket failed with %T %v; want a *nats.APIError", werr, werr)
	}
	if jetstreamUnavailable(werr) || unavailable(werr) {
		t.Errorf("%v counts as unavailable; a missing stream does not pass", werr)
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("watch: %w", &nats.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}), true},
		{&nats.APIError{Code: 500, ErrorCode: 10074, Description: "stream is offline"}, true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{&nats.APIError{Code: 400, ErrorCode: 10013, Description: "consumer name already in use"}, false},
	} {
		if got := unavailable(c.err); got != c.want {
			t.Errorf("unavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
