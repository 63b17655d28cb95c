package turn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/turn"
)

// smallPayload is the test server's max_payload in the tests of long
// transcripts: a stock server's 1 MiB scaled down, so that a transcript
// far above it is quick to write.
const smallPayload = 64 << 10

func newSmallEnv(t *testing.T) *env {
	t.Helper()
	s := natstest.Start(t, natstest.Options{MaxPayload: smallPayload})
	return &env{t: t, url: s.URL(), emb: s.Embedded, nc: s.NC, js: s.JS}
}

// streamBytes is what a stream holds, in bytes.
func streamBytes(t *testing.T, e *env, name string) uint64 {
	t.Helper()
	ctx := natstest.Context(t)
	s, err := e.js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Bytes
}

// requireCompleted fails the test unless a turn's end is
// llmw.turn.completed: one whose messages are above the max payload
// carries the last of them alone (messages_truncated), never a failure.
func requireCompleted(t *testing.T, end ev) {
	t.Helper()
	if end.Type != events.TypeTurnCompleted {
		t.Fatalf("the turn ended with %s %+v; want llmw.turn.completed", end.Type, decode[events.TurnEnded](t, end))
	}
}

// A session of many turns whose transcript is far above the NATS max
// payload runs every turn, and what each turn writes does not grow with
// the session: each turn appends its own messages, and the session record
// stays a few hundred bytes.
func TestSessionFarAboveMaxPayload(t *testing.T) {
	e := newSmallEnv(t)
	const turns, question, answer = 14, 12_000, 8_000
	p := llmtest.NewScripted()
	var n atomic.Int64
	for i := 0; i < turns; i++ {
		p.Add(llmtest.TextStep(fmt.Sprintf("answer %d ", i) + strings.Repeat("a", answer)))
	}
	e.startTurn(turn.Config{Provider: p})
	session := newID("long-session")
	var deltas []uint64
	for i := 0; i < turns; i++ {
		before := streamBytes(t, e, events.StreamTranscripts)
		kvBefore := int64(streamBytes(t, e, "KV_"+events.BucketTurnState) + streamBytes(t, e, "KV_"+events.BucketSessions))
		id := newID("long-turn")
		w := e.watch(id)
		e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: "test:m",
			Messages: []events.Message{events.UserText(fmt.Sprintf("question %d ", i) + strings.Repeat("q", question))}})
		requireCompleted(t, w.waitEnd())
		n.Add(1)
		deltas = append(deltas, streamBytes(t, e, events.StreamTranscripts)-before)
		// The buckets keep one value a key: what they grew by is the
		// turn's ended state and the session record's change, neither
		// holding messages.
		if kv := int64(streamBytes(t, e, "KV_"+events.BucketTurnState)+streamBytes(t, e, "KV_"+events.BucketSessions)) - kvBefore; kv > 4096 {
			t.Fatalf("turn %d grew the state and session buckets by %d bytes", i, kv)
		}
	}
	total := turns * (question + answer)
	if total < 4*smallPayload {
		t.Fatalf("the session's transcript is %d bytes, not far above the max payload of %d", total, smallPayload)
	}
	// Every model call got the whole session so far.
	reqs := p.Requests()
	if len(reqs) != turns {
		t.Fatalf("%d model calls, want %d", len(reqs), turns)
	}
	if got := len(reqs[turns-1].Messages); got != 2*turns-1 {
		t.Fatalf("the last turn's model call read %d messages, want %d", got, 2*turns-1)
	}
	sess, ok, err := turn.LoadSession(natstest.Context(t), e.js, session)
	if err != nil || !ok {
		t.Fatalf("LoadSession: %v %v", ok, err)
	}
	if len(sess.Messages) != 2*turns || sess.Transcript.Len != 2*turns {
		t.Fatalf("the session has %d messages (transcript %+v), want %d", len(sess.Messages), sess.Transcript, 2*turns)
	}
	for i := 0; i < turns; i++ {
		if q := sess.Messages[2*i].Text(); !strings.HasPrefix(q, fmt.Sprintf("question %d ", i)) {
			t.Fatalf("message %d: %.20q…", 2*i, q)
		}
		if a := sess.Messages[2*i+1].Text(); !strings.HasPrefix(a, fmt.Sprintf("answer %d ", i)) {
			t.Fatalf("message %d: %.20q…", 2*i+1, a)
		}
	}
	// Flat: the last turn writes no more than the first (each turn's
	// messages on its own subject and on the session's, a few headers).
	lo, hi := deltas[0], deltas[0]
	for _, d := range deltas {
		lo, hi = min(lo, d), max(hi, d)
	}
	if hi > lo+lo/10 || hi > 3*uint64(question+answer) {
		t.Fatalf("bytes appended per turn: %v; want them flat, at most 3× a turn's %d bytes", deltas, question+answer)
	}
	rec, err := e.js.KeyValue(natstest.Context(t), events.BucketSessions)
	if err != nil {
		t.Fatal(err)
	}
	v, err := rec.Get(natstest.Context(t), session)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Value()) > 512 {
		t.Fatalf("the session record is %d bytes: %s", len(v.Value()), v.Value())
	}
}

