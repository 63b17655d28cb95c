package natsrt_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natsrt"
)

func TestEventPublisherSeqSubjectsAndCloudEvents(t *testing.T) {
	e := start(t, true)
	sub, err := e.nc.SubscribeSync("llmw.events.>")
	if err != nil {
		t.Fatal(err)
	}
	pub := natsrt.NewPublisher(e.nc, natsrt.PublisherOptions{Service: "turn", Instance: "i1"})
	ep := pub.Turn("t1", "s1", 0)
	if _, err := ep.Publish(events.ChannelTurn, events.TypeTurnStarted, events.TurnStarted{TurnID: "t1", SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ep.Delta(events.ChannelText, events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "he\"llo"), Step: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := ep.Publish(events.ChannelThinking, events.TypeBlockDelta, events.WorkerBlockDelta{BlockDelta: events.ThinkingDelta(1, "hm"), Step: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := ep.Publish(events.ChannelTool, events.TypeToolResult, events.ToolCallResult{CallID: "c1", Name: "x", Content: "ok"}); err != nil {
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
	var last uint64
	eventually(t, "events stored", func() bool {
		last, err = natsrt.LastEventSeq(ctx(t), e.js, "", "s1", "t1")
		return err == nil && last == 4
	})
	ep2 := pub.Turn("t1", "s1", last)
	if seq, err := ep2.Publish(events.ChannelTurn, events.TypeTurnResumed, events.TurnResumed{}); err != nil || seq != 5 {
		t.Fatalf("resumed publisher: seq %d, %v; want 5", seq, err)
	}
	if n, err := natsrt.LastEventSeq(ctx(t), e.js, "", "s1", "other"); err != nil || n != 0 {
		t.Errorf("LastEventSeq of an unknown turn = %d, %v; want 0, nil", n, err)
	}
}

func TestEventPublisherNoSessionAndStructuredDecode(t *testing.T) {
	e := start(t, true)
	pub := natsrt.NewPublisher(e.nc, natsrt.PublisherOptions{})
	ep := pub.Turn("t2", "", 41)
	if _, err := ep.Publish(events.ChannelUsage, events.TypeUsage, events.UsageReport{Step: 1}); err != nil {
		t.Fatal(err)
	}
	st, err := e.js.Stream(ctx(t), events.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	var m *jetstream.RawStreamMsg
	eventually(t, "stored", func() bool {
		m, err = st.GetLastMsgForSubject(ctx(t), "llmw.events._.t2.usage")
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
//	go test -run '^$' -bench EventPublisherDelta -benchmem ./pkg/natsrt/
func BenchmarkEventPublisherDelta(b *testing.B) {
	for _, stored := range []bool{false, true} {
		name := "core"
		if stored {
			name = "stored"
		}
		b.Run(name, func(b *testing.B) {
			e := start(b, stored)
			ep := natsrt.NewPublisher(e.nc, natsrt.PublisherOptions{}).Turn("t1", "s1", 0)
			d := events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, "a token "), Step: 1}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ep.Delta(events.ChannelText, d); err != nil {
					b.Fatal(err)
				}
			}
			if err := e.nc.Flush(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

var _ = nats.Header{}
