package ingest_test

import (
	"context"
	"errors"
	"fmt"
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

// scripted is one event the fake ingest publishes, with the seq it stamps
// (so a test can make gaps and duplicates).
type scripted struct {
	seq uint64
	ev  events.Event
}

// fakeIngest is a tiny micro service on P.llm.complete that answers with
// the reply of docs/protocol.md §3 and then plays a script on the stream subject.
func fakeIngest(t *testing.T, nc *nats.Conn, answer func(req events.CompletionRequest, r micro.Request) []scripted) <-chan events.CompletionRequest {
	t.Helper()
	return fakeIngestOf(t, nc, streamSubject, answer)
}

// fakeOldIngest is fakeIngest as an ingest that predates stream_group: it
// streams on P.llm.stream.<request_id> whatever the request says.
func fakeOldIngest(t *testing.T, nc *nats.Conn, answer func(req events.CompletionRequest, r micro.Request) []scripted) <-chan events.CompletionRequest {
	t.Helper()
	return fakeIngestOf(t, nc, func(req events.CompletionRequest) string { return "llmw.llm.stream." + req.RequestID }, answer)
}

// streamSubject is where docs/protocol.md §3 says req is streamed.
func streamSubject(req events.CompletionRequest) string {
	if req.StreamGroup != "" {
		return "llmw.llm.stream." + req.StreamGroup + "." + req.RequestID
	}
	return "llmw.llm.stream." + req.RequestID
}

func fakeIngestOf(t *testing.T, nc *nats.Conn, subject func(events.CompletionRequest) string, answer func(req events.CompletionRequest, r micro.Request) []scripted) <-chan events.CompletionRequest {
	t.Helper()
	got := make(chan events.CompletionRequest, 64)
	svc, err := micro.AddService(nc, micro.Config{Name: "llmw-ingest", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	err = svc.AddEndpoint("complete", micro.HandlerFunc(func(r micro.Request) {
		env, err := events.DecodeEnvelope(nats.Header(r.Headers()), r.Data())
		if err != nil || env.Type != events.TypeLLMComplete {
			_ = r.Error("400", "not a llmw.llm.complete CloudEvent", nil)
			return
		}
		req, err := events.DecodeData[events.CompletionRequest](env)
		if err != nil {
			_ = r.Error("400", err.Error(), nil)
			return
		}
		got <- req
		script := answer(req, r)
		if script == nil {
			return // answer replied with an error itself
		}
		subj := subject(req)
		_ = r.RespondJSON(events.CompletionReply{RequestID: req.RequestID, StreamSubject: subj})
		for _, s := range script {
			pe, _ := events.NewEnvelope("/llmw/ingest/test", s.ev.EventType(), s.ev)
			pe.Seq = s.seq
			_ = nc.PublishMsg(&nats.Msg{Subject: subj, Header: nats.Header(pe.BinaryHeader()), Data: pe.Data})
		}
	}), micro.WithEndpointSubject("llmw.llm.complete"))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func completionRequest() *llm.Request {
	return &llm.Request{Model: "openai:gpt-4.1-mini", Messages: []events.Message{events.UserText("hi")}}
}

func collect(t *testing.T, s llm.Stream) []events.Event {
	t.Helper()
	defer s.Close()
	var out []events.Event
	for s.Next() {
		out = append(out, s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream error: %v", err)
	}
	return out
}

func TestClientStream(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	script := []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "Hel"),
		events.TextDelta(0, "lo"),
		events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn},
		events.UsageEvent{InputTokens: events.Int64(3), OutputTokens: events.Int64(2)},
		events.StatusEvent{Status: events.StatusCompleted},
	}
	reqs := fakeIngest(t, e.NC, func(events.CompletionRequest, micro.Request) []scripted {
		out := make([]scripted, len(script))
		for i, ev := range script {
			out[i] = scripted{uint64(i + 1), ev}
		}
		return out
	})
	c := ingest.NewClient(e.NC, ingest.ClientOptions{})
	req := completionRequest()
	s, err := c.Stream(natstest.Context(t), req)
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, s)
	if len(got) != len(script) {
		t.Fatalf("got %d events, want %d: %v", len(got), len(script), got)
	}
	for i := range script {
		if !sameEvent(got[i], script[i]) {
			t.Errorf("event %d = %#v, want %#v", i, got[i], script[i])
		}
	}
	sent := <-reqs
	if sent.RequestID == "" || sent.RequestID != req.RequestID || sent.Model != "openai:gpt-4.1-mini" {
		t.Errorf("ingest got %+v", sent)
	}
}

func sameEvent(a, b events.Event) bool {
	x, _ := events.MarshalEvent(a)
	y, _ := events.MarshalEvent(b)
	return a.EventType() == b.EventType() && string(x) == string(y)
}

func TestClientErrorReply(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	fakeIngest(t, e.NC, func(_ events.CompletionRequest, r micro.Request) []scripted {
		_ = r.Error("404", "unknown provider \"foo\"", nil)
		return nil
	})
	c := ingest.NewClient(e.NC, ingest.ClientOptions{})
	_, err := c.Stream(natstest.Context(t), completionRequest())
	var pe *ingest.Error
	// A reply without the Llmw-Error header is classified by its code.
	if !errors.Is(err, ingest.ErrUnknownProvider) || !errors.As(err, &pe) || pe.Code != 404 || pe.Message != `unknown provider "foo"` {
		t.Fatalf("err = %v, want ErrUnknownProvider 404", err)
	}
	if !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "unknown provider") {
		t.Errorf("error text %q names neither code nor message", err)
	}
}

