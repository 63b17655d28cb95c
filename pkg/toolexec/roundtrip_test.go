package toolexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/fence"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

// A slot that is running a call holds no other: a call published while
// the only slot of replica a is busy runs on replica b, started after it.
func TestBusySlotLeavesCallsToIdleReplicas(t *testing.T) {
	e := start(t)
	b := newBlocker()
	replica(t, e.url, toolexec.Config{Instance: "a", Concurrency: 1}, b.tool("a"))
	rt := remote(t, e, "block")
	done := make(chan string, 2)
	go func() {
		out, _ := rt.Execute(call(ctx(t), "t1", "c1"), nil)
		done <- out
	}()
	if where := <-b.started; where != "a" {
		t.Fatalf("first call ran on %q, want a", where)
	}
	replica(t, e.url, toolexec.Config{Instance: "b", Concurrency: 1}, b.tool("b"))
	go func() {
		out, _ := rt.Execute(call(ctx(t), "t1", "c2"), nil)
		done <- out
	}()
	select {
	case where := <-b.started:
		if where != "b" {
			t.Fatalf("second call ran on %q while a was busy, want b", where)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second call did not start while a was busy: a holds it")
	}
	close(b.release)
	got := map[string]bool{<-done: true, <-done: true}
	if !got["done by a"] || !got["done by b"] {
		t.Fatalf("results %v, want one from each replica", got)
	}
}

// The fence (the turn's event flush) does not wait for the stored-result
// lookup: here the lookup can only succeed once the fence has run (the
// fence brings back the results stream), and the call still goes through
// well before its deadline.
func TestFenceRunsWhileLookingForStoredResult(t *testing.T) {
	e := start(t)
	var calls atomic.Int32
	replica(t, e.url, toolexec.Config{}, echo(&calls))
	rt := remote(t, e, "echo")
	if err := e.js.DeleteStream(ctx(t), events.StreamToolResults); err != nil {
		t.Fatal(err)
	}
	var fenced atomic.Int32
	c := fence.With(call(ctx(t), "t1", "c1"), func(context.Context) error {
		fenced.Add(1)
		return provision.Provision(context.Background(), e.js, provision.Options{})
	})
	c, cancel := context.WithTimeout(c, 4*time.Second)
	defer cancel()
	out, err := rt.Execute(c, json.RawMessage(`{"text":"ok"}`))
	if err != nil || out != "ok" || fenced.Load() != 1 || calls.Load() != 1 {
		t.Fatalf("Execute = %q, %v; fence ran %d times, tool %d; want ok, 1, 1", out, err, fenced.Load(), calls.Load())
	}
}

// A call whose result is stored gets that result even when the fence
// fails: a stale owner learns the result and publishes nothing.
func TestStoredResultComesBeforeTheFence(t *testing.T) {
	e := start(t)
	var calls atomic.Int32
	replica(t, e.url, toolexec.Config{}, echo(&calls))
	rt := remote(t, e, "echo")
	if out, err := rt.Execute(call(ctx(t), "t1", "c1"), json.RawMessage(`{"text":"first"}`)); err != nil || out != "first" {
		t.Fatalf("Execute = %q, %v", out, err)
	}
	lost := errors.New("another replica owns the turn")
	c := fence.With(call(ctx(t), "t1", "c1"), func(context.Context) error { return lost })
	out, err := rt.Execute(c, json.RawMessage(`{"text":"second"}`))
	if err != nil || out != "first" || calls.Load() != 1 {
		t.Fatalf("Execute = %q, %v, tool ran %d times; want the stored result first, nil, 1", out, err, calls.Load())
	}
}

// traffic records every message the server routes, in the order it
// routes them (one subscription, so one order).
type traffic struct {
	mu   sync.Mutex
	msgs []*nats.Msg
}

func watch(t *testing.T, e *env) *traffic {
	t.Helper()
	tr := &traffic{}
	sub, err := e.nc.Subscribe(">", func(m *nats.Msg) {
		tr.mu.Lock()
		tr.msgs = append(tr.msgs, m)
		tr.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return tr
}

// lookups counts the reads of a call's stored result (docs/protocol.md
// §6, "Answered already?"), leader message gets and direct gets alike: the
// client's (on e.nc, replying to its inbox) before it published the call,
// and the host's before it published the result. A connection's messages
// reach the subscriber in the order the connection sent them.
func (tr *traffic) lookups(t *testing.T, e *env, turn, id string) (client, host int) {
	t.Helper()
	inbox := e.nc.NewRespInbox()
	mine := inbox[:strings.LastIndexByte(inbox, '.')+1]
	direct := "$JS.API.DIRECT.GET." + events.StreamToolResults + ".llmw.tool.result." + turn + "." + id
	leader := "$JS.API.STREAM.MSG.GET." + events.StreamToolResults
	body := `{"last_by_subj":"llmw.tool.result.` + turn + "." + id + `"}`
	isGet := func(m *nats.Msg) bool {
		return m.Subject == direct || m.Subject == leader && string(m.Data) == body
	}
	natstest.Eventually(t, "the result of "+id+" routed", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		published, answered := false, false
		client, host = 0, 0
		for _, m := range tr.msgs {
			switch {
			case isGet(m) && strings.HasPrefix(m.Reply, mine):
				if !published {
					client++
				}
			case isGet(m):
				if !answered {
					host++
				}
			case strings.HasPrefix(m.Subject, "llmw.tool.call."):
				published = true
			case m.Subject == "llmw.tool.result."+turn+"."+id:
				answered = true
			}
		}
		return answered
	})
	return client, host
}

// A call the model asked for in this run (tool.CallInfo.First) has no
// stored result to look for: neither the turn's client before it
// publishes nor the host before it runs the first delivery asks for
// one. A call continued from a checkpoint is looked up by both.
func TestFirstPublishedCallIsNotLookedUp(t *testing.T) {
	e := start(t)
	var calls atomic.Int32
	replica(t, e.url, toolexec.Config{}, echo(&calls))
	rt := remote(t, e, "echo")
	for _, c := range []struct {
		id         string
		first      bool
		wantLookup int
	}{{"c1", true, 0}, {"c2", false, 1}} {
		tr := watch(t, e)
		callCtx := tool.WithCall(ctx(t), tool.CallInfo{TurnID: "t1", SessionID: "s1", CallID: c.id, First: c.first})
		if out, err := rt.Execute(callCtx, json.RawMessage(`{"text":"ran"}`)); err != nil || out != "ran" {
			t.Fatalf("%s: Execute = %q, %v", c.id, out, err)
		}
		if client, host := tr.lookups(t, e, "t1", c.id); client != c.wantLookup || host != c.wantLookup {
			t.Errorf("%s (first %v): looked up %d times by the client before it published, %d by the host before it answered; want %d and %d",
				c.id, c.first, client, host, c.wantLookup, c.wantLookup)
		}
	}
	if calls.Load() != 2 {
		t.Errorf("tool ran %d times, want 2", calls.Load())
	}
}

// A call published for the first time whose host stored its result and
// died before acknowledging it comes back (a second delivery): the next
// host looks the result up and acknowledges the call without running it.
func TestFirstPublishedCallRedeliveredAfterItsResultIsNotRunAgain(t *testing.T) {
	e := start(t)
	stored, die := make(chan struct{}), make(chan struct{})
	var ranOnB atomic.Int32
	storeAndHang := tool.Must("once", "Stores its result, then hangs.", func(c context.Context, _ struct{}) (string, error) {
		ci, _ := tool.CallFrom(c)
		env, _ := events.NewEnvelope("/test", events.TypeToolResult, events.ToolCallResult{CallID: "c1", TurnID: "t1", Name: "once", Content: "stored by a"})
		env.Subject, env.TurnID = "t1", "t1"
		m := &nats.Msg{Subject: "llmw.tool.result.t1.c1", Header: nats.Header(env.BinaryHeader()), Data: env.Data}
		if _, err := e.js.PublishMsg(c, m, jetstream.WithMsgID(events.ToolMsgID(ci.TurnID, ci.CallID))); err != nil {
			t.Error(err)
		}
		close(stored)
		<-die
		return "", errors.New("a is gone")
	})
	cfg := toolexec.Config{Instance: "a", Concurrency: 1, AckWait: 500 * time.Millisecond}
	_, ncA := replica(t, e.url, cfg, storeAndHang)
	rt := remote(t, e, "once")
	done := make(chan string, 1)
	go func() {
		out, err := rt.Execute(tool.WithCall(ctx(t), tool.CallInfo{TurnID: "t1", SessionID: "s1", CallID: "c1", First: true}), nil)
		if err != nil {
			out = err.Error()
		}
		done <- out
	}()
	<-stored
	cfg.Instance = "b"
	replica(t, e.url, cfg, tool.Must("once", "Counts.", func(context.Context, struct{}) (string, error) {
		ranOnB.Add(1)
		return "ran on b", nil
	}))
	ncA.Close()
	close(die)
	if out := <-done; out != "stored by a" {
		t.Fatalf("Execute = %q, want a's stored result", out)
	}
	cons, err := e.js.Consumer(ctx(t), events.StreamToolCalls, "tool_once")
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the call redelivered to b and acknowledged", func() bool {
		info, err := cons.Info(ctx(t))
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.Delivered.Consumer >= 2
	})
	if n := ranOnB.Load(); n != 0 {
		t.Errorf("b ran the call %d times; its result was stored, want 0", n)
	}
}

