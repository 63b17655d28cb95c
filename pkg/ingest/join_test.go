package ingest_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
)

// sliceProvider answers every call with the same events, held in memory:
// the whole answer is already read when ingest publishes its first event
// (llm.SliceStream implements llm.Buffered), as when a provider's stream
// outpaces ingest.
type sliceProvider []events.Event

func (p sliceProvider) Stream(context.Context, *llm.Request) (llm.Stream, error) {
	return llm.SliceStream(p...), nil
}

// streamOf runs one completion of evs through an ingest with cfg and
// returns what a subscriber of the stream subject received, with each
// message's seq.
func streamOf(t *testing.T, cfg ingest.Config, p llm.Provider) []received {
	t.Helper()
	url := startNATS(t)
	cfg.Providers = map[string]ingest.Factory{"openai": ingest.Static(p)}
	startService(t, url, cfg)
	nc := connect(t, url)
	sub := subscribeStream(t, nc, "llmw.llm.stream.j1")
	complete(t, nc, "j1", "openai:m")
	got := sub.untilTerminal()
	for i, r := range got {
		if r.env.Seq != uint64(i+1) {
			t.Fatalf("message %d has seq %d: seq must count messages without gaps", i+1, r.env.Seq)
		}
	}
	return got
}

// assembled is what a receiver assembles per block and kind: the
// concatenated content of the deltas, keyed "index/kind".
func assembled(evs []events.Event) map[string]string {
	out := map[string]string{}
	for _, ev := range evs {
		if d, ok := ev.(events.BlockDelta); ok {
			out[strconv.Itoa(d.Index)+"/"+strconv.Itoa(int(d.Kind))] += d.Content
		}
	}
	return out
}

func deltaCount(evs []events.Event) int {
	n := 0
	for _, ev := range evs {
		if _, ok := ev.(events.BlockDelta); ok {
			n++
		}
	}
	return n
}

// TestDeltasJoin: deltas that are already waiting are joined per block and
// kind, never across a block, a kind or another event, and the text a
// receiver assembles is what the provider sent.
func TestDeltasJoin(t *testing.T) {
	src := []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.BlockStart{Index: 0, BlockType: events.BlockThinking},
		events.ThinkingDelta(0, "Let me "),
		events.ThinkingDelta(0, "think."),
		events.BlockStop{Index: 0, BlockType: events.BlockThinking, Signature: "sig"},
		events.BlockStart{Index: 1, BlockType: events.BlockText},
		events.TextDelta(1, "Quotes \"q\", "),
		events.TextDelta(1, "a back\\slash, a newline\n, "),
		events.TextDelta(1, "ünïcødé and \u2028 and a tab\t."),
		events.BlockStop{Index: 1, BlockType: events.BlockText},
		events.BlockStart{Index: 2, BlockType: events.BlockToolUse, ID: "call_1", Name: "f"},
		events.InputJSONDelta(2, `{"a":`),
		events.InputJSONDelta(2, `"<b>"}`),
		events.BlockStop{Index: 2, BlockType: events.BlockToolUse, StopReason: events.StopToolUse},
		events.StatusEvent{Status: events.StatusCompleted},
	}
	got := evs(streamOf(t, ingest.Config{}, sliceProvider(src)))
	want := []events.Event{
		src[0], src[1],
		events.ThinkingDelta(0, "Let me think."),
		src[4], src[5],
		events.TextDelta(1, "Quotes \"q\", a back\\slash, a newline\n, ünïcødé and \u2028 and a tab\t."),
		src[9], src[10],
		events.InputJSONDelta(2, `{"a":"<b>"}`),
		src[13], src[14],
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d:\n%v", len(got), len(want), got)
	}
	for i := range want {
		if !eventEq(got[i], want[i]) {
			t.Errorf("event %d = %#v, want %#v", i+1, got[i], want[i])
		}
	}
}

func eventEq(a, b events.Event) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return a.EventType() == b.EventType() && string(x) == string(y)
}