func TestClientNoIngest(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	c := ingest.NewClient(e.NC, ingest.ClientOptions{RequestTimeout: time.Second})
	if _, err := c.Stream(natstest.Context(t), completionRequest()); !errors.Is(err, ingest.ErrNoIngest) {
		t.Fatalf("err = %v, want ErrNoIngest", err)
	}
}

func TestClientSeqGapAndDuplicate(t *testing.T) {
	for _, tc := range []struct {
		name string
		seqs []uint64
	}{
		{"gap", []uint64{1, 2, 4}},
		{"duplicate", []uint64{1, 2, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := natstest.Start(t, natstest.Options{})
			evs := []events.Event{
				events.StatusEvent{Status: events.StatusStarted},
				events.BlockStart{Index: 0, BlockType: events.BlockText},
				events.TextDelta(0, "x"),
			}
			fakeIngest(t, e.NC, func(events.CompletionRequest, micro.Request) []scripted {
				return []scripted{{tc.seqs[0], evs[0]}, {tc.seqs[1], evs[1]}, {tc.seqs[2], evs[2]}}
			})
			c := ingest.NewClient(e.NC, ingest.ClientOptions{})
			s, err := c.Stream(natstest.Context(t), completionRequest())
			if err != nil {
				t.Fatal(err)
			}
			got := collect(t, s)
			// started, block start, then the synthesized end: the open
			// block aborted, the error naming the gap, failed.
			if len(got) != 5 {
				t.Fatalf("got %v", got)
			}
			ab, ok := got[2].(events.BlockAbort)
			if !ok || ab.Index != 0 || ab.BlockType != events.BlockText {
				t.Errorf("event 2 = %#v, want abort of block 0", got[2])
			}
			ee, ok := got[3].(events.ErrorEvent)
			if !ok || ee.Code != ingest.CodeStreamGap || !strings.Contains(ee.Message, tc.name) || !strings.Contains(ee.Message, "want 3") {
				t.Errorf("event 3 = %#v, want stream_gap error naming the %s", got[3], tc.name)
			}
			if st, ok := got[4].(events.StatusEvent); !ok || st.Status != events.StatusFailed {
				t.Errorf("last event = %#v, want status failed", got[4])
			}
		})
	}
}

func TestClientIdleTimeout(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	fakeIngest(t, e.NC, func(events.CompletionRequest, micro.Request) []scripted {
		return []scripted{{1, events.StatusEvent{Status: events.StatusStarted}}}
	})
	cancels, err := e.NC.SubscribeSync("llmw.llm.cancel.*")
	if err != nil {
		t.Fatal(err)
	}
	c := ingest.NewClient(e.NC, ingest.ClientOptions{IdleTimeout: 200 * time.Millisecond})
	req := completionRequest()
	s, err := c.Stream(natstest.Context(t), req)
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, s)
	if len(got) != 3 {
		t.Fatalf("got %v", got)
	}
	if ee, ok := got[1].(events.ErrorEvent); !ok || ee.Code != ingest.CodeIdleTimeout {
		t.Errorf("event 1 = %#v, want idle_timeout", got[1])
	}
	if st, ok := got[2].(events.StatusEvent); !ok || st.Status != events.StatusFailed {
		t.Errorf("last = %#v, want failed", got[2])
	}
	// Ingest is told to stop the provider call.
	m, err := cancels.NextMsg(5 * time.Second)
	if err != nil || m.Subject != "llmw.llm.cancel."+req.RequestID {
		t.Fatalf("cancel message %v, %v", m, err)
	}
}

