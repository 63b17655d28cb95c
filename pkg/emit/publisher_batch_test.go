package emit_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/emit"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// storedMsg is an event as LLMW_EVENTS keeps it, with the headers of the
// publish that stored it.
type storedMsg struct {
	env     *events.Envelope
	batch   string // Nats-Batch-Id ("" for an event stored alone)
	batchSq string // Nats-Batch-Sequence
	fenced  bool   // it carried Nats-Expected-Last-Subject-Sequence
}

// storedMsgs reads every stored event of filter in stream order.
func storedMsgs(t *testing.T, e *natstest.Server, filter string) []storedMsg {
	t.Helper()
	ctx := natstest.Context(t)
	oc, err := e.JS.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := oc.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	it, err := oc.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	var out []storedMsg
	for range info.NumPending {
		m, err := it.Next(jetstream.NextMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		env, err := events.DecodeEnvelope(m.Headers(), m.Data())
		if err != nil {
			t.Fatal(err)
		}
		h := m.Headers()
		out = append(out, storedMsg{env: env, batch: h.Get("Nats-Batch-Id"), batchSq: h.Get("Nats-Batch-Sequence"),
			fenced: h.Get(jetstream.ExpectedLastSubjSeqHeader) != ""})
	}
	return out
}

// publishHeld queues n deltas of block index (their texts "<tag><i>")
// while the sender is held, then lets it take them all at once: what
// queues behind an acknowledgement, made deterministic.
func publishHeld(t *testing.T, ep *emit.EventPublisher, index, n int, tag string) {
	t.Helper()
	release := emit.HoldSender(ep)
	for i := range n {
		if _, err := ep.Publish(events.WorkerBlockDelta{BlockDelta: events.TextDelta(index, tag+strconv.Itoa(i)), Step: 1}); err != nil {
			t.Fatal(err)
		}
	}
	release()
}

// checkBatches checks the stored events: seq 1…len(want) in order, and
// want[i] the batch event i was stored in, as a number counting batches
// from 1 in stream order (0 = stored alone). Each batch's events carry
// Nats-Batch-Sequence 1, 2, … and only its first carries the fence.
func checkBatches(t *testing.T, got []storedMsg, want []int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events stored, want %d", len(got), len(want))
	}
	ids := map[string]int{}
	pos := 0
	for i, m := range got {
		if m.env.Seq != uint64(i+1) {
			t.Fatalf("stored event %d has seq %d", i, m.env.Seq)
		}
		n := 0
		if m.batch != "" {
			if _, ok := ids[m.batch]; !ok {
				ids[m.batch] = len(ids) + 1
				pos = 0
			}
			n = ids[m.batch]
			pos++
			if m.batchSq != strconv.Itoa(pos) || m.fenced != (pos == 1) {
				t.Errorf("event %d: batch sequence %q, fenced %v; want %d, %v", i, m.batchSq, m.fenced, pos, pos == 1)
			}
		} else if !m.fenced {
			t.Errorf("event %d stored alone without a fence", i)
		}
		if n != want[i] {
			t.Errorf("event %d (seq %d) in batch %d, want %d", i, m.env.Seq, n, want[i])
		}
	}
}

func repeat(v, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// Events that queued go out as one atomic batch, fenced on its first, on
// a stream that stages batches in memory; a single event goes alone. A
// queue longer than a batch holds (100) is several batches, in order.
func TestEventPublisherStoresAQueueAsOneBatch(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true}) // memory storage
	ui, err := e.NC.SubscribeSync("llmw.events.>")
	if err != nil {
		t.Fatal(err)
	}
	ep := emit.NewPublisher(e.NC, emit.PublisherOptions{KeepDeltas: true}).Turn("t1", "s1", emit.Position{})
	publishHeld(t, ep, 0, 1, "a")
	publishHeld(t, ep, 0, 5, "b")
	publishHeld(t, ep, 0, 230, "c")
	if err := ep.Flush(natstest.Context(t)); err != nil {
		t.Fatal(err)
	}
	want := append([]int{0}, repeat(1, 5)...)
	want = append(append(append(want, repeat(2, 100)...), repeat(3, 100)...), repeat(4, 30)...)
	got := storedMsgs(t, e, "llmw.events.s1.t1.*")
	checkBatches(t, got, want)
	// The texts are what was published, in order, live as stored.
	var texts []string
	for _, tag := range []struct {
		s string
		n int
	}{{"a", 1}, {"b", 5}, {"c", 230}} {
		for i := range tag.n {
			texts = append(texts, tag.s+strconv.Itoa(i))
		}
	}
	for i, m := range got {
		var d struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(m.env.Data, &d); err != nil || d.Text != texts[i] {
			t.Fatalf("stored event %d: %q, %v; want %q", i, m.env.Data, err, texts[i])
		}
		lm, err := ui.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("live event %d: %v", i, err)
		}
		if env, err := events.DecodeEnvelope(lm.Header, lm.Data); err != nil || env.Seq != uint64(i+1) {
			t.Fatalf("live event %d: %+v, %v", i, env, err)
		}
	}
}

