package cenats_test

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"testing"
	"time"

	cejs "github.com/cloudevents/sdk-go/protocol/nats_jetstream/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
)

var tmpl = events.Envelope{Source: "/llmw/turn/r1", Subject: "t1", TurnID: "t1", SessionID: "s1", TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", TraceState: "rojo=00f067aa0ba902b7"}

// A stream of events written by one Writer reads back, in both modes, as
// the envelopes the events codec describes: the fixed attributes of the
// template, the per-event type, seq and data, unique ids, a current time.
func TestWriterRoundTrip(t *testing.T) {
	for _, structured := range []bool{false, true} {
		w := cenats.NewWriter(tmpl, cenats.Options{Structured: structured})
		ids := map[string]bool{}
		for seq := uint64(1); seq <= 3; seq++ {
			data := events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "tok"+strconv.Itoa(int(seq))), Step: 1}.AppendJSON(w.Buffer())
			before := time.Now().Add(-time.Millisecond)
			m := w.Msg("llmw.events.s1.t1.text", events.TypeBlockDelta, seq, data)
			if m.Subject != "llmw.events.s1.t1.text" {
				t.Fatalf("subject %q", m.Subject)
			}
			env, err := cenats.Decode(m)
			if err != nil {
				t.Fatalf("structured=%v seq %d: %v", structured, seq, err)
			}
			want := events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "tok"+strconv.Itoa(int(seq))), Step: 1}
			got, err := events.DecodeWorkerEnvelope(env)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("data %s decoded %#v, %v", env.Data, got, err)
			}
			if env.Type != events.TypeBlockDelta || env.Seq != seq || env.Source != tmpl.Source || env.Subject != "t1" ||
				env.TurnID != "t1" || env.SessionID != "s1" || env.TraceParent != tmpl.TraceParent || env.TraceState != tmpl.TraceState {
				t.Fatalf("structured=%v: envelope %+v", structured, env)
			}
			if env.Time.Before(before) || env.Time.After(time.Now().Add(time.Millisecond)) {
				t.Errorf("time %v is not now", env.Time)
			}
			if ids[env.ID] {
				t.Errorf("id %q repeated", env.ID)
			}
			ids[env.ID] = true
		}
	}
}

// A writer that let go of its header map and buffers (Release) writes its
// next events as a writer that kept them does: the same attributes, ids that go on with its
// prefix; and a header the caller added to a message of another writer
// that released its map does not reach it.
func TestWriterRelease(t *testing.T) {
	other := cenats.NewWriter(events.Envelope{Source: "/llmw/ingest/i", Subject: "req-1"}, cenats.Options{})
	m := other.Msg("llmw.llm.stream.req-1", events.TypeLLMBlockDelta, 1, []byte(`{}`))
	m.Header["Nats-Expected-Last-Subject-Sequence"] = []string{"41"}
	other.Release()

	for _, structured := range []bool{false, true} {
		w := cenats.NewWriter(tmpl, cenats.Options{Structured: structured})
		for seq := uint64(1); seq <= 4; seq++ {
			if seq == 3 {
				w.Release()
			}
			m := w.Msg("llmw.events.s1.t1.turn", events.TypeTurnStep, seq, fmt.Appendf(w.Buffer(), `{"step":%d}`, seq))
			env, err := cenats.Decode(m)
			if err != nil {
				t.Fatalf("structured=%v seq %d: %v", structured, seq, err)
			}
			want := tmpl
			want.ID, want.Type, want.Seq, want.Time, want.Data = w.ID(seq), events.TypeTurnStep, seq, env.Time, fmt.Appendf(nil, `{"step":%d}`, seq)
			if !reflect.DeepEqual(*env, want) {
				t.Fatalf("structured=%v seq %d:\n got %+v\nwant %+v", structured, seq, *env, want)
			}
			if v := m.Header.Get("Nats-Expected-Last-Subject-Sequence"); v != "" {
				t.Fatalf("structured=%v seq %d: a header of another writer's message, %q, came along", structured, seq, v)
			}
		}
	}
	// The writer that released its map writes again too.
	m = other.Msg("llmw.llm.stream.req-1", events.TypeLLMBlockDelta, 2, []byte(`{}`))
	if env, err := cenats.Decode(m); err != nil || env.Source != "/llmw/ingest/i" || env.Subject != "req-1" || env.Seq != 2 || env.ID != other.ID(2) {
		t.Fatalf("after Release: %+v, %v", env, err)
	}
}

