package turn_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/compact"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/models"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/turn"
)

// The tests of issue 43's "Done when": a session, and a turn, far longer
// than a NATS message and than the model's window, on a server with the
// stock max payload, through ingest and the turn service.

// stockPayload is a stock nats-server's max_payload (deploy/nats.conf).
const stockPayload = 1 << 20

// smallModel is a model with a 32k-token window: the window of the
// replay: models, given in a models table of its own so that the test
// model goes through ingest's scripted provider.
const smallModel = "test:small"

var smallLimits = llm.ModelLimits{ContextWindow: 32_768, MaxOutputTokens: 4_096}

func smallModels(t testing.TB) models.Source {
	t.Helper()
	tab, err := models.Parse([]byte(fmt.Sprintf(`{"models":{%q:{"context_window":%d,"max_output_tokens":%d}}}`,
		smallModel, smallLimits.ContextWindow, smallLimits.MaxOutputTokens)), false)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// newStockEnv is an env on a server with the stock max payload.
func newStockEnv(t testing.TB) *env {
	t.Helper()
	s := natstest.Start(t, natstest.Options{MaxPayload: stockPayload})
	return &env{t: t, url: s.URL(), emb: s.Embedded, nc: s.NC, js: s.JS}
}

// follower follows every message published on the server (core NATS,
// JetStream publishes, KV and object store writes, replies, deliveries).
type follower struct {
	t       testing.TB
	nc      *nats.Conn
	sub     *nats.Subscription
	largest atomic.Int64
	bytes   atomic.Uint64
}

func (e *env) follow() *follower {
	e.t.Helper()
	f := &follower{t: e.t, nc: e.connect()}
	sub, err := f.nc.Subscribe(">", func(m *nats.Msg) {
		n := int64(m.Size() - len(m.Subject) - len(m.Reply))
		f.bytes.Add(uint64(n))
		for {
			cur := f.largest.Load()
			if n <= cur || f.largest.CompareAndSwap(cur, n) {
				return
			}
		}
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		e.t.Fatal(err)
	}
	f.sub = sub
	f.sync()
	return f
}

// sync waits until the follower got what was published before.
func (f *follower) sync() {
	f.t.Helper()
	if err := f.nc.Flush(); err != nil {
		f.t.Fatal(err)
	}
	for {
		msgs, _, err := f.sub.Pending()
		if err != nil {
			f.t.Fatal(err)
		}
		if msgs == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if d, _ := f.sub.Dropped(); d > 0 {
		f.t.Fatalf("the follower of every message dropped %d", d)
	}
}

// Largest is the size of the largest message so far: its headers and
// data, what max_payload bounds.
func (f *follower) Largest() int {
	f.sync()
	return int(f.largest.Load())
}

// endWithin is waitEnd for a turn that may take longer than waitFor
// (500 steps under the race detector).
func (w *watcher) endWithin(d time.Duration) ev {
	w.t.Helper()
	deadline := time.After(d)
	for {
		for _, e := range w.events() {
			if terminal[e.Type] {
				return e
			}
		}
		select {
		case <-w.cond:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			w.t.Fatalf("the turn did not end within %s: %d events", d, len(w.events()))
		}
	}
}

// modelCall is what the instant model saw of one call.
type modelCall struct {
	summary  bool  // a compaction's summarizer call
	tokens   int64 // the request's input, by docs/protocol.md's estimate rules
	output   int64 // the output it asks room for: max_tokens, else the model's
	messages int
	last     string // the last message's text, its first 80 bytes
	// summarized: the first message holds the summarizer's answer.
	summarized bool
}

// summaryText is the instant model's answer to the summarizer.
const summaryText = "the conversation so far: questions, answers, tool results"

// instantModel answers every call at once, the summarizer's calls
// (compact.SummarySystem) with a short summary and the others with
// answer(n), n the count of the turn calls before; it reports as input
// tokens the request's estimate. It keeps what it saw of each call, not
// the request.
type instantModel struct {
	answer func(n int) llmtest.Script

	mu    sync.Mutex
	calls []modelCall
	turns int
}

func (m *instantModel) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	c := modelCall{summary: req.System == compact.SummarySystem, tokens: llm.EstimateTokens(req, 0, 0),
		output: smallLimits.MaxOutputTokens, messages: len(req.Messages)}
	if req.MaxTokens > 0 {
		c.output = int64(req.MaxTokens)
	}
	if len(req.Messages) > 0 {
		c.last = clip(req.Messages[len(req.Messages)-1])
		c.summarized = strings.Contains(req.Messages[0].Text(), summaryText)
	}
	m.mu.Lock()
	m.calls = append(m.calls, c)
	n := m.turns
	if !c.summary {
		m.turns++
	}
	m.mu.Unlock()
	sc := llmtest.TextStep(summaryText)
	if !c.summary {
		sc = m.answer(n)
	}
	return llmtest.NewScripted(sc.WithUsage(c.tokens, 12)).Stream(ctx, req)
}

func (m *instantModel) seen() []modelCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]modelCall(nil), m.calls...)
}