func TestClientCancel(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	fakeIngest(t, e.NC, func(events.CompletionRequest, micro.Request) []scripted {
		return []scripted{
			{1, events.StatusEvent{Status: events.StatusStarted}},
			{2, events.BlockStart{Index: 0, BlockType: events.BlockThinking}},
		}
	})
	cancels, err := e.NC.SubscribeSync("llmw.llm.cancel.*")
	if err != nil {
		t.Fatal(err)
	}
	c := ingest.NewClient(e.NC, ingest.ClientOptions{})
	cctx, cancel := context.WithCancel(natstest.Context(t))
	defer cancel()
	req := completionRequest()
	s, err := c.Stream(cctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 {
		if !s.Next() {
			t.Fatal("stream ended early")
		}
	}
	cancel()
	var rest []events.Event
	for s.Next() {
		rest = append(rest, s.Current())
	}
	if len(rest) != 2 {
		t.Fatalf("after cancel: %v", rest)
	}
	if ab, ok := rest[0].(events.BlockAbort); !ok || ab.BlockType != events.BlockThinking {
		t.Errorf("got %#v, want abort of the thinking block", rest[0])
	}
	if st, ok := rest[1].(events.StatusEvent); !ok || st.Status != events.StatusCancelled {
		t.Errorf("got %#v, want status cancelled", rest[1])
	}
	m, err := cancels.NextMsg(5 * time.Second)
	if err != nil || m.Subject != "llmw.llm.cancel."+req.RequestID {
		t.Fatalf("cancel message %v, %v", m, err)
	}
	if env, err := events.DecodeEnvelope(m.Header, m.Data); err != nil || env.Type != events.TypeLLMCancel {
		t.Errorf("cancel is not a CloudEvent: %v %v", env, err)
	}
}

// A stream whose reader falls more than Buffer messages behind loses the
// overflow and ends failed with a seq gap, as when NATS drops messages for
// a slow consumer; the stream's neighbours are not disturbed.
func TestClientBufferOverflowIsAGap(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	reqs := fakeIngest(t, e.NC, func(events.CompletionRequest, micro.Request) []scripted { return []scripted{} })
	pub := e.Connect(t)
	subjects := map[string]string{} // request id → stream subject
	send := func(reqID string, seq uint64, ev events.Event) {
		t.Helper()
		pe, _ := events.NewEnvelope("/llmw/ingest/test", ev.EventType(), ev)
		pe.Seq = seq
		if err := pub.PublishMsg(&nats.Msg{Subject: subjects[reqID], Header: nats.Header(pe.BinaryHeader()), Data: pe.Data}); err != nil {
			t.Fatal(err)
		}
	}
	c := ingest.NewClient(e.NC, ingest.ClientOptions{Buffer: 2})
	slow, other := completionRequest(), completionRequest()
	s, err := c.Stream(natstest.Context(t), slow)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o, err := c.Stream(natstest.Context(t), other)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	for range 2 {
		r := <-reqs
		subjects[r.RequestID] = streamSubject(r)
	}
	// Six events while nobody reads: the first two wait, 3–6 are dropped.
	send(slow.RequestID, 1, events.StatusEvent{Status: events.StatusStarted})
	send(slow.RequestID, 2, events.BlockStart{Index: 0, BlockType: events.BlockText})
	for seq := uint64(3); seq <= 6; seq++ {
		send(slow.RequestID, seq, events.TextDelta(0, "x"))
	}
	send(other.RequestID, 1, events.StatusEvent{Status: events.StatusStarted})
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	// The other stream's event was published last, and one subscription
	// delivers the client's messages in order: once it is read, every
	// message of the slow stream has reached its queue or been dropped.
	if !o.Next() {
		t.Fatal("the other stream ended")
	}
	if st, ok := o.Current().(events.StatusEvent); !ok || st.Status != events.StatusStarted {
		t.Errorf("other stream: got %#v, want status started", o.Current())
	}
	for i := range 2 {
		if !s.Next() {
			t.Fatalf("stream ended at event %d", i)
		}
	}
	send(slow.RequestID, 7, events.TextDelta(0, "y"))
	var rest []events.Event
	for s.Next() {
		rest = append(rest, s.Current())
	}
	if len(rest) != 3 {
		t.Fatalf("after the overflow: %v", rest)
	}
	if ab, ok := rest[0].(events.BlockAbort); !ok || ab.Index != 0 {
		t.Errorf("got %#v, want abort of block 0", rest[0])
	}
	if ee, ok := rest[1].(events.ErrorEvent); !ok || ee.Code != ingest.CodeStreamGap || !strings.Contains(ee.Message, "got seq 7, want 3") {
		t.Errorf("got %#v, want stream_gap got seq 7, want 3", rest[1])
	}
	if st, ok := rest[2].(events.StatusEvent); !ok || st.Status != events.StatusFailed {
		t.Errorf("got %#v, want status failed", rest[2])
	}
}

// Every request of a Client names the Client's stream group, each
// stream arrives on its own subject under it, and many streams open at once
// each get their own events in order, however their messages interleave.
func TestClientStreamsShareOneGroup(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	const n, deltas = 20, 50
	reqs := fakeIngest(t, e.NC, func(events.CompletionRequest, micro.Request) []scripted { return []scripted{} })
	c := ingest.NewClient(e.NC, ingest.ClientOptions{})
	streams := make([]llm.Stream, n)
	ids := make([]string, n)
	for i := range streams {
		req := completionRequest()
		s, err := c.Stream(natstest.Context(t), req)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		streams[i], ids[i] = s, req.RequestID
	}
	subjects := map[string]string{}
	group := ""
	for range n {
		r := <-reqs
		if group == "" {
			group = r.StreamGroup
		}
		if r.StreamGroup == "" || r.StreamGroup != group {
			t.Fatalf("request %s names stream group %q, want one group for the client (first %q)", r.RequestID, r.StreamGroup, group)
		}
		subjects[r.RequestID] = "llmw.llm.stream." + group + "." + r.RequestID
	}
	pub := e.Connect(t)
	send := func(id string, seq uint64, ev events.Event) {
		pe, _ := events.NewEnvelope("/llmw/ingest/test", ev.EventType(), ev)
		pe.Seq = seq
		if err := pub.PublishMsg(&nats.Msg{Subject: subjects[id], Header: nats.Header(pe.BinaryHeader()), Data: pe.Data}); err != nil {
			t.Fatal(err)
		}
	}
	// Interleaved: every stream's first event, then every stream's second…
	for _, id := range ids {
		send(id, 1, events.StatusEvent{Status: events.StatusStarted})
		send(id, 2, events.BlockStart{Index: 0, BlockType: events.BlockText})
	}
	for d := range deltas {
		for i, id := range ids {
			send(id, uint64(3+d), events.TextDelta(0, fmt.Sprintf("%d.%d ", i, d)))
		}
	}
	for _, id := range ids {
		send(id, deltas+3, events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn})
		send(id, deltas+4, events.StatusEvent{Status: events.StatusCompleted})
	}
	for i, s := range streams {
		var text strings.Builder
		var last events.Event
		for s.Next() {
			last = s.Current()
			if d, ok := last.(events.BlockDelta); ok {
				text.WriteString(d.Content)
			}
		}
		var want strings.Builder
		for d := range deltas {
			fmt.Fprintf(&want, "%d.%d ", i, d)
		}
		if text.String() != want.String() {
			t.Errorf("stream %d: text %q, want %q", i, text.String(), want.String())
		}
		if st, ok := last.(events.StatusEvent); !ok || st.Status != events.StatusCompleted {
			t.Errorf("stream %d ended with %#v, want status completed", i, last)
		}
	}
}

