package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/natstest"
)

func i64(v int64) *int64 { return &v }

// textAndTool is a provider stream with a text block and a tool call.
func textAndTool() []events.Event {
	return []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "The capital "),
		events.TextDelta(0, "is \"London\"\n"),
		events.BlockStop{Index: 0, BlockType: events.BlockText},
		events.BlockStart{Index: 1, BlockType: events.BlockToolUse, ID: "call_1", Name: "get_capital"},
		events.InputJSONDelta(1, `{"country":`),
		events.InputJSONDelta(1, `"UK"}`),
		events.BlockStop{Index: 1, BlockType: events.BlockToolUse, StopReason: events.StopToolUse},
		events.UsageEvent{InputTokens: i64(53), OutputTokens: i64(15), TotalTokens: i64(68)},
		events.StatusEvent{Status: events.StatusCompleted},
	}
}

func TestCompleteStreamsCloudEvents(t *testing.T) {
	url := startNATS(t)
	f := &fake{scripts: []*script{{evs: textAndTool()}}}
	// KeepDeltas: this test reads every provider event as a message of its
	// own; TestDeltasJoin covers what is joined by default.
	startService(t, url, ingest.Config{Instance: "i1", Providers: map[string]ingest.Factory{"openai": ingest.Static(f)}, KeepDeltas: true})
	nc := connect(t, url)

	// One wildcard subscription sees the reply and the stream in the order
	// the server delivered them.
	all, err := nc.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	req := binaryRequest("llmw.llm.complete", completionData("r1", "openai:gpt-4o-mini"), func(e *events.Envelope) {
		e.TurnID, e.SessionID = "turn-7", "sess-3"
		e.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	})
	req.Reply = "test.reply.r1"
	if err := nc.PublishMsg(req); err != nil {
		t.Fatal(err)
	}

	var reply *nats.Msg
	var got []events.Event
	ids := map[string]bool{}
	for {
		m, err := all.NextMsg(waitFor)
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		switch {
		case m.Subject == "llmw.llm.complete":
			continue
		case m.Subject == "test.reply.r1":
			reply = m
			continue
		case m.Subject != "llmw.llm.stream.r1":
			continue
		}
		if reply == nil {
			t.Fatalf("stream event %s arrived before the reply", m.Header.Get("ce-type"))
		}
		// Binary content mode, attribute by attribute (docs/protocol.md §1).
		seq := len(got) + 1
		want := map[string]string{
			"ce-specversion": "1.0",
			"ce-source":      "/llmw/ingest/i1",
			"ce-subject":     "turn-7",
			"ce-turnid":      "turn-7",
			"ce-sessionid":   "sess-3",
			"ce-traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
			"ce-seq":         strconv.Itoa(seq),
			"content-type":   "application/json",
		}
		for k, v := range want {
			if g := m.Header.Get(k); g != v {
				t.Errorf("event %d: header %s = %q, want %q", seq, k, g, v)
			}
		}
		id := m.Header.Get("ce-id")
		if id == "" || ids[id] {
			t.Errorf("event %d: ce-id %q empty or repeated", seq, id)
		}
		ids[id] = true
		if _, err := time.Parse(time.RFC3339Nano, m.Header.Get("ce-time")); err != nil {
			t.Errorf("event %d: ce-time: %v", seq, err)
		}
		ev, err := events.DecodeStreamEvent(m.Header.Get("ce-type"), m.Data)
		if err != nil {
			t.Fatalf("event %d: %v", seq, err)
		}
		got = append(got, ev)
		if st, ok := ev.(events.StatusEvent); ok && st.Status.Terminal() {
			break
		}
	}
	if !reflect.DeepEqual(got, textAndTool()) {
		t.Errorf("events:\n got %#v\nwant %#v", got, textAndTool())
	}
	rep, err := ingest.DecodeReply(reply)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep, events.CompletionReply{RequestID: "r1", StreamSubject: "llmw.llm.stream.r1"}) {
		t.Errorf("reply = %+v", rep)
	}
	if !jsonEq(reply.Data, []byte(`{"request_id":"r1","stream_subject":"llmw.llm.stream.r1"}`)) {
		t.Errorf("reply body = %s", reply.Data)
	}
	reqs := f.requests()
	if len(reqs) != 1 || reqs[0].Model != "openai:gpt-4o-mini" || reqs[0].Messages[0].Text() != "What is the capital of the UK?" {
		t.Errorf("provider got %+v", reqs)
	}
}