// TestDeltasJoinSplitsAtMaxJoinedDelta: a burst larger than MaxJoinedDelta
// becomes several deltas, none larger than it, whose content is the
// burst's; a single provider delta larger than the bound goes whole.
func TestDeltasJoinSplitsAtMaxJoinedDelta(t *testing.T) {
	src := []events.Event{events.StatusEvent{Status: events.StatusStarted}, events.BlockStart{Index: 0, BlockType: events.BlockText}}
	var text strings.Builder
	for i := range 5000 {
		piece := "tok" + strconv.Itoa(i) + " \"é\" "
		text.WriteString(piece)
		src = append(src, events.TextDelta(0, piece))
	}
	big := strings.Repeat("x", ingest.MaxJoinedDelta+100)
	text.WriteString(big)
	src = append(src, events.TextDelta(0, big), events.TextDelta(0, "end"))
	text.WriteString("end")
	src = append(src, events.BlockStop{Index: 0, BlockType: events.BlockText}, events.StatusEvent{Status: events.StatusCompleted})

	rs := streamOf(t, ingest.Config{}, sliceProvider(src))
	if got := assembled(evs(rs))["0/0"]; got != text.String() {
		t.Fatalf("assembled text differs: got %d bytes, want %d", len(got), text.Len())
	}
	n := 0
	for _, r := range rs {
		d, ok := r.ev.(events.BlockDelta)
		if !ok {
			continue
		}
		n++
		if len(r.env.Data) > ingest.MaxJoinedDelta && d.Content != big {
			t.Errorf("a joined delta's data is %d bytes, over MaxJoinedDelta (%d)", len(r.env.Data), ingest.MaxJoinedDelta)
		}
	}
	// About 95 KB of escaped pieces, then the big one alone, then "end":
	// at least 7 messages, and far fewer than the 5,002 provider deltas.
	if n < 7 || n > 20 {
		t.Errorf("%d delta messages for 5,002 provider deltas of about 100 KB", n)
	}
}

// TestDeltasKeptWhenNothingWaits: a delta is published at once when the
// provider has sent nothing after it: the subscriber has it while the
// provider still streams.
func TestDeltasKeptWhenNothingWaits(t *testing.T) {
	url := startNATS(t)
	sc := &script{evs: []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "first"),
	}, block: true, release: make(chan struct{})}
	f := &fake{scripts: []*script{sc}}
	startService(t, url, ingest.Config{Providers: map[string]ingest.Factory{"openai": ingest.Static(f)}})
	nc := connect(t, url)
	sub := subscribeStream(t, nc, "llmw.llm.stream.k1")
	complete(t, nc, "k1", "openai:m")
	got := sub.untilEvent(func(ev events.Event) bool { _, ok := ev.(events.BlockDelta); return ok })
	if d := got[len(got)-1].ev.(events.BlockDelta); d.Content != "first" {
		t.Fatalf("first delta %q, want %q", d.Content, "first")
	}
	close(sc.release) // only now does the provider go on (and end)
	sub.untilTerminal()
}

// TestKeepDeltas: with Config.KeepDeltas every provider delta is a message
// of its own, even when all of them are waiting.
func TestKeepDeltas(t *testing.T) {
	src := []events.Event{events.StatusEvent{Status: events.StatusStarted}, events.BlockStart{Index: 0, BlockType: events.BlockText}}
	for i := range 50 {
		src = append(src, events.TextDelta(0, strconv.Itoa(i)))
	}
	src = append(src, events.BlockStop{Index: 0, BlockType: events.BlockText}, events.StatusEvent{Status: events.StatusCompleted})
	joined := evs(streamOf(t, ingest.Config{}, sliceProvider(src)))
	kept := evs(streamOf(t, ingest.Config{KeepDeltas: true}, sliceProvider(src)))
	if n := deltaCount(kept); n != 50 {
		t.Errorf("KeepDeltas: %d delta messages, want 50", n)
	}
	if n := deltaCount(joined); n != 1 {
		t.Errorf("default: %d delta messages, want 1", n)
	}
	if a, b := assembled(joined), assembled(kept); a["0/0"] != b["0/0"] || len(a) != 1 {
		t.Errorf("assembled text differs: joined %q, kept %q", a, b)
	}
}
