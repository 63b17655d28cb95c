package emit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/emit"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/worker"
)

func TestEventPublisherSeqSubjectsAndCloudEvents(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true, FileStorage: true})
	sub, err := e.NC.SubscribeSync("llmw.events.>")
	if err != nil {
		t.Fatal(err)
	}
	pub := emit.NewPublisher(e.NC, emit.PublisherOptions{Service: "turn", Instance: "i1"})
	ep := pub.Turn("t1", "s1", emit.Position{})
	if _, err := ep.Publish(events.TurnStarted{TurnID: "t1", SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ep.Publish(events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "he\"llo"), Step: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := ep.Publish(events.WorkerBlockDelta{BlockDelta: events.ThinkingDelta(1, "hm"), Step: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := ep.Publish(events.ToolCallResult{CallID: "c1", Name: "x", Content: "ok"}); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		subject, typ, data string
	}{
		{"llmw.events.s1.t1.turn", "llmw.turn.started", `{"turn_id":"t1","session_id":"s1"}`},
		{"llmw.events.s1.t1.text", "llmw.block.delta", `{"index":0,"text":"he\"llo","step":1}`},
		{"llmw.events.s1.t1.thinking", "llmw.block.delta", `{"index":1,"thinking":"hm","step":1}`},
		{"llmw.events.s1.t1.tool", "llmw.tool.result", `{"call_id":"c1","name":"x","content":"ok","is_error":false,"duration_ms":0}`},
	}
	for i, w := range want {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != w.subject {
			t.Errorf("event %d: subject %q, want %q", i, m.Subject, w.subject)
		}
		if m.Header.Get("ce-specversion") != "1.0" || m.Header.Get("content-type") != "application/json" {
			t.Errorf("event %d: not binary mode: %v", i, m.Header)
		}
		env, err := events.DecodeEnvelope(m.Header, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if env.Type != w.typ || env.Seq != uint64(i+1) || env.TurnID != "t1" || env.SessionID != "s1" ||
			env.Subject != "t1" || env.Source != "/llmw/turn/i1" || env.ID == "" || env.Time.IsZero() {
			t.Errorf("event %d: envelope %+v", i, env)
		}
		if !jsonEqual(t, env.Data, []byte(w.data)) {
			t.Errorf("event %d: data %s, want %s", i, env.Data, w.data)
		}
	}
	if ep.Seq() != 4 {
		t.Errorf("Seq() = %d, want 4", ep.Seq())
	}

	// A replica taking the turn over reads the last seq from LLMW_EVENTS
	// and goes on from there.
	if err := ep.Flush(natstest.Context(t)); err != nil {
		t.Fatal(err)
	}
	last, err := emit.LastEvent(natstest.Context(t), e.NC, "", "s1", "t1")
	if err != nil || last.Seq != 4 || last.StreamSeq != 4 {
		t.Fatalf("LastEvent = %+v, %v; want seq 4 at stream sequence 4", last, err)
	}
	ep2 := pub.Turn("t1", "s1", last)
	if seq, err := ep2.Publish(events.TurnResumed{}); err != nil || seq != 5 {
		t.Fatalf("resumed publisher: seq %d, %v; want 5", seq, err)
	}
	if err := ep2.Flush(natstest.Context(t)); err != nil {
		t.Fatal(err)
	}
	if n, err := emit.LastEvent(natstest.Context(t), e.NC, "", "s1", "other"); err != nil || n != (emit.Position{}) {
		t.Errorf("LastEvent of an unknown turn = %+v, %v; want the zero Position, nil", n, err)
	}
}

func TestEventPublisherNoSessionAndStructuredDecode(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true, FileStorage: true})
	pub := emit.NewPublisher(e.NC, emit.PublisherOptions{})
	ep := pub.Turn("t2", "", emit.Position{Seq: 41})
	if _, err := ep.Publish(events.UsageReport{Step: 1}); err != nil {
		t.Fatal(err)
	}
	st, err := e.JS.Stream(natstest.Context(t), events.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	var m *jetstream.RawStreamMsg
	natstest.Eventually(t, "stored", func() bool {
		m, err = st.GetLastMsgForSubject(natstest.Context(t), "llmw.events._.t2.usage")
		return err == nil
	})
	env, err := events.DecodeEnvelope(m.Header, m.Data)
	if err != nil || env.Seq != 42 || env.SessionID != "" {
		t.Fatalf("envelope %+v, %v", env, err)
	}
	// The same event through the cloudevents SDK's view.
	ce := env.CloudEvent()
	if ce.Type() != events.TypeUsage || ce.Extensions()["turnid"] != "t2" {
		t.Errorf("cloudevent %v", ce)
	}
}

func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// BenchmarkEventPublisherDelta publishes text deltas of one turn; with
// the stream, the embedded server stores each one in LLMW_EVENTS (file
// storage) on the same machine.
//
//	go test -run '^$' -bench EventPublisherDelta -benchmem ./pkg/turn/
func BenchmarkEventPublisherDelta(b *testing.B) {
	e := natstest.Start(b, natstest.Options{Provision: true, FileStorage: true})
	ep := emit.NewPublisher(e.NC, emit.PublisherOptions{}).Turn("t1", "s1", emit.Position{})
	d := events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "a token "), Step: 1}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ep.Publish(d); err != nil {
			b.Fatal(err)
		}
	}
	if err := ep.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
}

