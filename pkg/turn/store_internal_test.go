package turn

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/natstest"
)

// casState's update with a TTL, a publish of its own: the server takes
// it only at the key's revision (a stale one is a conflict), it is the
// key's next revision, and the key expires after the TTL.
func TestStoreStateUpdateWithTTL(t *testing.T) {
	s, _ := internalService(t, Config{})
	ctx := natstest.Context(t)
	id := "ttl:update" // not a KV key character: the key is encoded
	rev, err := s.casState(ctx, id, []byte(`{"version":1}`), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.casState(ctx, id, []byte(`{"version":1,"status":"completed"}`), rev+1, time.Second); !isConflict(err) {
		t.Fatalf("update at a revision the key does not have = %v, want a conflict", err)
	}
	next, err := s.casState(ctx, id, []byte(`{"version":1,"status":"completed"}`), rev, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.stateKV.Get(ctx, kvKey(id))
	if err != nil || e.Revision() != next || string(e.Value()) != `{"version":1,"status":"completed"}` {
		t.Fatalf("entry %v (revision %d, want %d): %v", e, e.Revision(), next, err)
	}
	natstest.Eventually(t, "the key to expire", func() bool {
		_, err := s.stateKV.Get(ctx, kvKey(id))
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
}