func TestStructuredModeAndPrefix(t *testing.T) {
	url := startNATS(t)
	f := &fake{scripts: []*script{{evs: []events.Event{
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "hi"),
		events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn},
	}}}}
	startService(t, url, ingest.Config{Prefix: "acme.dev", Instance: "s", Structured: true,
		Providers: map[string]ingest.Factory{"anthropic": ingest.Static(f)}})
	nc := connect(t, url)
	sub := subscribeStream(t, nc, "acme.dev.llm.stream.r2")

	// The request itself in structured mode.
	env := events.Envelope{ID: "e1", Source: "/test", Type: events.TypeLLMComplete, TurnID: "t9",
		Data: completionData("r2", "anthropic:claude-sonnet-4-5")}
	body, err := env.StructuredBody()
	if err != nil {
		t.Fatal(err)
	}
	r := request(t, nc, &nats.Msg{Subject: "acme.dev.llm.complete", Data: body,
		Header: nats.Header{"content-type": {events.ContentTypeStructured}}})
	if rep, err := ingest.DecodeReply(r); err != nil || rep.StreamSubject != "acme.dev.llm.stream.r2" {
		t.Fatalf("reply %+v, %v", rep, err)
	}
	rs := sub.untilTerminal()
	want := []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "hi"),
		events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn},
		events.StatusEvent{Status: events.StatusCompleted},
	}
	if !reflect.DeepEqual(evs(rs), want) {
		t.Errorf("events:\n got %#v\nwant %#v", evs(rs), want)
	}
	for i, r := range rs {
		if r.msg.Header.Get("ce-specversion") != "" {
			t.Errorf("event %d: structured mode must not carry ce- headers", i)
		}
		var ce map[string]any
		if err := json.Unmarshal(r.msg.Data, &ce); err != nil {
			t.Fatalf("event %d: body is not JSON: %v", i, err)
		}
		if ce["specversion"] != "1.0" || ce["source"] != "/llmw/ingest/s" || ce["subject"] != "t9" || ce["turnid"] != "t9" {
			t.Errorf("event %d: attributes %v", i, ce)
		}
		if r.env.Seq != uint64(i+1) {
			t.Errorf("event %d: seq %d", i, r.env.Seq)
		}
	}
}

// A request naming a stream group is streamed on
// P.llm.stream.<stream_group>.<request_id>, which the reply names, and on
// nothing else (docs/protocol.md §3).
func TestStreamGroup(t *testing.T) {
	url := startNATS(t)
	f := &fake{scripts: []*script{{evs: []events.Event{
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "hi"),
		events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn},
	}}}}
	startService(t, url, ingest.Config{Providers: map[string]ingest.Factory{"anthropic": ingest.Static(f)}})
	nc := connect(t, url)
	group := subscribeStream(t, nc, "llmw.llm.stream.g7.r3")
	other := subscribeStream(t, nc, "llmw.llm.stream.r3")
	data, _ := json.Marshal(events.CompletionRequest{
		RequestID: "r3", StreamGroup: "g7", Model: "anthropic:claude-sonnet-4-5",
		Messages: []events.Message{events.UserText("hi")},
	})
	r := request(t, nc, binaryRequest("llmw.llm.complete", data, nil))
	if rep, err := ingest.DecodeReply(r); err != nil || rep.StreamSubject != "llmw.llm.stream.g7.r3" {
		t.Fatalf("reply %+v, %v; want stream_subject llmw.llm.stream.g7.r3", rep, err)
	}
	if got := evs(group.untilTerminal()); len(got) != 5 {
		t.Fatalf("on the group's subject: %v, want the 5 events of the stream", got)
	}
	if m, err := other.sub.NextMsg(100 * time.Millisecond); err == nil {
		t.Fatalf("a message on the per-request subject: %s", m.Subject)
	}
}