// Against an ingest that predates stream groups (it streams on
// P.llm.stream.<request_id> and says so in its reply), the Client cancels
// the request it cannot have read from the start, sends it again as
// <request_id>-l subscribed to both subjects, and keeps subscribing to
// both for the next requests: no event is lost and no request fails.
func TestClientOlderIngest(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	script := []scripted{
		{1, events.StatusEvent{Status: events.StatusStarted}},
		{2, events.BlockStart{Index: 0, BlockType: events.BlockText}},
		{3, events.TextDelta(0, "old")},
		{4, events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn}},
		{5, events.StatusEvent{Status: events.StatusCompleted}},
	}
	reqs := fakeOldIngest(t, e.NC, func(events.CompletionRequest, micro.Request) []scripted { return script })
	cancels, err := e.NC.SubscribeSync("llmw.llm.cancel.*")
	if err != nil {
		t.Fatal(err)
	}
	c := ingest.NewClient(e.NC, ingest.ClientOptions{})
	for round := range 2 {
		req := completionRequest()
		req.RequestID = fmt.Sprintf("old%d", round)
		s, err := c.Stream(natstest.Context(t), req)
		if err != nil {
			t.Fatal(err)
		}
		got := collect(t, s)
		if len(got) != len(script) {
			t.Fatalf("round %d: got %v, want the %d events of the script", round, got, len(script))
		}
		for i := range script {
			if !sameEvent(got[i], script[i].ev) {
				t.Errorf("round %d: event %d = %#v, want %#v", round, i, got[i], script[i].ev)
			}
		}
		first := <-reqs
		if round == 0 {
			// The first request learns that ingest is older: cancelled, sent again.
			if first.RequestID != "old0" {
				t.Fatalf("first request %q", first.RequestID)
			}
			if m, err := cancels.NextMsg(5 * time.Second); err != nil || m.Subject != "llmw.llm.cancel.old0" {
				t.Fatalf("cancel of the first request: %v, %v", m, err)
			}
			again := <-reqs
			if again.RequestID != "old0-l" || req.RequestID != "old0-l" {
				t.Fatalf("sent again as %q (req.RequestID %q), want old0-l", again.RequestID, req.RequestID)
			}
			continue
		}
		// The next goes once, under its own id.
		if first.RequestID != "old1" || req.RequestID != "old1" {
			t.Fatalf("second request sent as %q (req.RequestID %q), want old1", first.RequestID, req.RequestID)
		}
	}
	select {
	case r := <-reqs:
		t.Fatalf("an extra request %q", r.RequestID)
	default:
	}
	if m, err := cancels.NextMsg(100 * time.Millisecond); err == nil {
		t.Fatalf("an extra cancel %q", m.Subject)
	}
}