var _ = nats.Header{}

// storedEvents reads every stored event of a turn in stream order.
func storedEvents(t *testing.T, e *natstest.Server, filter string) []*events.Envelope {
	t.Helper()
	var out []*events.Envelope
	for _, m := range storedMsgs(t, e, filter) {
		out = append(out, m.env)
	}
	return out
}

// A replica that took a turn over publishes from where the stream stands;
// the replica that lost the turn still believes the turn is where it left
// it, and the server refuses everything it publishes from then on.
func TestEventPublisherFencesStaleOwner(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true, FileStorage: true})
	ctx := natstest.Context(t)
	ui, err := e.NC.SubscribeSync("llmw.events.>") // a live UI
	if err != nil {
		t.Fatal(err)
	}
	stale := emit.NewPublisher(e.NC, emit.PublisherOptions{Instance: "old"}).Turn("t1", "s1", emit.Position{})
	for i := range 3 { // three blocks: deltas of one block could be coalesced
		if _, err := stale.Publish(events.WorkerBlockDelta{BlockDelta: events.TextDelta(i, "x"), Step: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := stale.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The stale owner freezes; the new owner reads the stream and goes on.
	pos, err := emit.LastEvent(ctx, e.NC, "", "s1", "t1")
	if err != nil || pos.Seq != 3 {
		t.Fatalf("LastEvent = %+v, %v", pos, err)
	}
	owner := emit.NewPublisher(e.NC, emit.PublisherOptions{Instance: "new"}).Turn("t1", "s1", pos)
	if seq, err := owner.Publish(events.TurnStep{Step: 1, Attempt: 2}); err != nil || seq != 4 {
		t.Fatalf("new owner: seq %d, %v", seq, err)
	}
	if err := owner.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The stale owner wakes up: its next event would be seq 4 again.
	if seq, err := stale.Publish(events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "late"), Step: 1}); err != nil || seq != 4 {
		t.Fatalf("stale owner's publish is queued: seq %d, %v", seq, err)
	}
	if err := stale.Flush(ctx); !errors.Is(err, emit.ErrFenced) || !errors.Is(err, worker.ErrDetached) {
		t.Fatalf("stale Flush = %v; want ErrFenced (a worker.ErrDetached)", err)
	}
	if _, err := stale.Publish(events.TurnCompleted{}); !errors.Is(err, emit.ErrFenced) {
		t.Fatalf("stale Publish after the refusal = %v; want ErrFenced", err)
	}
	// The owner is not disturbed.
	if seq, err := owner.Publish(events.TurnCompleted{}); err != nil || seq != 5 {
		t.Fatalf("owner: seq %d, %v", seq, err)
	}
	if err := owner.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := storedEvents(t, e, "llmw.events.s1.t1.*")
	if len(got) != 5 {
		t.Fatalf("%d events stored, want 5", len(got))
	}
	// A live subscriber saw exactly what was stored: the refused event
	// never reached it.
	for i := range 5 {
		m, err := ui.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("live event %d: %v", i+1, err)
		}
		env, err := events.DecodeEnvelope(m.Header, m.Data)
		if err != nil || env.Seq != uint64(i+1) {
			t.Fatalf("live event %d: %+v, %v", i+1, env, err)
		}
	}
	if m, err := ui.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("a live subscriber saw an event the stream refused: %s %q", m.Subject, m.Data)
	}
	for i, env := range got {
		wantSrc := "/llmw/turn/old"
		if i >= 3 {
			wantSrc = "/llmw/turn/new"
		}
		if env.Seq != uint64(i+1) || env.Source != wantSrc {
			t.Errorf("event %d: seq %d from %s; want seq %d from %s", i, env.Seq, env.Source, i+1, wantSrc)
		}
	}
}