func clip(msg events.Message) string {
	s := msg.Text()
	for _, p := range msg.Content {
		if p.Type == events.PartToolResult {
			s = p.Content
		}
	}
	return strings.Clone(s[:min(len(s), 80)]) // not the message's bytes
}

// checkWindow fails t unless every call fits the window: its input and
// the output it asks room for.
func checkWindow(t *testing.T, calls []modelCall) (summaries int) {
	t.Helper()
	for i, c := range calls {
		if c.tokens+c.output > smallLimits.ContextWindow {
			t.Fatalf("model call %d (summary %v, %d messages) is %d input tokens + %d output, above the window of %d",
				i+1, c.summary, c.messages, c.tokens, c.output, smallLimits.ContextWindow)
		}
		if c.summary {
			summaries++
		}
	}
	return summaries
}

// A session of 40 KB user turns on a 32k-token model, on a stock 1 MiB
// server, runs turn after turn long after its transcript passed both the
// window and the max payload: every turn completes, every model call
// (the summarizer's included) fits the window, and no NATS message is
// above the max payload.
func TestLongSessionOnASmallWindow(t *testing.T) {
	e := newStockEnv(t)
	all := e.follow()
	const turns, question = 48, 40_000
	m := &instantModel{answer: func(n int) llmtest.Script { return llmtest.TextStep(fmt.Sprintf("answer %d", n)) }}
	e.scripted(m)
	e.startTurn(turn.Config{Models: smallModels(t)})
	session := newID("long-small")
	compacted := 0
	for i := 0; i < turns; i++ {
		id := newID("long-small-turn")
		w := e.watch(id)
		e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: smallModel,
			Messages: []events.Message{events.UserText(fmt.Sprintf("question %d ", i) + strings.Repeat("q", question))}})
		done := w.completed()
		if len(done.Messages) != 2 || done.TranscriptLength != 2*(i+1) || done.Messages[1].Text() != fmt.Sprintf("answer %d", i) {
			t.Fatalf("turn %d completed with %d messages, transcript length %d", i, len(done.Messages), done.TranscriptLength)
		}
		compacted += count(w.events(), events.TypeTurnCompacted)
	}
	calls := m.seen()
	summaries := checkWindow(t, calls)
	if len(calls)-summaries != turns || compacted == 0 || summaries == 0 {
		t.Fatalf("%d model calls, %d of them summaries, %d compactions; want %d answers", len(calls), summaries, compacted, turns)
	}
	// The last turn's call read a summary first, its question last.
	last := calls[len(calls)-1]
	if !last.summarized || !strings.HasPrefix(last.last, fmt.Sprintf("question %d ", turns-1)) {
		t.Fatalf("the last call read a summary first: %v; last %q", last.summarized, last.last)
	}
	sess, ok, err := turn.LoadSession(natstest.Context(t), e.js, session)
	if err != nil || !ok {
		t.Fatalf("LoadSession: %v %v", ok, err)
	}
	size := 0
	for i, msg := range sess.Messages {
		size += len(msg.Text())
		if i%2 == 0 && !strings.HasPrefix(msg.Text(), fmt.Sprintf("question %d ", i/2)) {
			t.Fatalf("the session's message %d is %.20q…", i, msg.Text())
		}
	}
	if len(sess.Messages) != 2*turns || size < turns*question {
		t.Fatalf("the session holds %d messages, %d bytes", len(sess.Messages), size)
	}
	if size < 3*stockPayload/2 || int64(size/4) < 10*smallLimits.ContextWindow {
		t.Fatalf("the transcript is %d bytes: not far above the max payload and the window", size)
	}
	l := all.Largest()
	t.Logf("largest NATS message: %d bytes", l)
	if l > stockPayload {
		t.Fatalf("a NATS message of %d bytes, above the max payload %d", l, stockPayload)
	}
}

