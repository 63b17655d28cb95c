package ingest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// smallServer is a provisioned server that takes messages of at most
// 64 KiB, well below a long transcript.
func smallServer(t *testing.T) *natstest.Server {
	t.Helper()
	return natstest.Start(t, natstest.Options{Provision: true, MaxPayload: 64 << 10})
}

// longContext is a transcript of n distinct messages of about size bytes
// each.
func longContext(n, size int) []events.Message {
	msgs := make([]events.Message, n)
	for i := range msgs {
		text := fmt.Sprintf("message %d: %s", i, strings.Repeat(string(rune('a'+i%26)), size))
		if i%2 == 0 {
			msgs[i] = events.UserText(text)
		} else {
			msgs[i] = events.AssistantText(text)
		}
	}
	return msgs
}

func completed() *script {
	return &script{evs: []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "ok"),
		events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn},
		events.StatusEvent{Status: events.StatusCompleted},
	}}
}

// A completion request several times larger than the server's max
// payload reaches the provider whole, through LLMW_REQUESTS, and the
// stored object is gone once ingest answered (docs/protocol.md §3).
func TestRequestLargerThanAMessage(t *testing.T) {
	e := smallServer(t)
	f := &fake{scripts: []*script{completed()}}
	startService(t, e.URL(), ingest.Config{Providers: map[string]ingest.Factory{"openai": ingest.Static(f)}})
	c := ingest.NewClient(e.NC, ingest.ClientOptions{})
	t.Cleanup(func() { _ = c.Close() })

	msgs := longContext(300, 1000) // ~300 KB
	want, _ := json.Marshal(msgs)
	if len(want) < 4*int(e.NC.MaxPayload()) {
		t.Fatalf("the context is %d bytes, not several times the max payload %d", len(want), e.NC.MaxPayload())
	}
	req := &llm.Request{Model: "openai:gpt-4.1-mini", Messages: msgs}
	s, err := c.Stream(natstest.Context(t), req)
	if err != nil {
		t.Fatalf("Stream of a %d-byte context on a %d-byte server: %v", len(want), e.NC.MaxPayload(), err)
	}
	got := collect(t, s)
	if st, ok := got[len(got)-1].(events.StatusEvent); !ok || st.Status != events.StatusCompleted {
		t.Fatalf("stream ended with %#v", got[len(got)-1])
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("provider got %d requests", len(reqs))
	}
	if reqs[0].RequestID != req.RequestID {
		t.Errorf("provider got request %q, sent %q", reqs[0].RequestID, req.RequestID)
	}
	if len(reqs[0].Messages) != len(msgs) {
		t.Fatalf("provider got %d messages, sent %d", len(reqs[0].Messages), len(msgs))
	}
	if sent, _ := json.Marshal(reqs[0].Messages); string(sent) != string(want) {
		t.Errorf("the provider's messages differ from those sent (%d bytes, sent %d)", len(sent), len(want))
	}
	obs, err := e.JS.ObjectStore(natstest.Context(t), events.BucketRequests)
	if err != nil {
		t.Fatal(err)
	}
	if left, err := obs.List(natstest.Context(t)); !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Errorf("LLMW_REQUESTS still holds %d objects (%v), want none once ingest answered", len(left), err)
	}
}

// A request that fits is one message: the requester publishes nothing
// else, so the common path costs no round trip to the object store.
func TestRequestThatFitsIsOneMessage(t *testing.T) {
	e := smallServer(t)
	f := &fake{scripts: []*script{completed()}}
	startService(t, e.URL(), ingest.Config{Providers: map[string]ingest.Factory{"openai": ingest.Static(f)}})
	nc := e.Connect(t)
	c := ingest.NewClient(nc, ingest.ClientOptions{})
	t.Cleanup(func() { _ = c.Close() })

	msgs := longContext(40, 1000) // ~40 KB: fits in 64 KiB
	before := nc.Stats().OutMsgs
	s, err := c.Stream(natstest.Context(t), &llm.Request{Model: "openai:gpt-4.1-mini", Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, s)
	if n := nc.Stats().OutMsgs - before; n != 1 {
		t.Errorf("the requester published %d messages for a request that fits, want 1", n)
	}
	if reqs := f.requests(); len(reqs) != 1 || len(reqs[0].Messages) != len(msgs) {
		t.Errorf("provider got %d requests", len(reqs))
	}
}

// A request naming an object LLMW_REQUESTS does not hold (expired after
// the bucket's TTL, or deleted) is refused as invalid, naming the object.
func TestStoredRequestMissing(t *testing.T) {
	e := smallServer(t)
	f := &fake{}
	startService(t, e.URL(), ingest.Config{Providers: map[string]ingest.Factory{"openai": ingest.Static(f)}})
	m := binaryRequest("llmw.llm.complete", nil, nil)
	m.Header.Set(events.HeaderRequestObject, "r1.gone")
	_, err := ingest.DecodeReply(request(t, e.NC, m))
	var ie *ingest.Error
	if !errors.Is(err, ingest.ErrInvalidRequest) || !errors.As(err, &ie) {
		t.Fatalf("reply: %v, want ErrInvalidRequest", err)
	}
	if !strings.Contains(ie.Message, `"r1.gone"`) || !strings.Contains(ie.Message, events.BucketRequests) || ie.Field != events.HeaderRequestObject {
		t.Errorf("error %q (field %q) does not name the object and its bucket", ie.Message, ie.Field)
	}
	if len(f.requests()) != 0 {
		t.Error("the provider was called")
	}
}

// Without LLMW_REQUESTS a request too large for a message fails at the
// requester with ErrRequestStore, saying what to run.
func TestLargeRequestWithoutTheBucket(t *testing.T) {
	e := natstest.Start(t, natstest.Options{MaxPayload: 64 << 10})
	c := ingest.NewClient(e.NC, ingest.ClientOptions{})
	t.Cleanup(func() { _ = c.Close() })
	_, err := c.Stream(natstest.Context(t), &llm.Request{Model: "openai:gpt-4.1-mini", Messages: longContext(100, 1000)})
	if !errors.Is(err, ingest.ErrRequestStore) || !strings.Contains(err.Error(), "provision") {
		t.Fatalf("err = %v, want ErrRequestStore naming provision", err)
	}
}

// A stored request larger than Config.MaxStoredRequest is refused as too
// large before ingest reads it, naming the object.
func TestStoredRequestAboveTheLimit(t *testing.T) {
	e := smallServer(t)
	f := &fake{}
	startService(t, e.URL(), ingest.Config{Providers: map[string]ingest.Factory{"openai": ingest.Static(f)}, MaxStoredRequest: 100 << 10})
	c := ingest.NewClient(e.NC, ingest.ClientOptions{})
	t.Cleanup(func() { _ = c.Close() })
	_, err := c.Stream(natstest.Context(t), &llm.Request{Model: "openai:gpt-4.1-mini", Messages: longContext(300, 1000)})
	var ie *ingest.Error
	if !errors.Is(err, ingest.ErrPayloadTooLarge) || !errors.As(err, &ie) || !strings.Contains(ie.Message, "102400") || !strings.Contains(ie.Message, "request object") {
		t.Fatalf("err = %v, want ErrPayloadTooLarge naming the object and quoting the limit", err)
	}
	if len(f.requests()) != 0 {
		t.Error("the provider was called")
	}
}