// A batch holds at most a MiB of events: large events go one by one,
// small ones after them still together.
func TestEventPublisherBoundsABatchBySize(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true})
	ep := emit.NewPublisher(e.NC, emit.PublisherOptions{KeepDeltas: true}).Turn("t1", "", emit.Position{})
	big := strings.Repeat("x", 600<<10)
	release := emit.HoldSender(ep)
	for i := range 6 {
		text := "small"
		if i < 3 {
			text = big
		}
		if _, err := ep.Publish(events.WorkerBlockDelta{BlockDelta: events.TextDelta(i, text), Step: 1}); err != nil {
			t.Fatal(err)
		}
	}
	release()
	if err := ep.Flush(natstest.Context(t)); err != nil {
		t.Fatal(err)
	}
	// 600 KiB + 600 KiB is over the bound: each big one alone; the third
	// starts the last batch, which the small ones fit in.
	checkBatches(t, storedMsgs(t, e, "llmw.events._.t1.*"), []int{0, 0, 1, 1, 1, 1})
}

// A stale owner's batch is refused whole: none of its events is stored or
// seen live, and the owner's events are untouched.
func TestEventPublisherFencesAStaleBatch(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true})
	ctx := natstest.Context(t)
	stale := emit.NewPublisher(e.NC, emit.PublisherOptions{Instance: "old", KeepDeltas: true}).Turn("t1", "s1", emit.Position{})
	publishHeld(t, stale, 0, 3, "x") // stored as one batch
	if err := stale.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	pos, err := emit.LastEvent(ctx, e.NC, "", "s1", "t1")
	if err != nil || pos.Seq != 3 {
		t.Fatalf("LastEvent = %+v, %v", pos, err)
	}
	owner := emit.NewPublisher(e.NC, emit.PublisherOptions{Instance: "new"}).Turn("t1", "s1", pos)
	if _, err := owner.Publish(events.TurnStep{Step: 2}); err != nil {
		t.Fatal(err)
	}
	if err := owner.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ui, err := e.NC.SubscribeSync("llmw.events.>")
	if err != nil {
		t.Fatal(err)
	}
	publishHeld(t, stale, 1, 10, "late")
	if err := stale.Flush(ctx); !errors.Is(err, emit.ErrFenced) {
		t.Fatalf("stale Flush = %v; want ErrFenced", err)
	}
	if m, err := ui.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("a live subscriber saw an event of a refused batch: %s %q", m.Subject, m.Data)
	}
	got := storedMsgs(t, e, "llmw.events.s1.t1.*")
	checkBatches(t, got, []int{1, 1, 1, 0})
	if got[3].env.Source != "/llmw/turn/new" {
		t.Errorf("event 4 from %s", got[3].env.Source)
	}
}

// Where the server stages every batch in a file store (file storage, one
// replica), a short queue goes event by event and only a long one as a
// batch; with NoAtomicBatches, or on a stream without atomic publish (an
// older release provisioned it, or a server before 2.12), never.
func TestEventPublisherBatchesWhereTheStreamTakesThem(t *testing.T) {
	t.Run("file R1", func(t *testing.T) {
		e := natstest.Start(t, natstest.Options{Provision: true, FileStorage: true})
		ep := emit.NewPublisher(e.NC, emit.PublisherOptions{KeepDeltas: true}).Turn("t1", "", emit.Position{})
		publishHeld(t, ep, 0, 15, "a")
		publishHeld(t, ep, 0, 16, "b")
		if err := ep.Flush(natstest.Context(t)); err != nil {
			t.Fatal(err)
		}
		checkBatches(t, storedMsgs(t, e, "llmw.events._.t1.*"), append(repeat(0, 15), repeat(1, 16)...))
	})
	t.Run("NoAtomicBatches", func(t *testing.T) {
		e := natstest.Start(t, natstest.Options{Provision: true})
		ep := emit.NewPublisher(e.NC, emit.PublisherOptions{KeepDeltas: true, NoAtomicBatches: true}).Turn("t1", "", emit.Position{})
		publishHeld(t, ep, 0, 20, "a")
		if err := ep.Flush(natstest.Context(t)); err != nil {
			t.Fatal(err)
		}
		checkBatches(t, storedMsgs(t, e, "llmw.events._.t1.*"), repeat(0, 20))
	})
	t.Run("stream without atomic publish", func(t *testing.T) {
		e := natstest.Start(t, natstest.Options{Provision: true})
		setAtomicPublish(t, e, false)
		ep := emit.NewPublisher(e.NC, emit.PublisherOptions{KeepDeltas: true}).Turn("t1", "", emit.Position{})
		publishHeld(t, ep, 0, 20, "a")
		if err := ep.Flush(natstest.Context(t)); err != nil {
			t.Fatal(err)
		}
		checkBatches(t, storedMsgs(t, e, "llmw.events._.t1.*"), repeat(0, 20))
	})
}