func TestErrorRepliesAndKeepServing(t *testing.T) {
	url := startNATS(t)
	ok := &fake{scripts: []*script{{evs: []events.Event{events.BlockStart{Index: 0, BlockType: events.BlockText}, events.TextDelta(0, "ok"), events.BlockStop{Index: 0, BlockType: events.BlockText}}}}}
	startService(t, url, ingest.Config{
		MaxPayload: 4096,
		Providers: map[string]ingest.Factory{
			"openai": ingest.AllowModels(ingest.Static(ok), "gpt-4o-mini"),
			"anthropic": func(string) (llm.Provider, error) {
				return nil, errors.Join(errors.New("ANTHROPIC_API_KEY is not set"), ingest.ErrMissingAPIKey)
			},
			"gemini": func(string) (llm.Provider, error) { return nil, errors.New("bad base url") },
		},
	})
	nc := connect(t, url)

	data := func(v any) []byte { b, _ := json.Marshal(v); return b }
	big := strings.Repeat("x", 5000)
	cases := []struct {
		name     string
		msg      *nats.Msg
		code     string
		sentinel error
		field    string
		says     string
	}{
		{"unknown provider", binaryRequest("llmw.llm.complete", completionData("e1", "mistral:large"), nil),
			"404", ingest.ErrUnknownProvider, "", `"mistral"`},
		{"unknown model", binaryRequest("llmw.llm.complete", completionData("e2", "openai:gpt-9"), nil),
			"404", ingest.ErrUnknownModel, "", `"gpt-9"`},
		{"missing key", binaryRequest("llmw.llm.complete", completionData("e3", "anthropic:claude-sonnet-4-5"), nil),
			"401", ingest.ErrMissingAPIKey, "", "ANTHROPIC_API_KEY"},
		{"provider setup", binaryRequest("llmw.llm.complete", completionData("e4", "gemini:gemini-2.5-pro"), nil),
			"500", ingest.ErrProviderSetup, "", "bad base url"},
		{"malformed JSON", binaryRequest("llmw.llm.complete", []byte(`{"request_id": "e5", "model": `), nil),
			"400", ingest.ErrInvalidRequest, "", "malformed JSON"},
		{"missing messages", binaryRequest("llmw.llm.complete", data(map[string]any{"request_id": "e6", "model": "openai:gpt-4o-mini"}), nil),
			"400", ingest.ErrInvalidRequest, "messages", `"messages" is required`},
		{"missing request_id", binaryRequest("llmw.llm.complete", data(map[string]any{"model": "openai:gpt-4o-mini", "messages": []any{}}), nil),
			"400", ingest.ErrInvalidRequest, "request_id", `"request_id" is required`},
		{"wrong field type", binaryRequest("llmw.llm.complete", []byte(`{"request_id":"e7","model":"openai:gpt-4o-mini","messages":[],"max_tokens":"many"}`), nil),
			"400", ingest.ErrInvalidRequest, "max_tokens", "max_tokens"},
		{"not a CloudEvent", &nats.Msg{Subject: "llmw.llm.complete", Data: completionData("e8", "openai:gpt-4o-mini")},
			"400", ingest.ErrInvalidRequest, "", "CloudEvent"},
		{"wrong type", binaryRequest("llmw.llm.complete", completionData("e9", "openai:gpt-4o-mini"), func(e *events.Envelope) { e.Type = "llmw.turn.submit" }),
			"400", ingest.ErrInvalidRequest, "type", "llmw.llm.complete"},
		{"oversize", binaryRequest("llmw.llm.complete", data(events.CompletionRequest{RequestID: "e10", Model: "openai:gpt-4o-mini", Messages: []events.Message{events.UserText(big)}}), nil),
			"413", ingest.ErrPayloadTooLarge, "", "4096"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := request(t, nc, c.msg)
			// What the micro protocol says, read off the raw headers.
			if got := r.Header.Get(micro.ErrorCodeHeader); got != c.code {
				t.Errorf("%s = %q, want %q (body %s)", micro.ErrorCodeHeader, got, c.code, r.Data)
			}
			desc := r.Header.Get(micro.ErrorHeader)
			if !strings.Contains(desc, c.says) {
				t.Errorf("%s = %q, want it to say %q", micro.ErrorHeader, desc, c.says)
			}
			_, err := ingest.DecodeReply(r)
			if !errors.Is(err, c.sentinel) {
				t.Errorf("DecodeReply error %v does not match %v", err, c.sentinel)
			}
			var ie *ingest.Error
			if errors.As(err, &ie) && ie.Field != c.field {
				t.Errorf("field = %q, want %q", ie.Field, c.field)
			}
		})
	}

	// Still serving.
	sub := subscribeStream(t, nc, "llmw.llm.stream.fine")
	complete(t, nc, "fine", "openai:gpt-4o-mini")
	got := evs(sub.untilTerminal())
	if err := llm.CheckWellFormed(got); err != nil {
		t.Error(err)
	}
	if d, ok := got[2].(events.BlockDelta); !ok || d.Content != "ok" {
		t.Errorf("events %#v", got)
	}
}

