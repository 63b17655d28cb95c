package turn_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

// A replica of the state bucket that is behind (here: since before the
// turns started) answers some of the direct gets; what the turn service
// decides on, and what LoadState returns, comes from the leader: every
// paused turn is found by its resume and by its cancel, and LoadState
// never returns an old revision.
func TestLaggingReplicaIsNotBelieved(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted()
	e.scripted(p)
	var runs atomic.Int64
	e.startToolexec(toolexec.Config{}, capitalTool(&runs))
	e.startTurn(turn.Config{Hooks: pauseChain(t)})
	ctx := natstest.Context(t)
	kv, err := e.js.KeyValue(ctx, events.BucketTurnState)
	if err != nil {
		t.Fatal(err)
	}
	// The mirror joins the direct-get group only once it has a message.
	if _, err := kv.Put(ctx, "warm-up", []byte("old")); err != nil {
		t.Fatal(err)
	}
	natstest.LaggingReplica(t, e.js, "KV_"+events.BucketTurnState)
	if _, err := kv.Put(ctx, "warm-up", []byte("new")); err != nil {
		t.Fatal(err)
	}
	stale := 0
	for range 40 {
		en, err := kv.Get(ctx, "warm-up")
		if err != nil {
			t.Fatal(err)
		}
		if string(en.Value()) == "old" {
			stale++
		}
	}
	if stale == 0 {
		t.Fatal("the lagging replica answered none of 40 direct gets: the test would prove nothing")
	}

	call := llmtest.ToolCallSpec{ID: "call_1", Name: "get_capital", Input: `{"country":"France"}`}
	paused := func(id string) *watcher {
		w := e.watch(id)
		e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("capital?")}, Tools: []string{"get_capital"}})
		w.waitType(events.TypeTurnPaused)
		for range 10 {
			st, ok, err := turn.LoadState(ctx, e.js, id)
			if err != nil || !ok || st.Status != turn.StatusPaused {
				t.Fatalf("LoadState(%s) = %+v, %v, %v; want the paused state", id, st, ok, err)
			}
		}
		return w
	}
	for i := range 3 {
		p.Add(llmtest.ToolStep(call), llmtest.TextStep("Paris"))
		id := newID(fmt.Sprintf("lagging-resume-%d", i))
		w := paused(id)
		e.resume(events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{"call_1": {Kind: events.DecisionApprove}}})
		w.waitType(events.TypeTurnCompleted)

		p.Add(llmtest.ToolStep(call))
		id = newID(fmt.Sprintf("lagging-cancel-%d", i))
		w = paused(id)
		e.cancelTurn(id)
		w.waitType(events.TypeTurnAborted)
	}
	if runs.Load() != 3 {
		t.Fatalf("the tool ran %d times, want 3 (once per resumed turn)", runs.Load())
	}
	e.consumerIdle(t)
}

// The leader is asked only where a decision follows a read of something
// that existed before. A new turn whose tools run on toolexec, the common
// path, reads neither its state nor its results there: its state lookup
// finds none with a direct get, its calls are first published (no
// lookup), and the results it receives are confirmed with direct gets.
// (Where its events end is read from the leader: its first publish is
// fenced on it.)
func TestANewTurnReadsNoStateOrResultFromTheLeader(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "get_capital", Input: `{"country":"France"}`},
			llmtest.ToolCallSpec{ID: "call_2", Name: "get_capital", Input: `{"country":"UK"}`}),
		llmtest.TextStep("Paris and London"),
	)
	e.scripted(p)
	var runs atomic.Int64
	e.startToolexec(toolexec.Config{}, capitalTool(&runs))
	e.startTurn(turn.Config{})
	var gets, eventGets atomic.Int64
	sub, err := e.nc.Subscribe("$JS.API.STREAM.MSG.GET.>", func(m *nats.Msg) {
		if m.Subject == "$JS.API.STREAM.MSG.GET."+events.StreamEvents {
			eventGets.Add(1)
			return
		}
		gets.Add(1)
		t.Logf("message get from the leader: %s %s", m.Subject, m.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	id := newID("no-leader")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("capitals?")}, Tools: []string{"get_capital"}})
	w.completed()
	e.consumerIdle(t)
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := gets.Load(); n != 0 || runs.Load() != 2 {
		t.Fatalf("%d message gets of state or results from a stream's leader (want 0), the tool ran %d times (want 2)", n, runs.Load())
	}
	if n := eventGets.Load(); n != 1 {
		t.Fatalf("%d reads of where the turn's events end, want 1 (the watcher sees the gets: the test would prove nothing)", n)
	}
}