// A turn whose replica stops mid-way continues on another replica with
// its transcript read back from the stream: the session's earlier turn,
// its input and the tool call's result, in order.
func TestTurnContinuesWithItsTranscript(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(
		llmtest.TextStep("first answer"),
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "look", Input: `{}`}),
		llmtest.BlockingStep("half"),
		llmtest.TextStep("second answer"),
	)
	look := tool.Must("look", "looks", func(context.Context, noArgs) (string, error) { return "seen", nil })
	session := newID("cont-session")
	first := newID("cont-first")
	a, err := turn.New(e.connect(), turn.Config{Instance: "a", Logger: quietLogger(), AckWait: 2 * time.Second, Provider: p, Tools: []tool.Tool{look}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	w := e.watch(first)
	e.submit(events.TurnRequest{TurnID: first, SessionID: session, Model: "test:m", Messages: []events.Message{events.UserText("first question")}})
	if end := w.waitEnd(); end.Type != events.TypeTurnCompleted {
		t.Fatalf("first turn: %s", end.Type)
	}
	id := newID("cont-second")
	w = e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: "test:m", Messages: []events.Message{events.UserText("second question")}, Tools: []string{"look"}})
	w.waitFor("the third model call streaming", func(evs []ev) bool { return p.Calls() == 3 && count(evs, events.TypeBlockDelta) > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx) // too short: the turn is handed off
	e.startTurn(turn.Config{Instance: "b", AckWait: 2 * time.Second, Provider: p, Tools: []tool.Tool{look}})
	if end := w.waitEnd(); end.Type != events.TypeTurnCompleted {
		t.Fatalf("second turn: %s %s", end.Type, end.Data)
	}
	reqs := p.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model calls, want 4", len(reqs))
	}
	want := []string{"user:first question", "assistant:first answer", "user:second question", "assistant:", "tool:seen"}
	got := roles(reqs[3].Messages)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the continued call read %q, want %q", got, want)
	}
	sess, _, err := turn.LoadSession(natstest.Context(t), e.js, session)
	if err != nil {
		t.Fatal(err)
	}
	if got := roles(sess.Messages); strings.Join(got, "|") != strings.Join(append(want, "assistant:second answer"), "|") {
		t.Fatalf("the session holds %q", got)
	}
}

// roles is role:text of each message (tool results: tool:content).
func roles(msgs []events.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		text := m.Text()
		for _, p := range m.Content {
			if p.Type == events.PartToolResult {
				text = p.Content
			}
		}
		out[i] = string(m.Role) + ":" + text
	}
	return out
}

// A session record in the inline format (its messages in the value) is
// read and continued: the next turn's model call reads its messages, and
// the session goes on in LLMW_TRANSCRIPTS.
func TestInlineSessionRecordIsContinued(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(llmtest.TextStep("new answer"))
	e.startTurn(turn.Config{Provider: p})
	session := newID("inline-session")
	kv, err := e.js.KeyValue(natstest.Context(t), events.BucketSessions)
	if err != nil {
		t.Fatal(err)
	}
	legacy := `{"session_id":"` + session + `","messages":[{"role":"user","content":[{"type":"text","text":"old question"}]},` +
		`{"role":"assistant","content":[{"type":"text","text":"old answer"}]}],"last_turn":"old-turn","updated":"2026-11-01T10:00:00Z"}`
	if _, err := kv.Create(natstest.Context(t), session, []byte(legacy)); err != nil {
		t.Fatal(err)
	}
	sess, ok, err := turn.LoadSession(natstest.Context(t), e.js, session)
	if err != nil || !ok || strings.Join(roles(sess.Messages), "|") != "user:old question|assistant:old answer" {
		t.Fatalf("LoadSession of the inline record: %v %v %+v", ok, err, sess)
	}
	id := newID("after-inline")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: "test:m", Messages: []events.Message{events.UserText("new question")}})
	if end := w.waitEnd(); end.Type != events.TypeTurnCompleted {
		t.Fatalf("%s %s", end.Type, end.Data)
	}
	want := "user:old question|assistant:old answer|user:new question"
	if got := strings.Join(roles(p.Requests()[0].Messages), "|"); got != want {
		t.Fatalf("the model read %q, want %q", got, want)
	}
	sess, _, err = turn.LoadSession(natstest.Context(t), e.js, session)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(roles(sess.Messages), "|"); got != want+"|assistant:new answer" {
		t.Fatalf("the session holds %q", got)
	}
	v, err := kv.Get(natstest.Context(t), session)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(v.Value(), &rec); err != nil {
		t.Fatal(err)
	}
	if _, inline := rec["messages"]; inline || rec["transcript"] == nil {
		t.Fatalf("the record after the turn: %s; want its transcript in the stream", v.Value())
	}
}