func TestDuplicateRequestIDRefused(t *testing.T) {
	url := startNATS(t)
	sc := &script{evs: []events.Event{events.BlockStart{Index: 0, BlockType: events.BlockText}}, block: true, reached: make(chan struct{})}
	f := &fake{scripts: []*script{sc}}
	startService(t, url, ingest.Config{Providers: map[string]ingest.Factory{"openai": ingest.Static(f)}})
	nc := connect(t, url)
	sub := subscribeStream(t, nc, "llmw.llm.stream.dup")
	reached := sc.reached
	complete(t, nc, "dup", "openai:m")
	<-reached

	r := request(t, nc, binaryRequest("llmw.llm.complete", completionData("dup", "openai:m"), nil))
	if _, err := ingest.DecodeReply(r); !errors.Is(err, ingest.ErrDuplicateRequest) || r.Header.Get(micro.ErrorCodeHeader) != "409" {
		t.Errorf("second request: %v (code %q)", err, r.Header.Get(micro.ErrorCodeHeader))
	}
	if err := nc.Publish("llmw.llm.cancel.dup", nil); err != nil {
		t.Fatal(err)
	}
	got := evs(sub.untilTerminal())
	if st := got[len(got)-1].(events.StatusEvent); st.Status != events.StatusCancelled {
		t.Errorf("status %s", st.Status)
	}
}

func TestCancelMidStream(t *testing.T) {
	url := startNATS(t)
	sc := &script{evs: []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.BlockStart{Index: 0, BlockType: events.BlockThinking},
		events.ThinkingDelta(0, "let me think"),
	}, block: true}
	f := &fake{scripts: []*script{sc}}
	svc := startService(t, url, ingest.Config{Providers: map[string]ingest.Factory{"openai": ingest.Static(f)}})
	nc := connect(t, url)
	sub := subscribeStream(t, nc, "llmw.llm.stream.c1")
	complete(t, nc, "c1", "openai:o3")

	first := sub.untilEvent(func(ev events.Event) bool { _, ok := ev.(events.BlockDelta); return ok })
	if got := svc.Running(); !reflect.DeepEqual(got, []string{"c1"}) {
		t.Errorf("Running() = %v", got)
	}
	if err := nc.Publish("llmw.llm.cancel.c1", nil); err != nil {
		t.Fatal(err)
	}
	rest := sub.untilTerminal()
	all := append(evs(first), evs(rest)...)
	if err := llm.CheckWellFormed(all); err != nil {
		t.Error(err)
	}
	want := []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.BlockStart{Index: 0, BlockType: events.BlockThinking},
		events.ThinkingDelta(0, "let me think"),
	}
	if !reflect.DeepEqual(all[:3], want) {
		t.Errorf("head %#v", all[:3])
	}
	if ab, ok := all[3].(events.BlockAbort); !ok || ab.Index != 0 || ab.BlockType != events.BlockThinking {
		t.Errorf("event 4 = %#v, want abort of block 0", all[3])
	}
	if st := all[len(all)-1].(events.StatusEvent); st.Status != events.StatusCancelled {
		t.Errorf("final status %s, want cancelled", st.Status)
	}
	if f.lastCtx().Err() == nil {
		t.Error("the provider call's context was not cancelled")
	}
	natstest.Eventually(t, "stream to be forgotten", func() bool { return len(svc.Running()) == 0 })
	// A cancel for an unknown stream is ignored.
	if err := nc.Publish("llmw.llm.cancel.nope", nil); err != nil {
		t.Fatal(err)
	}
}

