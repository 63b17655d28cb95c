package turn_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// longTurns is the length of BenchmarkLongSession's session:
// $LLMW_LONG_TURNS, else 200 (scripts/bench.sh runs 1,000).
func longTurns(b *testing.B) int {
	v := os.Getenv("LLMW_LONG_TURNS")
	if v == "" {
		return 200
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 12 {
		b.Fatalf("LLMW_LONG_TURNS=%q: want a number of turns, at least 12", v)
	}
	return n
}

// BenchmarkLongSession runs one session of longTurns turns of 40 KB
// user messages per iteration (run it with -benchtime 1x) on a stock
// 1 MiB server, through ingest to an instant model with a 32k-token
// window, and reports whether a turn's cost stays flat as the
// transcript grows far past the window and the max payload:
//
//   - ratio: the median turn time (submit to llmw.turn.completed) of the
//     last 100 turns over that of turns 2–101 (fewer when the session is
//     shorter than 201 turns: its first and last halves);
//   - max-msg-B: the largest NATS message (headers and data) of the run;
//   - calls/turn-first, calls/turn-last: the model calls per turn, the
//     summarizer's included, the mean of turns 2–11 and of the last 10;
//   - transcript-B/turn-first, transcript-B/turn-last: what LLMW_TRANSCRIPTS
//     grew by per turn, the same means;
//   - in-B/turn-first, in-B/turn-last: the bytes clients sent to the
//     server per turn (every write: the request, transcript appends,
//     state and session records, events, model calls), the same means;
//   - out-B/turn-first, out-B/turn-last: the same of what the server sent
//     to clients (reads, deliveries), the follower of every message left
//     out;
//   - max-call-tok: the largest model call, input and output room, in
//     tokens (docs/protocol.md's estimate; the window is 32,768).
func BenchmarkLongSession(b *testing.B) {
	n := longTurns(b)
	for b.Loop() {
		longSession(b, n)
	}
}

func longSession(b *testing.B, turns int) {
	e := newStockEnv(b)
	all := e.follow()
	m := &instantModel{answer: func(n int) llmtest.Script { return llmtest.TextStep(fmt.Sprintf("answer %d", n)) }}
	e.scripted(m)
	e.startTurn(turn.Config{Models: smallModels(b)})
	te := e.turnEvents(b)
	session := newID("bench-long")
	question := strings.Repeat("q", 40_000)
	took := make([]time.Duration, turns)
	in, out := make([]uint64, turns), make([]uint64, turns)
	stored, ncalls := make([]uint64, turns), make([]uint64, turns)
	transcripts := func() uint64 {
		ctx := natstest.Context(b)
		s, err := e.js.Stream(ctx, events.StreamTranscripts)
		if err != nil {
			b.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return info.State.Bytes
	}
	varz := func() (uint64, uint64) {
		v, err := e.emb.Server.Varz(&server.VarzOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return uint64(v.InBytes), uint64(v.OutBytes)
	}
	for i := range turns {
		id := newID("bench-long-turn")
		_, end := te.expect(id)
		in0, out0 := varz()
		f0, t0, c0 := all.bytes.Load(), transcripts(), len(m.seen())
		start := time.Now()
		e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: smallModel,
			Messages: []events.Message{events.UserText(fmt.Sprintf("question %d ", i) + question)}})
		if typ := waitEnd(b, end); typ != events.TypeTurnCompleted {
			b.Fatalf("turn %d ended with %s", i+1, typ)
		}
		took[i] = time.Since(start)
		all.sync()
		in1, out1 := varz()
		// The follower's bytes are taken off what the server sent; one of
		// its messages counted by the follower but sent before out0 would
		// make the difference negative, so it stops at zero.
		in[i], out[i] = in1-in0, uint64(max(0, int64(out1-out0)-int64(all.bytes.Load()-f0)))
		stored[i], ncalls[i] = transcripts()-t0, uint64(len(m.seen())-c0)
	}
	calls := m.seen()
	var maxCall int64
	for _, c := range calls {
		maxCall = max(maxCall, c.tokens+c.output)
	}
	if maxCall > smallLimits.ContextWindow {
		b.Fatalf("a model call of %d tokens, above the window of %d", maxCall, smallLimits.ContextWindow)
	}
	span := min(100, turns/2)
	median := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	mean := func(v []uint64) float64 {
		var sum uint64
		for _, x := range v {
			sum += x
		}
		return float64(sum) / float64(len(v))
	}
	first, last := median(took[1:1+span]), median(took[turns-span:])
	b.ReportMetric(float64(turns), "turns")
	b.ReportMetric(ms(first), "first-ms")
	b.ReportMetric(ms(last), "last-ms")
	b.ReportMetric(float64(last)/float64(first), "ratio")
	b.ReportMetric(float64(all.Largest()), "max-msg-B")
	b.ReportMetric(mean(ncalls[1:11]), "calls/turn-first")
	b.ReportMetric(mean(ncalls[turns-10:]), "calls/turn-last")
	b.ReportMetric(mean(stored[1:11]), "transcript-B/turn-first")
	b.ReportMetric(mean(stored[turns-10:]), "transcript-B/turn-last")
	b.ReportMetric(mean(in[1:11]), "in-B/turn-first")
	b.ReportMetric(mean(in[turns-10:]), "in-B/turn-last")
	b.ReportMetric(mean(out[1:11]), "out-B/turn-first")
	b.ReportMetric(mean(out[turns-10:]), "out-B/turn-last")
	b.ReportMetric(float64(maxCall), "max-call-tok")
	b.ReportMetric(0, "ns/op")
}