// After Close, Stream refuses and the stream group is unsubscribed.
func TestClientClose(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	fakeIngest(t, e.NC, func(events.CompletionRequest, micro.Request) []scripted {
		return []scripted{{1, events.StatusEvent{Status: events.StatusCompleted}}}
	})
	c := ingest.NewClient(e.NC, ingest.ClientOptions{})
	s, err := c.Stream(natstest.Context(t), completionRequest())
	if err != nil {
		t.Fatal(err)
	}
	collect(t, s)
	if n := e.NC.NumSubscriptions(); n == 0 {
		t.Fatal("no subscription while the client is open")
	}
	before := e.NC.NumSubscriptions()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := e.NC.NumSubscriptions(); n != before-1 {
		t.Errorf("%d subscriptions after Close, want %d", n, before-1)
	}
	if _, err := c.Stream(natstest.Context(t), completionRequest()); !errors.Is(err, ingest.ErrClientClosed) {
		t.Fatalf("Stream after Close: %v, want ErrClientClosed", err)
	}
}

// A stream ended by the client aborts every block still open, in index
// order, with its type, whatever order they were opened and closed in.
func TestClientAbortsOpenBlocksInIndexOrder(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	script := []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.BlockStart{Index: 2, BlockType: events.BlockToolUse, ID: "call_1", Name: "f"},
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.BlockStart{Index: 1, BlockType: events.BlockThinking},
		events.BlockStop{Index: 1, BlockType: events.BlockThinking},
		events.BlockStart{Index: 3, BlockType: events.BlockText},
		events.BlockAbort{Index: 3, BlockType: events.BlockText, Reason: "x"},
	}
	fakeIngest(t, e.NC, func(events.CompletionRequest, micro.Request) []scripted {
		out := make([]scripted, len(script))
		for i, ev := range script {
			out[i] = scripted{uint64(i + 1), ev}
		}
		return out
	})
	c := ingest.NewClient(e.NC, ingest.ClientOptions{})
	ctx, cancel := context.WithCancel(natstest.Context(t))
	defer cancel()
	s, err := c.Stream(ctx, completionRequest())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range script {
		if !s.Next() {
			t.Fatalf("stream ended at event %d", i)
		}
	}
	cancel()
	var rest []events.Event
	for s.Next() {
		rest = append(rest, s.Current())
	}
	want := []events.Event{
		events.BlockAbort{Index: 0, BlockType: events.BlockText, Reason: "cancelled"},
		events.BlockAbort{Index: 2, BlockType: events.BlockToolUse, Reason: "cancelled"},
		events.StatusEvent{Status: events.StatusCancelled},
	}
	if len(rest) != len(want) {
		t.Fatalf("after cancel: %v, want %v", rest, want)
	}
	for i := range want {
		if !sameEvent(rest[i], want[i]) {
			t.Errorf("event %d = %#v, want %#v", i, rest[i], want[i])
		}
	}
}