func TestQueueGroupSharesLoad(t *testing.T) {
	url := startNATS(t)
	mk := func() ingest.Factory {
		return ingest.Static(&fake{scripts: []*script{{evs: []events.Event{events.BlockStart{Index: 0, BlockType: events.BlockText}, events.TextDelta(0, "x"), events.BlockStop{Index: 0, BlockType: events.BlockText}}}}})
	}
	a := startService(t, url, ingest.Config{Instance: "a", Providers: map[string]ingest.Factory{"openai": mk()}})
	startService(t, url, ingest.Config{Instance: "b", Providers: map[string]ingest.Factory{"openai": mk()}})
	nc := connect(t, url)

	// Each request goes to one replica: the chance that 40 of them all land
	// on the same one is 2^-39.
	sources := map[string]int{}
	for i := range 40 {
		id := "q" + strconv.Itoa(i)
		sub := subscribeStream(t, nc, "llmw.llm.stream."+id)
		complete(t, nc, id, "openai:m")
		rs := sub.untilTerminal()
		src := rs[0].env.Source
		for _, r := range rs {
			if r.env.Source != src {
				t.Fatalf("one stream from two sources")
			}
		}
		sources[src]++
		_ = sub.sub.Unsubscribe()
	}
	if sources["/llmw/ingest/a"] == 0 || sources["/llmw/ingest/b"] == 0 || len(sources) != 2 {
		t.Errorf("requests per replica: %v", sources)
	}

	// With one replica stopped, the other serves everything.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		id := "after" + strconv.Itoa(i)
		sub := subscribeStream(t, nc, "llmw.llm.stream."+id)
		complete(t, nc, id, "openai:m")
		if src := sub.next().env.Source; src != "/llmw/ingest/b" {
			t.Errorf("after stop: served by %s", src)
		}
		sub.untilTerminal()
	}
}

func TestStopDrainsInFlightStream(t *testing.T) {
	url := startNATS(t)
	sc := &script{evs: []events.Event{
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "part one, "),
	}, block: true, release: make(chan struct{}), reached: make(chan struct{})}
	// A request that slips in before the drain begins gets a stream that
	// ends at once.
	f := &fake{scripts: []*script{sc, {}}}
	nc := connect(t, url)
	s, err := ingest.New(connect(t, url), ingest.Config{Logger: quietLogger(), Providers: map[string]ingest.Factory{"openai": ingest.Static(f)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sub := subscribeStream(t, nc, "llmw.llm.stream.d1")
	reached := sc.reached
	complete(t, nc, "d1", "openai:m")
	<-reached

	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background()) }()

	late := 0
	// Once draining, new requests are not taken: either no responder is
	// left (the endpoint is gone) or this instance refuses with 503.
	natstest.Eventually(t, "the endpoint to stop taking requests", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		late++
		r, err := nc.RequestMsgWithContext(ctx, binaryRequest("llmw.llm.complete", completionData("late"+strconv.Itoa(late), "openai:m"), nil))
		if errors.Is(err, nats.ErrNoResponders) {
			return true
		}
		_, err = ingest.DecodeReply(r)
		return errors.Is(err, ingest.ErrShuttingDown)
	})
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a stream was in flight", err)
	default:
	}
	natstest.Eventually(t, "only the in-flight stream to be running", func() bool {
		return reflect.DeepEqual(s.Running(), []string{"d1"})
	})

	close(sc.release)
	got := evs(sub.untilTerminal())
	if err := llm.CheckWellFormed(got); err != nil {
		t.Error(err)
	}
	if st := got[len(got)-1].(events.StatusEvent); st.Status != events.StatusCompleted {
		t.Errorf("drained stream ended %s, want completed", st.Status)
	}
	if d := got[2].(events.BlockDelta); d.Content != "part one, " {
		t.Errorf("delta %q", d.Content)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Stop: %v", err)
		}
	case <-time.After(waitFor):
		t.Fatal("Stop did not return after the stream ended")
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := s.Start(context.Background()); !errors.Is(err, ingest.ErrAlreadyStarted) {
		t.Errorf("Start after Stop: %v", err)
	}
}

