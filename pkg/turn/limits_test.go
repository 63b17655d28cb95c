package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

// A client floods the turn service with cancels of ids that never ran,
// malformed submits and short turns, every one under a random id and
// session: each is answered (a rejection or the turn's end), and once the
// TTLs have passed (docs/protocol.md §2, Limits) the state and session
// buckets and the request stream hold nothing of them: neither a
// transcript per session nor a request no replica took stays for ever.
func TestFloodOfRandomIDs(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted()
	p.SetFallback(llmtest.TextStep("ok"))
	e.scripted(p)
	e.startTurn(turn.Config{FinishedTTL: time.Second, CancelTTL: time.Second,
		Provision: provision.Options{ApplyLimits: true, SessionsTTL: time.Second}})

	const cancels, malformed, turns = 300, 100, 40
	var mu sync.Mutex
	rejected := map[string]int{} // by code
	ended := map[string]string{} // turn id → terminal event type
	sub, err := e.nc.Subscribe(e.subj.TurnRejectedAll(), func(m *nats.Msg) {
		env, err := events.DecodeEnvelope(m.Header, m.Data)
		if err != nil {
			return
		}
		rj, err := events.DecodeData[events.TurnRejected](env)
		if err != nil {
			return
		}
		mu.Lock()
		rejected[rj.Code]++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	evs, err := e.nc.Subscribe(e.subj.EventsAll(), func(m *nats.Msg) {
		env, err := events.DecodeEnvelope(m.Header, m.Data)
		if err != nil || !terminal[env.Type] {
			return
		}
		mu.Lock()
		ended[env.TurnID] = env.Type
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = evs.Unsubscribe() })
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	ctx := natstest.Context(t)
	for range cancels {
		if err := e.nc.Publish(e.subj.TurnCancel("flood-"+nuid.Next()), nil); err != nil {
			t.Fatal(err)
		}
	}
	var acks []jetstream.PubAckFuture
	for range malformed {
		m := &nats.Msg{Subject: e.subj.TurnSubmit(), Header: nats.Header{}, Data: []byte(`{"turn_id": [`)}
		a, err := e.js.PublishMsgAsync(m, jetstream.WithMsgID("bad-"+nuid.Next()))
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, a)
	}
	ids := make([]string, turns)
	for i := range ids {
		ids[i] = "short-" + nuid.Next()
		env, err := events.NewEnvelope(events.Source("test", "flood"), events.TypeTurnSubmit, events.TurnRequest{
			TurnID: ids[i], SessionID: "s-" + nuid.Next(), Model: "test:m", Messages: []events.Message{events.UserText("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		a, err := e.js.PublishMsgAsync(&nats.Msg{Subject: e.subj.TurnSubmit(), Header: nats.Header(env.BinaryHeader()), Data: env.Data})
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, a)
	}
	for _, a := range acks {
		select {
		case <-a.Ok():
		case err := <-a.Err():
			t.Fatalf("publish: %v", err)
		case <-ctx.Done():
			t.Fatal("no acknowledgement of a publish")
		}
	}

	natstest.EventuallyWithin(t, 30*time.Second, "every request answered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return rejected[events.RejectUnknownTurn] == cancels && rejected[events.RejectInvalidRequest] == malformed && len(ended) >= turns+malformed
	})
	mu.Lock()
	for _, id := range ids {
		if ended[id] != events.TypeTurnCompleted {
			t.Errorf("turn %s ended %q, want %s", id, ended[id], events.TypeTurnCompleted)
		}
	}
	mu.Unlock()

	// The floods leave nothing behind once their TTLs have passed.
	keys := func(bucket string) (int, error) {
		kv, err := e.js.KeyValue(ctx, bucket)
		if err != nil {
			return 0, err
		}
		l, err := kv.ListKeys(ctx)
		if err != nil {
			return 0, err
		}
		n := 0
		for range l.Keys() {
			n++
		}
		return n, nil
	}
	var detail string
	defer func() {
		if t.Failed() {
			t.Logf("left: %s", detail)
		}
	}()
	natstest.EventuallyWithin(t, 30*time.Second, "the flood's states, sessions and requests expired", func() bool {
		states, err1 := keys(events.BucketTurnState)
		sessions, err2 := keys(events.BucketSessions)
		st, err3 := e.js.Stream(ctx, events.StreamTurns)
		if err := errors.Join(err1, err2, err3); err != nil {
			detail = err.Error()
			return false
		}
		info, err := st.Info(ctx)
		if err != nil {
			detail = err.Error()
			return false
		}
		detail = fmt.Sprintf("%d states, %d sessions, %d requests", states, sessions, info.State.Msgs)
		return states == 0 && sessions == 0 && info.State.Msgs == 0
	})
}

// A flood of requests while no turn replica runs is bounded by
// LLMW_TURNS' age: the requests nobody took are dropped.
func TestTurnRequestsNobodyTookExpire(t *testing.T) {
	s := natstest.Start(t, natstest.Options{})
	ctx := natstest.Context(t)
	if err := provision.Provision(ctx, s.JS, provision.Options{Memory: true, ApplyLimits: true, TurnsMaxAge: time.Second}); err != nil {
		t.Fatal(err)
	}
	subj := events.NewSubjects("")
	for i := range 50 {
		if _, err := s.JS.Publish(ctx, subj.TurnSubmit(), fmt.Appendf(nil, `{"turn_id":"t%d"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.JS.Stream(ctx, events.StreamTurns)
	if err != nil {
		t.Fatal(err)
	}
	natstest.EventuallyWithin(t, 15*time.Second, "the requests nobody took dropped", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 0
	})
}

// A hook responder that never answers and a tool that never returns do
// not hold a turn replica's slot beyond their timeouts: with room for one
// turn at a time, the hook's timeout (fail_open) and the tool's deadline
// end the first turn's wait, its model reads the tool's timeout as an
// error result, and the second turn runs after it.
func TestSilentHookAndStuckToolFreeTheSlot(t *testing.T) {
	e := newEnv(t)
	call := llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "stuck", Input: `{}`})
	e.scripted(llmtest.NewScripted(call, llmtest.TextStep("gave up"), call, llmtest.TextStep("gave up")))

	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	stuck, err := tool.NewFunc("stuck", "Never returns in time.", json.RawMessage(`{"type":"object"}`),
		func(ctx context.Context, _ json.RawMessage) (string, error) {
			<-release // ignores its context, as a hung tool does
			return "late", nil
		}, tool.WithTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	e.startToolexec(toolexec.Config{}, stuck)

	// The hook's responder takes each request and answers nothing.
	silent := e.connect()
	var asked atomic.Int64
	if _, err := silent.Subscribe("silent.hook", func(*nats.Msg) { asked.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := silent.Flush(); err != nil {
		t.Fatal(err)
	}
	chain := &hook.Chain{}
	r, err := hooknats.New(e.connect(), events.HookRegistration{Name: "silent", Event: events.HookBeforeToolCall,
		Subject: "silent.hook", TimeoutMS: 300, Failure: events.FailOpen}, hooknats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AddTo(chain, 1); err != nil {
		t.Fatal(err)
	}
	e.startTurn(turn.Config{MaxConcurrent: 1, Hooks: chain})

	first, second := newID("first"), newID("second")
	w1, w2 := e.watch(first), e.watch(second)
	for _, id := range []string{first, second} {
		e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}, Tools: []string{"stuck"}})
	}
	for _, w := range []*watcher{w1, w2} {
		evs := w.waitType(events.TypeTurnCompleted)
		i := find(evs, events.TypeToolResult)
		if i < 0 {
			t.Fatalf("no tool result:%s", describe(evs))
		}
		res := decode[events.ToolCallResult](t, evs[i])
		if !res.IsError {
			t.Errorf("the stuck tool's result %+v is not an error", res)
		}
		j := find(evs, events.TypeHookDecision)
		if j < 0 || !decode[events.HookDecision](t, evs[j]).Failed {
			t.Errorf("no failed decision of the silent hook:%s", describe(evs))
		}
	}
	if asked.Load() != 2 {
		t.Errorf("the silent hook was asked %d times, want 2", asked.Load())
	}
}

// The longest turn and session ids docs/protocol.md allows (256 bytes, one
// subject token) run a turn with a tool call to its end and into the
// session, whatever the ids derived from them (model request ids, KV keys,
// tool call ids) need.
func TestLongestIDsRun(t *testing.T) {
	e := newEnv(t)
	e.scripted(llmtest.NewScripted( // the turns run one after the other
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "get_capital", Input: `{"country":"France"}`}),
		llmtest.TextStep("Paris it is"),
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "get_capital", Input: `{"country":"France"}`}),
		llmtest.TextStep("Paris it is"),
	))
	var runs atomic.Int64
	e.startToolexec(toolexec.Config{}, capitalTool(&runs))
	e.startTurn(turn.Config{})
	pad := func(prefix string, c byte) string {
		b := []byte(prefix)
		for len(b) < 256 {
			b = append(b, c)
		}
		return string(b)
	}
	for _, tc := range []struct{ name, turnID, sessionID string }{
		{"key characters", pad(newID("long"), 'x'), pad("s-"+nuid.Next(), 'y')},
		{"other characters", pad(newID("long:é"), 'z'), ""},
	} {
		func() {
			if len(tc.turnID) != 256 || !events.ValidToken(tc.turnID) {
				t.Fatalf("turn id of %d bytes, valid %v", len(tc.turnID), events.ValidToken(tc.turnID))
			}
			w := e.watch(tc.turnID)
			e.submit(events.TurnRequest{TurnID: tc.turnID, SessionID: tc.sessionID, Model: "test:m",
				Messages: []events.Message{events.UserText("capital?")}, Tools: []string{"get_capital"}})
			done := w.completed()
			if _, results := toolUses(done.Messages); !strings.Contains(results["call_1"].Content, "Paris") {
				t.Fatalf("transcript %s", mustJSON(t, done.Messages))
			}
			if tc.sessionID != "" {
				s, ok, err := turn.LoadSession(natstest.Context(t), e.js, tc.sessionID)
				if err != nil || !ok || len(s.Messages) != len(done.Messages) {
					t.Fatalf("%s: session %v %v %v", tc.name, s, ok, err)
				}
			}
		}()
	}
}