// A paused turn's state in the inline format (the checkpoint holds the
// messages) is resumed: the call approved runs, and the model reads the
// transcript with its result.
func TestInlineStateIsResumed(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(llmtest.TextStep("the answer"))
	look := tool.Must("look", "looks", func(context.Context, noArgs) (string, error) { return "seen", nil })
	e.startTurn(turn.Config{Provider: p, Tools: []tool.Tool{look}})
	id := newID("inline-state")
	state := `{"version":1,"status":"paused","owner":"gone","seq":0,` +
		`"request":{"turn_id":"` + id + `","model":"test:m","messages":[],"tools":["look"]},` +
		`"checkpoint":{"version":1,"turn_id":"` + id + `","phase":"paused","step":1,` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"legacy question"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"look","input":{}}]}],` +
		`"pending":[{"call":{"id":"c1","name":"look","input":{}},"state":"paused","hook":"approve"}],` +
		`"usage":{"input_tokens":3,"output_tokens":2},"stop_reason":"tool_use",` +
		`"pause":{"event":"before_tool_call","hook":"approve"}},"updated":"2026-11-01T10:00:00Z"}`
	kv, err := e.js.KeyValue(natstest.Context(t), events.BucketTurnState)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(natstest.Context(t), id, []byte(state)); err != nil {
		t.Fatal(err)
	}
	w := e.watch(id)
	e.resume(events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{"c1": {Kind: events.DecisionApprove}}})
	end := w.waitEnd()
	if end.Type != events.TypeTurnCompleted {
		t.Fatalf("%s %s", end.Type, end.Data)
	}
	want := "user:legacy question|assistant:|tool:seen"
	if got := strings.Join(roles(p.Requests()[0].Messages), "|"); got != want {
		t.Fatalf("the model read %q, want %q", got, want)
	}
	done := decode[events.TurnCompleted](t, end)
	if got := strings.Join(roles(done.Messages), "|"); got != want+"|assistant:the answer" {
		t.Fatalf("completed with %q", got)
	}
}

// Tool results whose transcript outgrows the NATS max payload, each
// larger than a message itself, are stored (in chunks) and read back by
// a replica that continues the turn: its model call reads every result.
func TestToolResultsAboveMaxPayload(t *testing.T) {
	e := newSmallEnv(t)
	size := 3 * smallPayload / 2
	big := tool.Must("big", "returns a lot", func(ctx context.Context, _ noArgs) (string, error) {
		return strings.Repeat("x", size), nil
	})
	p := llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "b1", Name: "big", Input: `{}`}, llmtest.ToolCallSpec{ID: "b2", Name: "big", Input: `{}`},
			llmtest.ToolCallSpec{ID: "b3", Name: "big", Input: `{}`}),
		llmtest.BlockingStep("half"),
		llmtest.TextStep("read them all"),
	)
	a, err := turn.New(e.connect(), turn.Config{Instance: "a", Logger: quietLogger(), AckWait: 2 * time.Second, Provider: p, Tools: []tool.Tool{big}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := newID("big-results")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("hi")}, Tools: []string{"big"}})
	w.waitFor("the second model call", func([]ev) bool { return p.Calls() == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx) // too short: the turn is handed off
	e.startTurn(turn.Config{Instance: "b", AckWait: 2 * time.Second, Provider: p, Tools: []tool.Tool{big}})
	end := w.waitEnd()
	requireCompleted(t, end)
	reqs := p.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3", len(reqs))
	}
	var results int
	for _, m := range reqs[2].Messages {
		for _, part := range m.Content {
			if part.Type == events.PartToolResult && len(part.Content) == size {
				results++
			}
		}
	}
	if results != 3 {
		t.Fatalf("the continued model call read %d whole results, want 3", results)
	}
}

// A session whose stored transcript lost an item (the stream's age limit,
// a purge) fails its next turn with internal, the reason naming what is
// missing, instead of running the model on part of the history.
func TestSessionWithAMissingItemFails(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(llmtest.TextStep("first answer"), llmtest.TextStep("unreachable"))
	e.startTurn(turn.Config{Provider: p})
	session := newID("lost-session")
	first := newID("lost-first")
	w := e.watch(first)
	e.submit(events.TurnRequest{TurnID: first, SessionID: session, Model: "test:m", Messages: []events.Message{events.UserText("first question")}})
	if end := w.waitEnd(); end.Type != events.TypeTurnCompleted {
		t.Fatalf("first turn: %s", end.Type)
	}
	ctx := natstest.Context(t)
	s, err := e.js.Stream(ctx, events.StreamTranscripts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(e.subj.Transcript("session", session))); err != nil {
		t.Fatal(err)
	}
	id := newID("lost-second")
	w = e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: "test:m", Messages: []events.Message{events.UserText("second question")}})
	end := w.waitEnd()
	te := decode[events.TurnEnded](t, end)
	if end.Type != events.TypeTurnFailed || te.Code != turn.CodeInternal || !strings.Contains(te.Reason, "transcript unavailable") || !strings.Contains(te.Reason, session) {
		t.Fatalf("%s %+v", end.Type, te)
	}
	if p.Calls() != 1 {
		t.Fatalf("the model was called %d times, want 1 (the first turn)", p.Calls())
	}
}