func TestStopDeadlineCancelsStreams(t *testing.T) {
	url := startNATS(t)
	f := &fake{scripts: []*script{{evs: []events.Event{events.BlockStart{Index: 0, BlockType: events.BlockText}}, block: true}}}
	nc := connect(t, url)
	s, err := ingest.New(connect(t, url), ingest.Config{Logger: quietLogger(), Providers: map[string]ingest.Factory{"openai": ingest.Static(f)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sub := subscribeStream(t, nc, "llmw.llm.stream.h1")
	complete(t, nc, "h1", "openai:m")
	head := sub.untilEvent(func(ev events.Event) bool { _, ok := ev.(events.BlockStart); return ok })

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no patience at all
	if err := s.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Stop = %v, want context.Canceled", err)
	}
	got := append(evs(head), evs(sub.untilTerminal())...)
	if err := llm.CheckWellFormed(got); err != nil {
		t.Error(err)
	}
	if st := got[len(got)-1].(events.StatusEvent); st.Status != events.StatusCancelled {
		t.Errorf("status %s, want cancelled", st.Status)
	}
}

func TestProviderFailures(t *testing.T) {
	boom := errors.New("upstream connection reset")
	cases := []struct {
		name   string
		f      *fake
		idle   time.Duration
		says   string
		prefix []events.Event
	}{
		{"fails mid-stream", &fake{scripts: []*script{{evs: []events.Event{
			events.StatusEvent{Status: events.StatusStarted},
			events.BlockStart{Index: 0, BlockType: events.BlockText},
			events.TextDelta(0, "Once upon"),
			events.BlockStart{Index: 1, BlockType: events.BlockToolUse, ID: "c", Name: "n"},
		}, err: boom}}}, 0, "connection reset", []events.Event{
			events.StatusEvent{Status: events.StatusStarted},
			events.BlockStart{Index: 0, BlockType: events.BlockText},
			events.TextDelta(0, "Once upon"),
			events.BlockStart{Index: 1, BlockType: events.BlockToolUse, ID: "c", Name: "n"},
		}},
		{"panics", &fake{scripts: []*script{{evs: []events.Event{
			events.BlockStart{Index: 0, BlockType: events.BlockText},
			events.TextDelta(0, "a"),
		}, panicAt: 3}}}, 0, "panic", []events.Event{
			events.StatusEvent{Status: events.StatusStarted},
			events.BlockStart{Index: 0, BlockType: events.BlockText},
			events.TextDelta(0, "a"),
		}},
		{"goes silent", &fake{scripts: []*script{{evs: []events.Event{
			events.BlockStart{Index: 0, BlockType: events.BlockText},
		}, block: true}}}, 20 * time.Millisecond, "", []events.Event{
			events.StatusEvent{Status: events.StatusStarted},
			events.BlockStart{Index: 0, BlockType: events.BlockText},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := startNATS(t)
			startService(t, url, ingest.Config{IdleTimeout: c.idle, Providers: map[string]ingest.Factory{"openai": ingest.Static(c.f)}})
			nc := connect(t, url)
			sub := subscribeStream(t, nc, "llmw.llm.stream.f1")
			complete(t, nc, "f1", "openai:m")
			got := evs(sub.untilTerminal())
			if err := llm.CheckWellFormed(got); err != nil {
				t.Fatalf("%v\n%#v", err, got)
			}
			if !reflect.DeepEqual(got[:len(c.prefix)], c.prefix) {
				t.Errorf("head:\n got %#v\nwant %#v", got[:len(c.prefix)], c.prefix)
			}
			if st := got[len(got)-1].(events.StatusEvent); st.Status != events.StatusFailed {
				t.Errorf("status %s, want failed", st.Status)
			}
			var e events.ErrorEvent
			for _, ev := range got {
				if ee, ok := ev.(events.ErrorEvent); ok {
					e = ee
				}
			}
			if !strings.Contains(e.Message, c.says) {
				t.Errorf("error %+v does not say %q", e, c.says)
			}
			if c.idle > 0 && e.Code != "idle_timeout" {
				t.Errorf("error code %q, want idle_timeout", e.Code)
			}
			// Every block that was opened is aborted.
			aborted := map[int]bool{}
			for _, ev := range got {
				if a, ok := ev.(events.BlockAbort); ok {
					aborted[a.Index] = true
				}
			}
			for _, ev := range c.prefix {
				if bs, ok := ev.(events.BlockStart); ok && !aborted[bs.Index] {
					t.Errorf("block %d not aborted", bs.Index)
				}
			}
			// And ingest keeps serving.
			f2 := c.f
			f2.mu.Lock()
			f2.openErr, f2.scripts = nil, []*script{{}}
			f2.mu.Unlock()
			sub2 := subscribeStream(t, nc, "llmw.llm.stream.f2")
			complete(t, nc, "f2", "openai:m")
			got2 := evs(sub2.untilTerminal())
			if st := got2[len(got2)-1].(events.StatusEvent); st.Status != events.StatusCompleted {
				t.Errorf("next stream %s", st.Status)
			}
		})
	}
}

func TestNewValidatesConfig(t *testing.T) {
	if _, err := ingest.New(nil, ingest.Config{}); !errors.Is(err, ingest.ErrNilConn) {
		t.Errorf("nil conn: %v", err)
	}
	url := startNATS(t)
	nc := connect(t, url)
	for _, cfg := range []ingest.Config{{Prefix: "a.*"}, {Prefix: "a..b"}, {MaxPayload: -1}, {Instance: "a/b"}} {
		if _, err := ingest.New(nc, cfg); !errors.Is(err, ingest.ErrInvalidConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	s, err := ingest.New(nc, ingest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); !errors.Is(err, ingest.ErrNotStarted) {
		t.Errorf("Stop before Start: %v", err)
	}
	if !strings.HasPrefix(s.Source(), "/llmw/ingest/") || len(s.Source()) <= len("/llmw/ingest/") {
		t.Errorf("source %q", s.Source())
	}
}

func TestZeroConfigRefusesEveryProvider(t *testing.T) {
	url := startNATS(t)
	startService(t, url, ingest.Config{})
	nc := connect(t, url)
	r := request(t, nc, binaryRequest("llmw.llm.complete", completionData("z", "openai:gpt-4o"), nil))
	if _, err := ingest.DecodeReply(r); !errors.Is(err, ingest.ErrUnknownProvider) {
		t.Errorf("%v", err)
	}
}

func TestMicroDiscovery(t *testing.T) {
	url := startNATS(t)
	startService(t, url, ingest.Config{Instance: "disc"})
	nc := connect(t, url)
	r := request(t, nc, &nats.Msg{Subject: "$SRV.INFO.llmw-ingest"})
	var info micro.Info
	if err := json.Unmarshal(r.Data, &info); err != nil {
		t.Fatal(err)
	}
	if info.Name != "llmw-ingest" || len(info.Endpoints) != 1 {
		t.Fatalf("info %+v", info)
	}
	ep := info.Endpoints[0]
	if ep.Name != "complete" || ep.Subject != "llmw.llm.complete" || ep.QueueGroup != micro.DefaultQueueGroup {
		t.Errorf("endpoint %+v", ep)
	}
}

func TestDecodeReplyRejectsNonReplies(t *testing.T) {
	if _, err := ingest.DecodeReply(nil); !errors.Is(err, ingest.ErrNoReply) {
		t.Error(err)
	}
	if _, err := ingest.DecodeReply(&nats.Msg{Data: []byte(`{"request_id":"x"}`)}); !errors.Is(err, ingest.ErrNoReply) {
		t.Error(err)
	}
	// A micro error without our kind header is classified by its code.
	_, err := ingest.DecodeReply(&nats.Msg{Header: nats.Header{micro.ErrorCodeHeader: {"413"}, micro.ErrorHeader: {"too big"}}})
	if !errors.Is(err, ingest.ErrPayloadTooLarge) || !strings.Contains(err.Error(), "too big") {
		t.Errorf("%v", err)
	}
}