func setAtomicPublish(t *testing.T, e *natstest.Server, on bool) {
	t.Helper()
	ctx := natstest.Context(t)
	st, err := e.JS.Stream(ctx, events.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.AllowAtomicPublish = on
	if _, err := e.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// A batch the server refuses before storing any of it — here because
// atomic publish was turned off after the publisher read the stream — is
// stored event by event, nothing lost, and the publisher stops batching.
func TestEventPublisherStoresARefusedBatchEventByEvent(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true})
	ep := emit.NewPublisher(e.NC, emit.PublisherOptions{KeepDeltas: true}).Turn("t1", "", emit.Position{})
	publishHeld(t, ep, 0, 3, "a")
	if err := ep.Flush(natstest.Context(t)); err != nil {
		t.Fatal(err)
	}
	setAtomicPublish(t, e, false)
	publishHeld(t, ep, 0, 4, "b")
	if err := ep.Flush(natstest.Context(t)); err != nil {
		t.Fatal(err)
	}
	setAtomicPublish(t, e, true) // the publisher has stopped asking
	publishHeld(t, ep, 0, 4, "c")
	if err := ep.Flush(natstest.Context(t)); err != nil {
		t.Fatal(err)
	}
	checkBatches(t, storedMsgs(t, e, "llmw.events._.t1.*"), append(repeat(1, 3), repeat(0, 8)...))
}

// A batch whose commit is refused while the turn's last event is still
// the expected one (a leader behind, right after a restart) is sent again
// as a new batch with the same fence, on its first event only. A real
// server cannot be made to lag in-process: the publishes go to a subject
// no stream captures (prefix q), answered by a stand-in for that leader;
// LLMW_EVENTS (memory, atomic publish) has no event of the turn, so the
// fence, stream sequence 0, still holds.
func TestEventPublisherRetriesAStaleRefusalOfABatch(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true})
	type seen struct{ batch, seq, fence, commit string }
	var (
		mu   sync.Mutex
		msgs []seen
	)
	commits := 0
	sub, err := e.NC.Subscribe("q.emit.>", func(m *nats.Msg) {
		mu.Lock()
		s := seen{m.Header.Get("Nats-Batch-Id"), m.Header.Get("Nats-Batch-Sequence"),
			m.Header.Get(jetstream.ExpectedLastSubjSeqHeader), m.Header.Get("Nats-Batch-Commit")}
		msgs = append(msgs, s)
		if s.commit != "" {
			commits++
		}
		n := commits
		mu.Unlock()
		switch {
		case s.commit == "":
		case n == 1:
			_ = m.Respond([]byte(`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 0"}}`))
		default:
			_ = m.Respond([]byte(`{"stream":"LLMW_EVENTS","seq":9,"batch":"` + s.batch + `","count":3}`))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	ep := emit.NewPublisher(e.NC, emit.PublisherOptions{Prefix: "q", KeepDeltas: true}).Turn("t1", "", emit.Position{})
	publishHeld(t, ep, 0, 3, "a")
	if err := ep.Flush(natstest.Context(t)); err != nil {
		t.Fatalf("Flush = %v; want the retry stored", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(msgs) != 6 {
		t.Fatalf("the stand-in got %d messages, want two batches of 3: %+v", len(msgs), msgs)
	}
	for i, s := range msgs {
		want := seen{msgs[i/3*3].batch, strconv.Itoa(i%3 + 1), "", ""}
		if i%3 == 0 {
			want.fence = "0"
		}
		if i%3 == 2 {
			want.commit = "1"
		}
		if s != want || s.batch == "" {
			t.Errorf("message %d: %+v, want %+v", i, s, want)
		}
	}
	if msgs[0].batch == msgs[3].batch {
		t.Errorf("the retry reused batch id %s", msgs[0].batch)
	}
}

// BenchmarkEventPublisherBurst publishes a burst of events of one turn
// and waits until they are stored (the turn service flushes before each
// checkpoint): 7 events are about a one-tool step's, 25 a four-tool
// step's. The first event of a burst finds the sender idle and goes
// alone; the others queue behind it.
//
//	go test -run '^$' -bench EventPublisherBurst -benchmem ./pkg/turn/
func BenchmarkEventPublisherBurst(b *testing.B) {
	for _, file := range []bool{false, true} {
		for _, n := range []int{7, 25} {
			for _, off := range []bool{false, true} {
				name := "memory"
				if file {
					name = "file"
				}
				name += "/events=" + strconv.Itoa(n) + "/batches="
				if off {
					name += "off"
				} else {
					name += "on"
				}
				b.Run(name, func(b *testing.B) {
					e := natstest.Start(b, natstest.Options{Provision: true, FileStorage: file})
					ep := emit.NewPublisher(e.NC, emit.PublisherOptions{NoAtomicBatches: off}).Turn("t1", "s1", emit.Position{})
					ctx := natstest.Context(b)
					b.ReportAllocs()
					for b.Loop() {
						for i := range n {
							// Another block each: nothing coalesces.
							if _, err := ep.Publish(events.WorkerBlockDelta{BlockDelta: events.TextDelta(i, "a token"), Step: 1}); err != nil {
								b.Fatal(err)
							}
						}
						if err := ep.Flush(ctx); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n)/1e3, "µs/event")
				})
			}
		}
	}
}