// What the Writer publishes is read by cloudevents/sdk-go's own NATS
// binding, and what that binding writes is read by Decode.
func TestInteropWithSDKBinding(t *testing.T) {
	w := cenats.NewWriter(tmpl, cenats.Options{})
	m := w.Msg("x", events.TypeTurnStep, 7, []byte(`{"step":2}`))
	ce, err := binding.ToEvent(context.Background(), cejs.NewMessage(m))
	if err != nil {
		t.Fatal(err)
	}
	if ce.Source() != tmpl.Source || ce.Type() != events.TypeTurnStep || ce.Subject() != "t1" || ce.DataContentType() != "application/json" || string(ce.Data()) != `{"step":2}` {
		t.Fatalf("sdk read %v", ce)
	}
	if ce.Extensions()["seq"] != "7" || ce.Extensions()["turnid"] != "t1" || ce.Extensions()["sessionid"] != "s1" {
		t.Fatalf("sdk extensions %v", ce.Extensions())
	}

	e := events.Envelope{ID: "i1", Source: "/s", Type: events.TypeTurnStep, Subject: "t1", Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		TurnID: "t1", SessionID: "s1", Seq: 7, Data: []byte(`{"step":2}`)}
	sdkEvent := e.CloudEvent()
	var out nats.Msg
	hdr, err := cejs.WriteMsg(context.Background(), binding.ToMessage(&sdkEvent), &bufWriter{&out})
	if err != nil {
		t.Fatal(err)
	}
	out.Header = hdr
	back, err := cenats.Decode(&out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*back, e) {
		t.Fatalf("got %#v\nwant %#v", *back, e)
	}
}

type bufWriter struct{ m *nats.Msg }

func (w *bufWriter) ReadFrom(r io.Reader) (int64, error) {
	b, err := io.ReadAll(r)
	w.m.Data = b
	return int64(len(b)), err
}

// NewMsg fills what the caller left out and nothing else.
func TestNewMsg(t *testing.T) {
	e := &events.Envelope{Source: "/s", Type: events.TypeToolCall, Data: []byte(`{}`)}
	m := cenats.NewMsg("llmw.tool.call.x", e)
	back, err := cenats.Decode(m)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID == "" || back.ID != e.ID || back.Time.IsZero() || back.Type != events.TypeToolCall || m.Subject != "llmw.tool.call.x" {
		t.Fatalf("%+v", back)
	}
}

// FuzzDecode: whatever arrives, Decode returns an envelope with the
// required attributes or an error, never panics.
func FuzzDecode(f *testing.F) {
	f.Add("1.0", "llmw.turn.step", "7", []byte(`{"step":1}`))
	f.Add("", "", "", []byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data":{}}`))
	f.Add("0.3", "x", "-1", []byte(`{}`))
	f.Add("1.0", "x", "99999999999999999999", []byte(`nope`))
	f.Fuzz(func(t *testing.T, sv, typ, seq string, body []byte) {
		h := nats.Header{}
		if sv != "" {
			h.Set(events.HeaderSpecVersion, sv)
			h.Set(events.HeaderID, "1")
			h.Set(events.HeaderSource, "/s")
			h.Set(events.HeaderType, typ)
			h.Set(events.HeaderSeq, seq)
		}
		env, err := cenats.Decode(&nats.Msg{Header: h, Data: body})
		if err == nil && (env.ID == "" || env.Source == "" || env.Type == "") {
			t.Fatalf("decoded %+v without required attributes", env)
		}
	})
}

// The hot path of every streamed token: one delta written into a message.
//
//	go test -run '^$' -bench . -benchmem ./pkg/cenats/
func BenchmarkWriterDelta(b *testing.B) {
	w := cenats.NewWriter(tmpl, cenats.Options{})
	d := events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "token"), Step: 1}
	b.ReportAllocs()
	for i := range b.N {
		_ = w.Msg("llmw.events.s1.t1.text", events.TypeBlockDelta, uint64(i+1), d.AppendJSON(w.Buffer()))
	}
}

// The same event through cloudevents/sdk-go's NATS binding, for comparison.
func BenchmarkSDKEncode(b *testing.B) {
	d := events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "token"), Step: 1}
	b.ReportAllocs()
	for i := range b.N {
		e := tmpl
		e.ID, e.Type, e.Time, e.Seq, e.Data = events.NewID(), events.TypeBlockDelta, time.Now(), uint64(i+1), d.AppendJSON(nil)
		ce := e.CloudEvent()
		var out nats.Msg
		if _, err := cejs.WriteMsg(context.Background(), binding.ToMessage(&ce), &bufWriter{&out}); err != nil {
			b.Fatal(err)
		}
	}
}
