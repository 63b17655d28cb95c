package jsread_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// On one server the leader is the only replica: KVLast, and the Get of
// a bucket wrapped by KeyValue, answer what kv.Get answers, for every
// state a key can be in.
func TestKVLastAgreesWithGet(t *testing.T) {
	s := natstest.Start(t, natstest.Options{})
	ctx := natstest.Context(t)
	kv, err := s.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "B", LimitMarkerTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	leader := jsread.KeyValue(s.JS, kv)
	check := func(key string) {
		t.Helper()
		b, rev, err := jsread.KVLast(ctx, s.NC, jsread.APIPrefix(s.JS), "B", key)
		le, lerr := leader.Get(ctx, key)
		e, gerr := kv.Get(ctx, key)
		switch {
		case errors.Is(gerr, jetstream.ErrKeyNotFound):
			if !errors.Is(err, jetstream.ErrKeyNotFound) || !errors.Is(lerr, jetstream.ErrKeyNotFound) {
				t.Fatalf("%s: KVLast = %q, %d, %v; KeyValue's Get = %v, %v; kv.Get says not found", key, b, rev, err, le, lerr)
			}
		case gerr != nil:
			t.Fatal(gerr)
		case err != nil || string(b) != string(e.Value()) || rev != e.Revision():
			t.Fatalf("%s: KVLast = %q, %d, %v; kv.Get = %q at %d", key, b, rev, err, e.Value(), e.Revision())
		case lerr != nil || le.Bucket() != e.Bucket() || le.Key() != e.Key() || string(le.Value()) != string(e.Value()) ||
			le.Revision() != e.Revision() || !le.Created().Equal(e.Created()) || le.Delta() != e.Delta() || le.Operation() != e.Operation():
			t.Fatalf("%s: KeyValue's Get = %+v, %v; kv.Get = %+v", key, le, lerr, e)
		}
	}
	check("never")
	if _, err := kv.Put(ctx, "k", []byte("one")); err != nil {
		t.Fatal(err)
	}
	check("k")
	if _, err := kv.Put(ctx, "k", []byte("two")); err != nil {
		t.Fatal(err)
	}
	check("k")
	if _, err := kv.Put(ctx, "other", []byte("x")); err != nil {
		t.Fatal(err)
	}
	check("k")
	if err := kv.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	check("k")
	if _, err := kv.Put(ctx, "p", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	check("p")
	if _, err := kv.Create(ctx, "ttl", []byte("z"), jetstream.KeyTTL(time.Second)); err != nil {
		t.Fatal(err)
	}
	check("ttl")
	natstest.Eventually(t, "the key with a TTL expired", func() bool {
		_, err := kv.Get(ctx, "ttl")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
	check("ttl")
}

func TestLastMsg(t *testing.T) {
	s := natstest.Start(t, natstest.Options{})
	ctx := natstest.Context(t)
	if _, err := s.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JS.Publish(ctx, "s.a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JS.PublishMsg(ctx, &nats.Msg{Subject: "s.a", Data: []byte("2"), Header: nats.Header{"H": []string{"v"}}}); err != nil {
		t.Fatal(err)
	}
	m, err := jsread.LastMsg(ctx, s.NC, jsread.APIPrefix(s.JS), "S", "s.a")
	if err != nil || m.Sequence != 2 || string(m.Data) != "2" || m.Header.Get("H") != "v" || m.Subject != "s.a" || m.Time.IsZero() {
		t.Fatalf("LastMsg = %+v, %v; want the second message", m, err)
	}
	if _, err := jsread.LastMsg(ctx, s.NC, jsread.APIPrefix(s.JS), "S", "s.b"); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("LastMsg of a subject without messages: %v, want jetstream.ErrMsgNotFound", err)
	}
	_, err = jsread.LastMsg(ctx, s.NC, jsread.APIPrefix(s.JS), "NONE", "s.a")
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamNotFound {
		t.Fatalf("LastMsg of a missing stream: %v, want stream not found", err)
	}
}

func TestAPIPrefix(t *testing.T) {
	s := natstest.Start(t, natstest.Options{})
	for _, c := range []struct {
		js   func() (jetstream.JetStream, error)
		want string
	}{
		{func() (jetstream.JetStream, error) { return jetstream.New(s.NC) }, "$JS.API."},
		{func() (jetstream.JetStream, error) { return jetstream.NewWithAPIPrefix(s.NC, "$JS.hub.API") }, "$JS.hub.API."},
		{func() (jetstream.JetStream, error) { return jetstream.NewWithAPIPrefix(s.NC, "x.API.") }, "x.API."},
		{func() (jetstream.JetStream, error) { return jetstream.NewWithDomain(s.NC, "leaf") }, "$JS.leaf.API."},
	} {
		js, err := c.js()
		if err != nil {
			t.Fatal(err)
		}
		if got := jsread.APIPrefix(js); got != c.want {
			t.Errorf("APIPrefix = %q, want %q", got, c.want)
		}
	}
}

// KVRevision answers as kv.GetRevision does: a put's value, a delete's
// marker, and not found for another key's revision or one never written.
func TestKVRevisionAgreesWithGetRevision(t *testing.T) {
	s := natstest.Start(t, natstest.Options{})
	ctx := natstest.Context(t)
	kv, err := s.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "B", History: 5})
	if err != nil {
		t.Fatal(err)
	}
	put, err := kv.Put(ctx, "a", []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := kv.Put(ctx, "b", []byte("two"))
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	del := other + 1
	prefix := jsread.APIPrefix(s.JS)
	for _, c := range []struct {
		key   string
		rev   uint64
		want  string
		op    jetstream.KeyValueOp
		found bool
	}{
		{"a", put, "one", jetstream.KeyValuePut, true},
		{"a", del, "", jetstream.KeyValueDelete, true},
		{"a", other, "", 0, false},
		{"a", del + 10, "", 0, false},
	} {
		e, err := jsread.KVRevision(ctx, s.NC, prefix, "B", c.key, c.rev)
		ge, gerr := kv.GetRevision(ctx, c.key, c.rev)
		if !c.found {
			if !errors.Is(err, jetstream.ErrKeyNotFound) || !errors.Is(gerr, jetstream.ErrKeyNotFound) {
				t.Fatalf("%s@%d: %v (GetRevision: %v); want not found", c.key, c.rev, err, gerr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s@%d: %v", c.key, c.rev, err)
		}
		if string(e.Value()) != c.want || e.Operation() != c.op || e.Revision() != c.rev || e.Key() != c.key {
			t.Fatalf("%s@%d: %q %v rev %d; want %q %v", c.key, c.rev, e.Value(), e.Operation(), e.Revision(), c.want, c.op)
		}
		if gerr == nil && (ge.Operation() != e.Operation() || string(ge.Value()) != string(e.Value())) {
			t.Fatalf("%s@%d: GetRevision says %v %q, KVRevision %v %q", c.key, c.rev, ge.Operation(), ge.Value(), e.Operation(), e.Value())
		}
	}
}