// LoadState on a NATS account without the turn state bucket says which
// bucket it could not read.
func TestLoadStateWithoutTheBucket(t *testing.T) {
	s := natstest.Start(t, natstest.Options{})
	_, ok, err := turn.LoadState(natstest.Context(t), s.JS, "t1")
	if ok || err == nil || !strings.Contains(err.Error(), events.BucketTurnState) || !strings.Contains(err.Error(), "stream not found") {
		t.Fatalf("LoadState = %v, %v; want an error naming %s and the missing stream", ok, err, events.BucketTurnState)
	}
}

// A session's next turn starts from the transcript its previous turn
// stored, even when a replica of LLMW_SESSIONS that is behind (here: since
// the session's first turn) answers some of the direct gets: each turn's
// model call carries every exchange before it, and LoadSession returns
// the last transcript.
func TestLaggingSessionReplicaIsNotBelieved(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted()
	e.scripted(p)
	e.startTurn(turn.Config{})
	ctx := natstest.Context(t)
	session := newID("lagging-session")
	var want []events.Message // the transcript so far, as the turns' ends report it
	turnOf := func(i int) {
		t.Helper()
		p.Add(llmtest.TextStep(fmt.Sprintf("answer %d", i)))
		id := newID(fmt.Sprintf("lagging-session-%d", i))
		w := e.watch(id)
		q := events.UserText(fmt.Sprintf("question %d", i))
		e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: "test:m", Messages: []events.Message{q}})
		done := w.completed()
		reqs := p.Requests()
		got := reqs[len(reqs)-1].Messages
		if exp := append(append([]events.Message{}, want...), q); mustJSON(t, got) != mustJSON(t, exp) {
			t.Fatalf("turn %d's model call carried\n%s\nwant every earlier exchange of the session and its question:\n%s", i, mustJSON(t, got), mustJSON(t, exp))
		}
		want = append(want, done.Messages...) // each end carries its turn's own messages
	}
	turnOf(0)
	natstest.LaggingReplica(t, e.js, "KV_"+events.BucketSessions)
	turnOf(1)
	kv, err := e.js.KeyValue(ctx, events.BucketSessions)
	if err != nil {
		t.Fatal(err)
	}
	stale := 0
	for range 40 {
		en, err := kv.Get(ctx, session)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(en.Value()), "answer 1") {
			stale++
		}
	}
	if stale == 0 {
		t.Fatal("the lagging replica answered none of 40 direct gets: the test would prove nothing")
	}
	for i := 2; i < 7; i++ {
		turnOf(i)
	}
	for range 10 {
		s, ok, err := turn.LoadSession(ctx, e.js, session)
		if err != nil || !ok || mustJSON(t, s.Messages) != mustJSON(t, want) {
			t.Fatalf("LoadSession = %v, %v; want the transcript of all seven turns", ok, err)
		}
	}
}

// A session whose stored value is not a transcript fails its next turn
// at once, with a reason that names the session and the bucket (its
// request is not redelivered: the value would be the same), and
// LoadSession says what is wrong.
func TestCorruptSessionFailsTheTurn(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(llmtest.TextStep("unused"))
	e.scripted(p)
	e.startTurn(turn.Config{})
	ctx := natstest.Context(t)
	kv, err := e.js.KeyValue(ctx, events.BucketSessions)
	if err != nil {
		t.Fatal(err)
	}
	session := newID("corrupt-session")
	if _, err := kv.Put(ctx, session, []byte(`{"session_id": 7, "messages": "not a list"}`)); err != nil {
		t.Fatal(err)
	}
	id := newID("corrupt-session-turn")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: "test:m", Messages: []events.Message{events.UserText("hi")}})
	end := w.waitEnd()
	te := decode[events.TurnEnded](t, end)
	if end.Type != events.TypeTurnFailed || te.Code != turn.CodeInternal || !strings.Contains(te.Reason, session) || !strings.Contains(te.Reason, events.BucketSessions) {
		t.Fatalf("turn ended %s %+v; want failed (internal) naming the session and %s", end.Type, te, events.BucketSessions)
	}
	if p.Calls() != 0 {
		t.Fatalf("the model was called %d times for a turn whose session cannot be read", p.Calls())
	}
	if _, ok, err := turn.LoadSession(ctx, e.js, session); ok || !errors.Is(err, turn.ErrCorruptSession) {
		t.Fatalf("LoadSession = %v, %v; want ErrCorruptSession", ok, err)
	}
	e.consumerIdle(t)
}