// One turn of 500 tool calls, each result 20 KB (10 MB of results), on
// a 32k-token model and a stock 1 MiB server completes: each call fits
// the window, and no NATS message is above the max payload.
func TestFiveHundredToolCallsOnASmallWindow(t *testing.T) {
	e := newStockEnv(t)
	all := e.follow()
	const calls, result = 500, 20_000
	m := &instantModel{answer: func(n int) llmtest.Script {
		if n < calls {
			return llmtest.ToolStep(llmtest.ToolCallSpec{ID: fmt.Sprintf("call-%d", n), Name: "fetch", Input: fmt.Sprintf(`{"n":%d}`, n)})
		}
		return llmtest.TextStep("read them all")
	}}
	type fetchArgs struct {
		N int `json:"n"`
	}
	var ran atomic.Int64
	fetch := tool.Must("fetch", "fetches page n", func(_ context.Context, a fetchArgs) (string, error) {
		ran.Add(1)
		return fmt.Sprintf("page %d ", a.N) + strings.Repeat("r", result), nil
	})
	e.scripted(m)
	e.startTurn(turn.Config{Models: smallModels(t), Tools: []tool.Tool{fetch}})
	id := newID("many-calls")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: smallModel, MaxSteps: calls + 1, Tools: []string{"fetch"},
		Messages: []events.Message{events.UserText("fetch every page")}})
	// A turn's own messages are 10 MB here: llmw.turn.completed carries
	// the answer alone (messages_truncated), and the transcript has all
	// of them (docs/protocol.md §5 "Worker events").
	end := w.endWithin(3 * time.Minute)
	if end.Type != events.TypeTurnCompleted {
		t.Fatalf("the turn ended %s: %s", end.Type, end.Data)
	}
	done := decode[events.TurnCompleted](t, end)
	// The input, 500 assistant messages with a call and 500 results, the answer.
	if want := 1 + 2*calls + 1; !done.MessagesTruncated || len(done.Messages) != 1 || done.Messages[0].Role != events.RoleAssistant || done.TranscriptLength != want {
		t.Fatalf("completed: truncated %v, %d messages, transcript length %d; want the answer alone of %d", done.MessagesTruncated, len(done.Messages), done.TranscriptLength, want)
	}
	if ran.Load() != calls {
		t.Fatalf("the tool ran %d times, want %d", ran.Load(), calls)
	}
	seen := m.seen()
	summaries := checkWindow(t, seen)
	if len(seen)-summaries != calls+1 || count(w.events(), events.TypeTurnCompacted) == 0 {
		t.Fatalf("%d model calls, %d of them summaries, %d compactions", len(seen), summaries, count(w.events(), events.TypeTurnCompacted))
	}
	last := seen[len(seen)-1]
	if !strings.HasPrefix(last.last, fmt.Sprintf("page %d ", calls-1)) {
		t.Fatalf("the last call read %q last", last.last)
	}
	l := all.Largest()
	t.Logf("largest NATS message: %d bytes", l)
	if l > stockPayload {
		t.Fatalf("a NATS message of %d bytes, above the max payload %d", l, stockPayload)
	}
}
