package turn

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/natstest"
)

// A run acknowledges its request through requestAck, without the message:
// whatever it does, the server must get what jetstream.Msg would have sent
// on the message's acknowledgement subject. Each case is done twice on
// deliveries of a real consumer, once through jetstream.Msg and once
// through requestAck, and the bodies that reach $JS.ACK.… and the errors
// are compared.
func TestRequestAckSendsWhatJetStreamMsgSends(t *testing.T) {
	s := natstest.Start(t, natstest.Options{})
	ctx := natstest.Context(t)
	if _, err := s.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "ACKTEST", Subjects: []string{"acktest"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	cons, err := s.JS.CreateOrUpdateConsumer(ctx, "ACKTEST", jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	sent := map[string][]string{} // ack subject → bodies, in order
	sub, err := s.NC.Subscribe("$JS.ACK.>", func(m *nats.Msg) {
		mu.Lock()
		sent[m.Subject] = append(sent[m.Subject], string(m.Data))
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.NC.Flush(); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		do   func(a acker) []error
	}{
		{"ack", func(a acker) []error { return []error{a.InProgress(), a.Ack(), a.Ack(), a.InProgress()} }},
		{"nak", func(a acker) []error { return []error{a.Nak(), a.NakWithDelay(time.Second)} }},
		{"nak with delay", func(a acker) []error {
			return []error{a.InProgress(), a.NakWithDelay(1500 * time.Millisecond), a.Ack()}
		}},
		{"nak without delay", func(a acker) []error { return []error{a.NakWithDelay(0)} }},
		{"term with reason", func(a acker) []error { return []error{a.TermWithReason("invalid_request"), a.Nak()} }},
		{"term without reason", func(a acker) []error { return []error{a.TermWithReason("")} }},
	}
	next := func() jetstream.Msg {
		t.Helper()
		if _, err := s.JS.Publish(ctx, "acktest", []byte(`{"turn_id":"t"}`)); err != nil {
			t.Fatal(err)
		}
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, c := range cases {
		ref, got := next(), next()
		refErrs := c.do(ref)
		a := newRequestAck(s.NC, got)
		gotErrs := c.do(a)
		if err := s.NC.Flush(); err != nil {
			t.Fatal(err)
		}
		for i := range refErrs {
			if !errors.Is(gotErrs[i], refErrs[i]) {
				t.Errorf("%s: call %d: error %v, jetstream.Msg's %v", c.name, i, gotErrs[i], refErrs[i])
			}
		}
		natstest.Eventually(t, c.name+": acknowledgements arrive", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(sent[got.Reply()]) >= len(sent[ref.Reply()]) && len(sent[ref.Reply()]) > 0
		})
		mu.Lock()
		want, have := sent[ref.Reply()], sent[got.Reply()]
		mu.Unlock()
		if join(want) != join(have) {
			t.Errorf("%s: requestAck sent %q, jetstream.Msg %q", c.name, have, want)
		}
		md, err := a.Metadata()
		wantMD, wantErr := got.Metadata()
		if err != nil || wantErr != nil || *md != *wantMD {
			t.Errorf("%s: metadata %+v (%v), want %+v (%v)", c.name, md, err, wantMD, wantErr)
		}
	}
}

func join(s []string) string {
	out := ""
	for _, b := range s {
		out += b + "\n"
	}
	return out
}