// Events published faster than the server acknowledges them queue; with
// KeepDeltas every one is stored, in publish order, seq without a gap.
func TestEventPublisherBatchesKeepOrder(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true, FileStorage: true})
	ep := emit.NewPublisher(e.NC, emit.PublisherOptions{KeepDeltas: true}).Turn("t1", "", emit.Position{})
	const n = 3000 // more than one batch can hold
	for i := range n {
		if _, err := ep.Publish(events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, fmt.Sprint(i)), Step: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ep.Flush(natstest.Context(t)); err != nil {
		t.Fatal(err)
	}
	got := storedEvents(t, e, "llmw.events._.t1.*")
	if len(got) != n {
		t.Fatalf("%d events stored, want %d", len(got), n)
	}
	for i, env := range got {
		var d struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(env.Data, &d); err != nil {
			t.Fatal(err)
		}
		if env.Seq != uint64(i+1) || d.Text != fmt.Sprint(i) {
			t.Fatalf("stored event %d: seq %d text %q", i, env.Seq, d.Text)
		}
	}
}

// Without a stream to store them (a leader election, a stream not yet
// created) events are retried, and stored once the stream answers.
func TestEventPublisherRetriesUntilStored(t *testing.T) {
	e := natstest.Start(t, natstest.Options{FileStorage: true})
	ep := emit.NewPublisher(e.NC, emit.PublisherOptions{RetryTimeout: 20 * time.Second}).Turn("t1", "", emit.Position{})
	sent := e.NC.Stats().OutMsgs
	if _, err := ep.Publish(events.TurnStarted{TurnID: "t1"}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "a few refused attempts", func() bool { return e.NC.Stats().OutMsgs >= sent+3 })
	if err := provision.Provision(natstest.Context(t), e.JS, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := ep.Flush(natstest.Context(t)); err != nil {
		t.Fatal(err)
	}
	if got := storedEvents(t, e, "llmw.events._.t1.*"); len(got) != 1 || got[0].Type != events.TypeTurnStarted {
		t.Fatalf("stored %v", got)
	}

	// Nothing answers for longer than RetryTimeout: the publisher gives up
	// and says why.
	e2 := natstest.Start(t, natstest.Options{FileStorage: true})
	ep2 := emit.NewPublisher(e2.NC, emit.PublisherOptions{RetryTimeout: 300 * time.Millisecond}).Turn("t1", "", emit.Position{})
	if _, err := ep2.Publish(events.TurnStarted{TurnID: "t1"}); err != nil {
		t.Fatal(err)
	}
	err := ep2.Flush(natstest.Context(t))
	if !errors.Is(err, emit.ErrEventsUnavailable) || !errors.Is(err, worker.ErrDetached) {
		t.Fatalf("Flush = %v; want ErrEventsUnavailable", err)
	}
	if _, err := ep2.Publish(events.TurnStarted{TurnID: "t1"}); !errors.Is(err, emit.ErrEventsUnavailable) {
		t.Fatalf("Publish after giving up = %v", err)
	}
}

// A refusal while the stream's last event of the turn is still the one
// expected (a leader that had not applied it yet, seen right after a NATS
// node restart) is retried with the same fence instead of ending the run
// as fenced. A real server cannot be made to lag in-process, so the
// publishes go to a subject no stream captures, answered by a stand-in
// for that leader: first "wrong last sequence", then stored. LLMW_EVENTS
// (prefix llmw) has no event of the turn: the expectation, stream
// sequence 0, still holds.
func TestEventPublisherRetriesAStaleRefusal(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true})
	var (
		mu     sync.Mutex
		fences []string
	)
	sub, err := e.NC.Subscribe("q.emit.>", func(m *nats.Msg) {
		mu.Lock()
		fences = append(fences, m.Header.Get(jetstream.ExpectedLastSubjSeqHeader))
		n := len(fences)
		mu.Unlock()
		if n == 1 {
			_ = m.Respond([]byte(`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 0"}}`))
			return
		}
		_ = m.Respond([]byte(`{"stream":"LLMW_EVENTS","seq":7}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	ep := emit.NewPublisher(e.NC, emit.PublisherOptions{Prefix: "q", RetryTimeout: 5 * time.Second}).Turn("t1", "", emit.Position{})
	if _, err := ep.Publish(events.TurnStarted{TurnID: "t1"}); err != nil {
		t.Fatal(err)
	}
	if err := ep.Flush(natstest.Context(t)); err != nil {
		t.Fatalf("Flush = %v; want the retry stored", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(fences) != 2 || fences[0] != "0" || fences[1] != "0" {
		t.Fatalf("expected-last headers %q, want the same fence twice", fences)
	}
}

// Deltas published faster than the server stores them reach the stream
// as fewer events carrying the same text: a UI that concatenates the
// deltas it sees reads exactly what was published, seq without a gap.
func TestEventPublisherCoalescesDeltasUnderBackpressure(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true, FileStorage: true})
	ep := emit.NewPublisher(e.NC, emit.PublisherOptions{}).Turn("t1", "", emit.Position{})
	const n = 3000
	var want strings.Builder
	for i := range n {
		tok := fmt.Sprintf("tok%d \"q\"\n", i)
		want.WriteString(tok)
		if _, err := ep.Publish(events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, tok), Step: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ep.Flush(natstest.Context(t)); err != nil {
		t.Fatal(err)
	}
	got := storedEvents(t, e, "llmw.events._.t1.*")
	if len(got) >= n {
		t.Fatalf("%d events stored for %d deltas published in a burst: nothing was coalesced", len(got), n)
	}
	var text strings.Builder
	for i, env := range got {
		if env.Seq != uint64(i+1) || env.Type != events.TypeBlockDelta {
			t.Fatalf("stored event %d: seq %d type %s", i, env.Seq, env.Type)
		}
		if len(env.Data) > emit.MaxCoalescedDelta {
			t.Fatalf("stored event %d has %d bytes of data, over MaxCoalescedDelta", i, len(env.Data))
		}
		var d struct {
			Index *int    `json:"index"`
			Text  *string `json:"text"`
			Step  *int    `json:"step"`
		}
		if err := json.Unmarshal(env.Data, &d); err != nil || d.Index == nil || *d.Index != 0 || d.Step == nil || *d.Step != 1 || d.Text == nil {
			t.Fatalf("stored event %d: %s (%v)", i, env.Data, err)
		}
		text.WriteString(*d.Text)
	}
	if text.String() != want.String() {
		t.Fatalf("the stored deltas carry %d bytes of text, want the %d published", text.Len(), want.Len())
	}
	if ep.Seq() != uint64(len(got)) {
		t.Fatalf("Seq() = %d, %d events stored", ep.Seq(), len(got))
	}
}

// Which deltas join: only one published while the event before it still
// waits for the sender, of the same block (step, index, kind). A stand-in
// for LLMW_EVENTS holds the first publish until every other event is
// queued, so the queue is known exactly.
func TestEventPublisherCoalescesOnlyTheSameBlock(t *testing.T) {
	e := natstest.Start(t, natstest.Options{})
	h := holdFirstPublish(t, e)
	ep := emit.NewPublisher(e.NC, emit.PublisherOptions{Prefix: "q"}).Turn("t1", "", emit.Position{})
	text := func(i, step int, s string) events.WorkerEvent {
		return events.WorkerBlockDelta{BlockDelta: events.TextDelta(i, s), Step: step}
	}
	publish := func(ev events.WorkerEvent, wantSeq uint64) {
		t.Helper()
		if seq, err := ep.Publish(ev); err != nil || seq != wantSeq {
			t.Fatalf("Publish(%+v) = seq %d, %v; want seq %d", ev, seq, err, wantSeq)
		}
	}
	publish(text(0, 1, "in flight"), 1)
	h.held(t)
	publish(text(0, 1, "He"), 2)
	publish(text(0, 1, "llo, \"w"), 2)
	publish(text(0, 1, "orld\"\n"), 2)
	publish(text(0, 1, "\xff!"), 2) // invalid UTF-8 becomes U+FFFD, as in a delta of its own
	publish(events.WorkerBlockStop{BlockStop: events.BlockStop{Index: 0, BlockType: events.BlockText}, Step: 1}, 3)
	publish(events.WorkerBlockDelta{BlockDelta: events.InputJSONDelta(1, `{"a":`), Step: 1}, 4)
	publish(events.WorkerBlockDelta{BlockDelta: events.InputJSONDelta(1, `1}`), Step: 1}, 4)
	publish(events.WorkerBlockDelta{BlockDelta: events.ThinkingDelta(1, "hm"), Step: 1}, 5) // another kind
	publish(text(1, 1, "a"), 6)                                                             // another block
	publish(text(1, 12, "b"), 7)                                                            // another step
	publish(text(1, 12, "c"), 7)
	close(h.release)
	if err := ep.Flush(natstest.Context(t)); err != nil {
		t.Fatal(err)
	}
	type stored struct{ typ, data, seq string }
	var got []stored
	for _, m := range h.stored() {
		got = append(got, stored{m.Header.Get(events.HeaderType), string(m.Data), m.Header.Get(events.HeaderSeq)})
	}
	want := []stored{
		{events.TypeBlockDelta, `{"index":0,"text":"in flight","step":1}`, "1"},
		{events.TypeBlockDelta, `{"index":0,"text":"Hello, \"world\"\n\ufffd!","step":1}`, "2"},
		{events.TypeBlockStop, `{"index":0,"block_type":"text","stop_reason":null,"step":1}`, "3"},
		{events.TypeBlockDelta, `{"index":1,"input_json":"{\"a\":1}","step":1}`, "4"},
		{events.TypeBlockDelta, `{"index":1,"thinking":"hm","step":1}`, "5"},
		{events.TypeBlockDelta, `{"index":1,"text":"a","step":1}`, "6"},
		{events.TypeBlockDelta, `{"index":1,"text":"bc","step":12}`, "7"},
	}
	if len(got) != len(want) {
		t.Fatalf("stored %d events, want %d: %q", len(got), len(want), got)
	}
	for i := range want {
		if got[i].typ != want[i].typ || got[i].seq != want[i].seq || !sameJSON(got[i].data, want[i].data) {
			t.Errorf("event %d: %s seq %s %s; want %s seq %s %s", i, got[i].typ, got[i].seq, got[i].data, want[i].typ, want[i].seq, want[i].data)
		}
	}
}

// A burst larger than MaxCoalescedDelta is split into deltas of at most
// that size; with KeepDeltas nothing is coalesced.
func TestEventPublisherCoalescingLimits(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("KeepDeltas=", keep), func(t *testing.T) {
			e := natstest.Start(t, natstest.Options{})
			h := holdFirstPublish(t, e)
			ep := emit.NewPublisher(e.NC, emit.PublisherOptions{Prefix: "q", KeepDeltas: keep}).Turn("t1", "", emit.Position{})
			if _, err := ep.Publish(events.TurnStarted{TurnID: "t1"}); err != nil {
				t.Fatal(err)
			}
			h.held(t)
			chunk := strings.Repeat("x", 1000)
			const chunks = 40 // 40,000 bytes of text
			for range chunks {
				if _, err := ep.Publish(events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, chunk), Step: 1}); err != nil {
					t.Fatal(err)
				}
			}
			close(h.release)
			if err := ep.Flush(natstest.Context(t)); err != nil {
				t.Fatal(err)
			}
			var deltas []string
			for _, m := range h.stored()[1:] {
				deltas = append(deltas, string(m.Data))
			}
			var total int
			for i, d := range deltas {
				if len(d) > emit.MaxCoalescedDelta {
					t.Fatalf("delta %d: %d bytes", i, len(d))
				}
				var v struct{ Text string }
				if err := json.Unmarshal([]byte(d), &v); err != nil {
					t.Fatal(err)
				}
				total += len(v.Text)
			}
			if total != chunks*len(chunk) {
				t.Fatalf("%d bytes of text stored, want %d", total, chunks*len(chunk))
			}
			// Without KeepDeltas: 16 chunks fit in 16 KiB with the JSON
			// around them, so 40 make 3 deltas (16, 16, 8).
			wantEvents := 3
			if keep {
				wantEvents = chunks
			}
			if len(deltas) != wantEvents {
				t.Fatalf("%d deltas stored, want %d", len(deltas), wantEvents)
			}
		})
	}
}

// heldStream is a stand-in for LLMW_EVENTS on the prefix q: it records
// every publish and acknowledges it, but holds the first one until
// release is closed, so that a test knows exactly what queues behind it.
type heldStream struct {
	mu      sync.Mutex
	msgs    []*nats.Msg
	arrived chan struct{} // closed when the first publish is held
	release chan struct{} // closed by the test to let it through
}

func holdFirstPublish(t *testing.T, e *natstest.Server) *heldStream {
	t.Helper()
	h := &heldStream{arrived: make(chan struct{}), release: make(chan struct{})}
	sub, err := e.NC.Subscribe("q.emit.>", func(m *nats.Msg) {
		h.mu.Lock()
		h.msgs = append(h.msgs, m)
		n := len(h.msgs)
		h.mu.Unlock()
		if n == 1 {
			close(h.arrived)
			<-h.release
		}
		_ = m.Respond([]byte(`{"stream":"LLMW_EVENTS","seq":` + fmt.Sprint(n) + `}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return h
}

// held waits until the first publish is held.
func (h *heldStream) held(t *testing.T) {
	t.Helper()
	select {
	case <-h.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the first event never reached the stream")
	}
}

// stored returns what was published, in order.
func (h *heldStream) stored() []*nats.Msg {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*nats.Msg(nil), h.msgs...)
}

// FlushTo answers for the events up to a seq: at once when they are
// stored though later ones wait, with the refusal once a later event was
// refused (the publisher lost the turn), and like Flush for an event not
// stored yet.
func TestEventPublisherFlushTo(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true})
	ctx := natstest.Context(t)
	ep := emit.NewPublisher(e.NC, emit.PublisherOptions{Instance: "a"}).Turn("t1", "s1", emit.Position{})
	first, err := ep.Publish(events.TurnStep{Step: 1, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	release := emit.HoldSender(ep)
	second, err := ep.Publish(events.ToolStarted{CallID: "c1", Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.FlushTo(ctx, first); err != nil {
		t.Fatalf("FlushTo(%d) with %d held: %v", first, second, err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := ep.FlushTo(short, second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("FlushTo(%d) while it is held = %v; want the context's deadline", second, err)
	}
	release()
	if err := ep.FlushTo(ctx, second); err != nil {
		t.Fatal(err)
	}
	if got := storedEvents(t, e, "llmw.events.s1.t1.*"); len(got) != 2 {
		t.Fatalf("%d events stored, want 2", len(got))
	}

	// Another replica takes the turn over: the next event is refused, and
	// from then on even the events stored before answer with the refusal.
	pos, err := emit.LastEvent(ctx, e.NC, "", "s1", "t1")
	if err != nil {
		t.Fatal(err)
	}
	owner := emit.NewPublisher(e.NC, emit.PublisherOptions{Instance: "b"}).Turn("t1", "s1", pos)
	if _, err := owner.Publish(events.TurnStarted{TurnID: "t1", SessionID: "s1", Resumed: true}); err != nil {
		t.Fatal(err)
	}
	if err := owner.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ep.Publish(events.ToolStarted{CallID: "c2", Name: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := ep.Flush(ctx); !errors.Is(err, emit.ErrFenced) {
		t.Fatalf("Flush = %v; want ErrFenced", err)
	}
	if err := ep.FlushTo(ctx, first); !errors.Is(err, emit.ErrFenced) {
		t.Fatalf("FlushTo(%d) after the refusal = %v; want ErrFenced", first, err)
	}
}

// A flush waits for the events published before it, not for those that
// keep coming while it waits: the checkpoint written during a model call
// (pkg/turn's pipelined checkpoint) flushes the events it counts while
// the call's deltas stream on, and must not wait for the stream's end.
func TestFlushDoesNotWaitForLaterEvents(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true})
	ctx := natstest.Context(t)
	ep := emit.NewPublisher(e.NC, emit.PublisherOptions{Instance: "a", KeepDeltas: true}).Turn("t1", "s1", emit.Position{})
	if _, err := ep.Publish(events.TurnStep{Step: 1, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	flushed := make(chan struct{})
	publishing := make(chan error, 1)
	go func() {
		// Deltas as fast as Publish takes them, for far longer than a
		// flush of the first event needs: the sender never runs dry.
		deadline := time.Now().Add(10 * time.Second)
		for i := 0; time.Now().Before(deadline); i++ {
			select {
			case <-flushed:
				publishing <- nil
				return
			default:
			}
			if _, err := ep.Publish(events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "x"), Step: 1}); err != nil {
				publishing <- err
				return
			}
		}
		publishing <- errors.New("still publishing when the deltas ran out: the flush waited for them")
	}()
	if err := ep.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	close(flushed)
	if err := <-publishing; err != nil {
		t.Fatal(err)
	}
	if err := ep.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}