// A replica of LLMW_TOOLRESULTS that is behind (a node back from a
// partition) answers some direct gets without the results the leader
// stored since. A call asked for again after its result was stored — by
// a turn continued on another turn replica, or its message published
// again after the duplicate window and delivered to another toolexec
// replica — is looked up on the leader: the stored result comes at once
// (not at a Recheck) and the tool does not run a second time.
func TestLaggingReplicaDoesNotRunACallAgain(t *testing.T) {
	e := start(t)
	var runs atomic.Int32
	count := tool.Must("count", "Counts its runs.", func(context.Context, struct{}) (string, error) {
		return fmt.Sprintf("run %d", runs.Add(1)), nil
	})
	a, _ := replica(t, e.url, toolexec.Config{Instance: "a"}, count)
	rt := remote(t, e, "count")
	if _, err := rt.Execute(tool.WithCall(ctx(t), tool.CallInfo{TurnID: "t0", CallID: "c0", First: true}), nil); err != nil {
		t.Fatal(err)
	}
	natstest.LaggingReplica(t, e.js, events.StreamToolResults)
	first, err := rt.Execute(tool.WithCall(ctx(t), tool.CallInfo{TurnID: "t1", CallID: "c1", First: true}), nil)
	if err != nil || first != "run 2" {
		t.Fatalf("first call = %q, %v; want run 2", first, err)
	}
	st, err := e.js.Stream(ctx(t), events.StreamToolResults)
	if err != nil {
		t.Fatal(err)
	}
	missing := 0
	for range 40 {
		if _, err := st.GetLastMsgForSubject(ctx(t), "llmw.tool.result.t1.c1"); errors.Is(err, jetstream.ErrMsgNotFound) {
			missing++
		}
	}
	if missing == 0 {
		t.Fatal("the lagging replica answered none of 40 direct gets: the test would prove nothing")
	}
	// Replica b has not seen the call (a remembers the calls it answered).
	if err := a.Stop(ctx(t)); err != nil {
		t.Fatal(err)
	}
	replica(t, e.url, toolexec.Config{Instance: "b"}, count)

	cat, err := toolexec.OpenCatalog(ctx(t), e.js)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := cat.Get(ctx(t), "count")
	if err != nil {
		t.Fatal(err)
	}
	again := toolexec.NewClient(e.nc, e.js, toolexec.ClientOptions{Recheck: -1}).Tool(entry)
	for i := range 5 {
		c, cancel := context.WithTimeout(ctx(t), 3*time.Second)
		out, err := again.Execute(tool.WithCall(c, tool.CallInfo{TurnID: "t1", CallID: "c1"}), nil)
		cancel()
		if err != nil || out != first {
			t.Fatalf("the call asked for again (%d) = %q, %v; want the stored %q", i, out, err, first)
		}
	}
	req, _ := events.NewEnvelope("/test", events.TypeToolCall, events.ToolCallRequest{CallID: "c1", TurnID: "t1", Name: "count", Input: json.RawMessage(`{}`)})
	for i := range 5 {
		m := &nats.Msg{Subject: "llmw.tool.call.count", Header: nats.Header(req.BinaryHeader()), Data: req.Data}
		if _, err := e.js.PublishMsg(ctx(t), m, jetstream.WithMsgID(fmt.Sprintf("again-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := e.js.Consumer(ctx(t), events.StreamToolCalls, "tool_count")
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the calls published again consumed", func() bool {
		info, err := cons.Info(ctx(t))
		return err == nil && info.Delivered.Stream >= 7 && info.NumAckPending == 0 && info.NumPending == 0
	})
	if n := runs.Load(); n != 2 {
		t.Errorf("the tool ran %d times, want 2 (once per call)", n)
	}
}

// LLMW_TOOLRESULTS republishes each result once it stored it (on
// P.tool.stored.…), so the turn waiting for a call takes the result as it
// arrives, without reading it back. A stream that does not republish (made
// by hand, or by a version before) still works: the client takes the
// result as the host published it and reads the stored one back.
func TestStoredResultIsNotReadBack(t *testing.T) {
	e := start(t)
	replica(t, e.url, toolexec.Config{}, echo(nil))
	for _, c := range []struct {
		name      string
		republish bool
	}{{"republished", true}, {"not republished", false}} {
		t.Run(c.name, func(t *testing.T) {
			if !c.republish {
				setRepublish(t, e, nil)
			}
			// A new client: one reads the stream's configuration once.
			e := &env{url: e.url, nc: e.nc, js: e.js, tc: toolexec.NewClient(e.nc, e.js, toolexec.ClientOptions{})}
			rt := remote(t, e, "echo")
			id := "c-" + strings.ReplaceAll(c.name, " ", "-")
			tr := watch(t, e)
			callCtx := tool.WithCall(ctx(t), tool.CallInfo{TurnID: "t1", SessionID: "s1", CallID: id, First: true})
			if out, err := rt.Execute(callCtx, json.RawMessage(`{"text":"ran"}`)); err != nil || out != "ran" {
				t.Fatalf("Execute = %q, %v", out, err)
			}
			if n := tr.readBacks(t, e, "t1", id); n != 0 && c.republish || n == 0 && !c.republish {
				t.Fatalf("the client read the result back %d times after it published the call; want none where the stream republishes, at least one where it does not", n)
			}
		})
	}
}

// setRepublish sets LLMW_TOOLRESULTS' republish (nil: none).
func setRepublish(t *testing.T, e *env, rp *jetstream.RePublish) {
	t.Helper()
	st, err := e.js.Stream(ctx(t), events.StreamToolResults)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.RePublish = rp
	if _, err := e.js.UpdateStream(ctx(t), cfg); err != nil {
		t.Fatal(err)
	}
}

// readBacks counts the client's reads of a call's stored result (on e.nc,
// replying to its inbox) after it published the call.
func (tr *traffic) readBacks(t *testing.T, e *env, turn, id string) int {
	t.Helper()
	// The watcher sees e.nc's messages in the order it sent them: once it
	// has a marker sent now, it has every read before.
	marker := "test.marker." + id
	if err := e.nc.Publish(marker, nil); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the marker watched", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return slices.ContainsFunc(tr.msgs, func(m *nats.Msg) bool { return m.Subject == marker })
	})
	inbox := e.nc.NewRespInbox()
	mine := inbox[:strings.LastIndexByte(inbox, '.')+1]
	direct := "$JS.API.DIRECT.GET." + events.StreamToolResults + ".llmw.tool.result." + turn + "." + id
	leader := "$JS.API.STREAM.MSG.GET." + events.StreamToolResults
	body := `{"last_by_subj":"llmw.tool.result.` + turn + "." + id + `"}`
	tr.mu.Lock()
	defer tr.mu.Unlock()
	published, n := false, 0
	for _, m := range tr.msgs {
		switch {
		case strings.HasPrefix(m.Subject, "llmw.tool.call."):
			published = true
		case published && strings.HasPrefix(m.Reply, mine) && (m.Subject == direct || m.Subject == leader && string(m.Data) == body):
			n++
		}
	}
	return n
}
