package ingest_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// warnedProvider is a fake whose streams say that some settings of the
// request were not sent, as the built-in adapters' streams do.
type warnedProvider struct {
	fake
	w []events.Warning
}

type warnedStream struct {
	llm.Stream
	w []events.Warning
}

func (s warnedStream) Warnings() []events.Warning { return s.w }

func (p *warnedProvider) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	s, err := p.fake.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	return warnedStream{s, p.w}, nil
}

// The warnings of the provider's stream are in ingest's completion reply
// (docs/protocol.md §3), and a Client's stream returns them as an
// llm.Warner, before any event is read.
func TestReplyCarriesWarnings(t *testing.T) {
	url := startNATS(t)
	want := []events.Warning{
		{Setting: "top_k", Message: "openai has no top_k setting; it was not sent"},
		{Setting: "seed", Message: "not sent"},
	}
	p := &warnedProvider{w: want}
	p.scripts = []*script{{evs: []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "ok"),
		events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn},
		events.StatusEvent{Status: events.StatusCompleted},
	}}}
	startService(t, url, ingest.Config{Providers: map[string]ingest.Factory{"openai": ingest.Static(p)}})
	nc := connect(t, url)

	// The reply on the wire.
	r := request(t, nc, binaryRequest("llmw.llm.complete", completionData("r1", "openai:gpt-4o"), nil))
	var body struct {
		Warnings []events.Warning `json:"warnings"`
	}
	if err := json.Unmarshal(r.Data, &body); err != nil {
		t.Fatalf("reply %s: %v", r.Data, err)
	}
	if !reflect.DeepEqual(body.Warnings, want) {
		t.Fatalf("reply %s: warnings %+v, want %+v", r.Data, body.Warnings, want)
	}
	rep, err := ingest.DecodeReply(r)
	if err != nil || !reflect.DeepEqual(rep.Warnings, want) {
		t.Fatalf("DecodeReply: %+v, %v", rep, err)
	}

	// Through the Client.
	c := ingest.NewClient(connect(t, url), ingest.ClientOptions{})
	t.Cleanup(func() { _ = c.Close() })
	s, err := c.Stream(natstest.Context(t), &llm.Request{Model: "openai:gpt-4o", Messages: []events.Message{events.UserText("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	w, ok := s.(llm.Warner)
	if !ok {
		t.Fatalf("%T is not an llm.Warner", s)
	}
	if got := w.Warnings(); !reflect.DeepEqual(got, want) {
		t.Fatalf("client stream warnings %+v, want %+v", got, want)
	}
	// Normalize passes the client's stream through, warnings and all.
	ns := llm.Normalize(context.Background(), s, llm.NormalizeOptions{})
	evs, err := llm.Collect(ns)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := evs[len(evs)-1].(events.StatusEvent); !ok || st.Status != events.StatusCompleted {
		t.Fatalf("events %v", evs)
	}
	if got := ns.(llm.Warner).Warnings(); !reflect.DeepEqual(got, want) {
		t.Fatalf("normalized warnings %+v", got)
	}
}

// A provider whose stream has no warnings gives a reply without the
// field, and a Client stream with none.
func TestReplyWithoutWarnings(t *testing.T) {
	url := startNATS(t)
	startService(t, url, ingest.Config{Providers: map[string]ingest.Factory{"openai": ingest.Static(&fake{})}})
	c := ingest.NewClient(connect(t, url), ingest.ClientOptions{})
	t.Cleanup(func() { _ = c.Close() })
	s, err := c.Stream(natstest.Context(t), &llm.Request{Model: "openai:gpt-4o", Messages: []events.Message{events.UserText("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.(llm.Warner).Warnings(); got != nil {
		t.Fatalf("warnings %+v", got)
	}
}
