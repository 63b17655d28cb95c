package toolexec_test

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
	"github.com/nats-io/nats.go/micro"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/natsutil"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natsrt"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
	tc  *natsrt.ToolClient
}

func start(t testing.TB) *env {
	t.Helper()
	e, err := natsutil.StartEmbedded(natsutil.EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	nc := connect(t, e.URL())
	js, _ := jetstream.New(nc)
	if err := natsrt.Provision(ctx(t), js, natsrt.ProvisionOptions{}); err != nil {
		t.Fatal(err)
	}
	return &env{url: e.URL(), nc: nc, js: js, tc: natsrt.NewToolClient(nc, js, natsrt.ToolClientOptions{})}
}

func connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// replica starts a toolexec on its own connection; Stop runs at cleanup.
func replica(t testing.TB, url string, cfg toolexec.Config, tools ...tool.Tool) (*toolexec.Server, *nats.Conn) {
	t.Helper()
	nc := connect(t, url)
	s, err := toolexec.New(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register(tools...); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Stop(c)
	})
	return s, nc
}

type EchoArgs struct {
	Text  string `json:"text" description:"what to echo"`
	Times int    `json:"times,omitempty" jsonschema:"minimum=1,maximum=5"`
}

func echo(calls *atomic.Int32) tool.Tool {
	return tool.Must("echo", "Echoes text.", func(_ context.Context, a EchoArgs) (string, error) {
		if calls != nil {
			calls.Add(1)
		}
		n := max(a.Times, 1)
		return strings.Repeat(a.Text, n), nil
	}, tool.WithVersion("3"), tool.WithTimeout(5*time.Second))
}

func call(c context.Context, turn, id string) context.Context {
	return natsrt.WithCall(c, natsrt.CallInfo{TurnID: turn, SessionID: "s1", CallID: id})
}

// resultCount is how many results LLMW_TOOLRESULTS holds for a call.
func resultCount(t testing.TB, js jetstream.JetStream, turn, id string) uint64 {
	t.Helper()
	st, err := js.Stream(ctx(t), events.StreamToolResults)
	if err != nil {
		t.Fatal(err)
	}
	subj := "llmw.tool.result." + turn + "." + id
	count := func() uint64 {
		info, err := st.Info(ctx(t), jetstream.WithSubjectFilter(subj))
		if err != nil {
			t.Fatal(err)
		}
		// State.Msgs counts the whole stream; the filter fills State.Subjects.
		return info.State.Subjects[subj]
	}
	// A subscriber can see the result a moment before the stream has
	// stored it: wait for the first one, then count.
	deadline := time.Now().Add(5 * time.Second)
	for count() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return count()
}

func remote(t testing.TB, e *env, name string) *natsrt.RemoteTool {
	t.Helper()
	cat, err := natsrt.OpenCatalog(ctx(t), e.js)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := cat.Get(ctx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return e.tc.Tool(entry)
}

func TestRoundTripCatalogAndDiscovery(t *testing.T) {
	e := start(t)
	var calls atomic.Int32
	replica(t, e.url, toolexec.Config{Instance: "r1"}, echo(&calls))

	rt := remote(t, e, "echo")
	if rt.Version() != "3" || rt.Timeout() != 5*time.Second || rt.Description() != "Echoes text." {
		t.Errorf("catalog entry %+v", rt.Entry())
	}
	var schema map[string]any
	if err := json.Unmarshal(rt.InputSchema(), &schema); err != nil || schema["type"] != "object" {
		t.Errorf("schema %s", rt.InputSchema())
	}
	out, err := rt.Execute(call(ctx(t), "t1", "c1"), json.RawMessage(`{"text":"ab","times":2}`))
	if err != nil || out != "abab" {
		t.Fatalf("Execute = %q, %v", out, err)
	}
	// Executing the same call again (a resumed turn) returns the stored
	// result without running the tool.
	out, err = rt.Execute(call(ctx(t), "t1", "c1"), json.RawMessage(`{"text":"ab","times":2}`))
	if err != nil || out != "abab" || calls.Load() != 1 {
		t.Fatalf("second Execute = %q, %v; tool ran %d times", out, err, calls.Load())
	}
	if n := resultCount(t, e.js, "t1", "c1"); n != 1 {
		t.Errorf("%d results stored, want 1", n)
	}
	st, err := e.js.Stream(ctx(t), events.StreamToolResults)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx(t), "llmw.tool.result.t1.c1")
	if err != nil {
		t.Fatal(err)
	}
	env, err := events.DecodeEnvelope(m.Header, m.Data)
	if err != nil || env.Type != "llmw.tool.result" || env.Source != "/llmw/toolexec/r1" || env.TurnID != "t1" || env.SessionID != "s1" || m.Header.Get("Nats-Msg-Id") != "t1.c1" {
		t.Errorf("stored result %+v %v, headers %v", env, err, m.Header)
	}

	// $SRV discovery lists the tool as an endpoint with its schema.
	reply, err := e.nc.Request("$SRV.INFO."+toolexec.ServiceName, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(reply.Data, &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Endpoints) != 1 || info.Endpoints[0].Name != "echo" || info.Endpoints[0].Metadata["input_schema"] == "" ||
		info.Endpoints[0].Metadata["call_subject"] != "llmw.tool.call.echo" || info.Endpoints[0].Metadata["timeout_ms"] != "5000" {
		t.Errorf("discovery %+v", info.Endpoints)
	}
	// The endpoint itself answers a direct call.
	req, _ := events.NewEnvelope("/test", events.TypeToolCall, events.ToolCallRequest{CallID: "d1", TurnID: "t9", Name: "echo", Input: json.RawMessage(`{"text":"z"}`)})
	r, err := e.nc.RequestMsg(&nats.Msg{Subject: toolexec.InvokeSubject("", "echo"), Header: nats.Header(req.BinaryHeader()), Data: req.Data}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	res, err := natsrt.DecodeToolResult(r.Header, r.Data)
	if err != nil || res.Content != "z" || res.IsError {
		t.Errorf("direct invoke = %+v, %v", res, err)
	}
}

// blocker is a tool whose calls block until released, reporting where
// they run.
type blocker struct {
	started chan string // replica instance of each started call
	release chan struct{}
	ran     atomic.Int32
}

func newBlocker() *blocker {
	return &blocker{started: make(chan string, 16), release: make(chan struct{})}
}

func (b *blocker) tool(instance string) tool.Tool {
	return tool.Must("block", "Blocks.", func(c context.Context, _ struct{}) (string, error) {
		b.ran.Add(1)
		b.started <- instance
		select {
		case <-b.release:
			return "done by " + instance, nil
		case <-c.Done():
			return "", c.Err()
		}
	})
}

func TestReplicasShareOneConsumer(t *testing.T) {
	e := start(t)
	b := newBlocker()
	replica(t, e.url, toolexec.Config{Instance: "a", Concurrency: 1}, b.tool("a"))
	replica(t, e.url, toolexec.Config{Instance: "b", Concurrency: 1}, b.tool("b"))

	st, err := e.js.Stream(ctx(t), events.StreamToolCalls)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range st.ConsumerNames(ctx(t)).Name() {
		names = append(names, n)
	}
	if len(names) != 1 || names[0] != "tool_block" {
		t.Fatalf("consumers %v, want the one durable tool_block", names)
	}
	rt := remote(t, e, "block")
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], _ = rt.Execute(call(ctx(t), "t1", fmt.Sprintf("c%d", i)), nil)
		}()
	}
	// Each replica runs one call at a time: two blocked calls must be on
	// the two replicas.
	got := map[string]bool{<-b.started: true, <-b.started: true}
	if !got["a"] || !got["b"] {
		t.Fatalf("calls ran on %v, want one on each replica", got)
	}
	close(b.release)
	wg.Wait()
	if outs[0] == "" || outs[1] == "" || outs[0] == outs[1] {
		t.Errorf("results %q", outs)
	}
}

func TestReplicaDiesMidCallRedelivered(t *testing.T) {
	e := start(t)
	b := newBlocker()
	cfg := toolexec.Config{Concurrency: 1, AckWait: 500 * time.Millisecond}
	cfg.Instance = "a"
	_, ncA := replica(t, e.url, cfg, b.tool("a"))

	rt := remote(t, e, "block")
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := rt.Execute(call(ctx(t), "t1", "c1"), nil)
		done <- result{out, err}
	}()
	if got := <-b.started; got != "a" {
		t.Fatalf("started on %q", got)
	}
	// Replica b comes up while a holds the call (in-progress acks keep it
	// there), then a dies without a word.
	cfg.Instance = "b"
	replica(t, e.url, cfg, b.tool("b"))
	ncA.Close()
	if got := <-b.started; got != "b" {
		t.Fatalf("redelivered to %q, want b", got)
	}
	close(b.release)
	r := <-done
	if r.err != nil || r.out != "done by b" {
		t.Fatalf("Execute = %q, %v", r.out, r.err)
	}
	if n := resultCount(t, e.js, "t1", "c1"); n != 1 {
		t.Errorf("%d results, want exactly 1", n)
	}
}

func TestDuplicateDeliveryOneResult(t *testing.T) {
	e := start(t)
	var calls atomic.Int32
	replica(t, e.url, toolexec.Config{}, echo(&calls))
	rt := remote(t, e, "echo")
	if _, err := rt.Execute(call(ctx(t), "t1", "c1"), json.RawMessage(`{"text":"x"}`)); err != nil {
		t.Fatal(err)
	}
	// The same call delivered again (published under another msg id, as
	// after the duplicate window): toolexec acks it without running.
	req, _ := events.NewEnvelope("/test", events.TypeToolCall, events.ToolCallRequest{CallID: "c1", TurnID: "t1", Name: "echo", Input: json.RawMessage(`{"text":"x"}`)})
	if _, err := e.js.PublishMsg(ctx(t), &nats.Msg{Subject: "llmw.tool.call.echo", Header: nats.Header(req.BinaryHeader()), Data: req.Data}, jetstream.WithMsgID("other")); err != nil {
		t.Fatal(err)
	}
	cons, err := e.js.Consumer(ctx(t), events.StreamToolCalls, "tool_echo")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "duplicate consumed", func() bool {
		info, err := cons.Info(ctx(t))
		return err == nil && info.Delivered.Stream == 2 && info.NumAckPending == 0 && info.NumPending == 0
	})
	if calls.Load() != 1 {
		t.Errorf("tool ran %d times, want 1", calls.Load())
	}
	if n := resultCount(t, e.js, "t1", "c1"); n != 1 {
		t.Errorf("%d results, want 1", n)
	}
}

func TestErrorResults(t *testing.T) {
	e := start(t)
	slow := tool.Must("slow", "Sleeps.", func(c context.Context, _ struct{}) (string, error) {
		<-c.Done()
		return "", c.Err()
	}, tool.WithTimeout(100*time.Millisecond))
	boom := tool.Must("boom", "Panics.", func(context.Context, struct{}) (string, error) { panic("kaboom") })
	raw := rawPanic{}
	replica(t, e.url, toolexec.Config{}, echo(nil), slow, boom, raw)

	for _, tc := range []struct {
		tool, input string
		want        []string
	}{
		{"echo", `{"times":2}`, []string{"echo", "text", "required"}},
		{"echo", `{"text":"a","times":9}`, []string{"times"}},
		{"slow", `{}`, []string{"slow", "timed out"}},
		{"boom", `{}`, []string{"boom", "kaboom"}},
		{"raw_panic", `{}`, []string{"raw_panic", "panic", "oops"}},
	} {
		t.Run(tc.tool+tc.input, func(t *testing.T) {
			rt := remote(t, e, tc.tool)
			id := fmt.Sprintf("c%d", time.Now().UnixNano())
			_, err := rt.Execute(call(ctx(t), "t1", id), json.RawMessage(tc.input))
			var re *natsrt.ResultError
			if !errors.As(err, &re) || !errors.Is(err, natsrt.ErrToolFailed) || !re.Result.IsError {
				t.Fatalf("err = %v, want an error result", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not mention %q", err, w)
				}
			}
		})
	}
}

// rawPanic is a hand-written Tool (no recovery of its own).
type rawPanic struct{}

func (rawPanic) Name() string                 { return "raw_panic" }
func (rawPanic) Description() string          { return "panics" }
func (rawPanic) InputSchema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (rawPanic) Execute(context.Context, json.RawMessage) (string, error) {
	panic("oops")
}

func TestInvalidJSONInput(t *testing.T) {
	e := start(t)
	rt := e.tc.Tool(events.ToolCatalogEntry{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)})
	_, err := rt.Execute(call(ctx(t), "t1", "c1"), json.RawMessage(`not json`))
	if !errors.Is(err, tool.ErrInvalidArgument) || !strings.Contains(err.Error(), "JSON") {
		t.Fatalf("err = %v, want an invalid-argument error about JSON", err)
	}
}

func TestUnknownToolBoundedByDeadline(t *testing.T) {
	e := start(t)
	rt := e.tc.Tool(events.ToolCatalogEntry{Name: "nobody_hosts_this", InputSchema: json.RawMessage(`{"type":"object"}`), TimeoutMS: 200})
	c, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := rt.Execute(call(c, "t1", "c1"), nil)
	if !errors.Is(err, natsrt.ErrToolDeadline) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	// Without a context deadline the tool's timeout bounds the wait.
	tc := natsrt.NewToolClient(e.nc, e.js, natsrt.ToolClientOptions{ResultGrace: 100 * time.Millisecond})
	_, err = tc.Tool(rt.Entry()).Execute(call(context.Background(), "t1", "c2"), nil)
	if !errors.Is(err, natsrt.ErrToolDeadline) || !strings.Contains(err.Error(), "nobody_hosts_this") {
		t.Fatalf("err = %v, want ErrToolDeadline naming the tool", err)
	}
}

func TestCancel(t *testing.T) {
	e := start(t)
	stopped := make(chan error, 1)
	started := make(chan struct{}, 1)
	wait := tool.Must("wait", "Waits.", func(c context.Context, _ struct{}) (string, error) {
		started <- struct{}{}
		<-c.Done()
		stopped <- c.Err()
		return "", c.Err()
	})
	replica(t, e.url, toolexec.Config{}, wait)
	rt := remote(t, e, "wait")
	c, cancel := context.WithCancel(ctx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := rt.Execute(call(c, "t1", "c1"), nil)
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute err = %v, want context.Canceled", err)
	}
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Fatalf("tool saw %v, want its context cancelled", err)
	}
	// The call still gets a definitive result, saying it was cancelled.
	eventually(t, "cancelled result", func() bool { return resultCount(t, e.js, "t1", "c1") == 1 })
	r, ok, err := e.tc.StoredResult(ctx(t), "t1", "c1")
	if err != nil || !ok || !r.IsError || !strings.Contains(r.Content, "cancelled") {
		t.Errorf("stored %+v %v %v", r, ok, err)
	}
}

func TestUndecodableCallTerminated(t *testing.T) {
	e := start(t)
	replica(t, e.url, toolexec.Config{}, echo(nil))
	// Valid ids, wrong CloudEvent type: an error result, then Term.
	bad, _ := events.NewEnvelope("/test", "llmw.something.else", map[string]string{"call_id": "c1", "turn_id": "t1"})
	if _, err := e.js.PublishMsg(ctx(t), &nats.Msg{Subject: "llmw.tool.call.echo", Header: nats.Header(bad.BinaryHeader()), Data: bad.Data}); err != nil {
		t.Fatal(err)
	}
	// No ids at all: just Term.
	if _, err := e.js.Publish(ctx(t), "llmw.tool.call.echo", []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "error result", func() bool { return resultCount(t, e.js, "t1", "c1") == 1 })
	r, _, _ := e.tc.StoredResult(ctx(t), "t1", "c1")
	if !r.IsError || !strings.Contains(r.Content, "could not be decoded") {
		t.Errorf("result %+v", r)
	}
	cons, _ := e.js.Consumer(ctx(t), events.StreamToolCalls, "tool_echo")
	eventually(t, "both terminated", func() bool {
		info, err := cons.Info(ctx(t))
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.NumRedelivered == 0
	})
}

func TestRegisterAndLifecycleErrors(t *testing.T) {
	e := start(t)
	s, err := toolexec.New(e.nc, toolexec.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx(t)); !errors.Is(err, toolexec.ErrNoTools) {
		t.Errorf("Start without tools = %v", err)
	}
	if err := s.Register(echo(nil), echo(nil)); !errors.Is(err, toolexec.ErrInvalidTool) {
		t.Errorf("duplicate = %v", err)
	}
	if err := s.Stop(ctx(t)); !errors.Is(err, toolexec.ErrNotStarted) {
		t.Errorf("Stop before Start = %v", err)
	}
	if err := s.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(rawPanic{}); !errors.Is(err, toolexec.ErrStarted) {
		t.Errorf("Register after Start = %v", err)
	}
	if err := s.Stop(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestStopDrainsRunningCall(t *testing.T) {
	e := start(t)
	b := newBlocker()
	s, _ := replica(t, e.url, toolexec.Config{Instance: "a"}, b.tool("a"))
	rt := remote(t, e, "block")
	done := make(chan string, 1)
	go func() {
		out, _ := rt.Execute(call(ctx(t), "t1", "c1"), nil)
		done <- out
	}()
	<-b.started
	stopErr := make(chan error, 1)
	go func() { stopErr <- s.Stop(ctx(t)) }()
	close(b.release)
	if err := <-stopErr; err != nil {
		t.Fatal(err)
	}
	if out := <-done; out != "done by a" {
		t.Errorf("result %q", out)
	}
}

func TestCancelBeforeDelivery(t *testing.T) {
	e := start(t)
	var mu sync.Mutex
	ran := map[string]bool{}
	rec := tool.Must("rec", "Records its call.", func(c context.Context, _ struct{}) (string, error) {
		ci, _ := natsrt.CallFrom(c)
		mu.Lock()
		ran[ci.CallID] = true
		mu.Unlock()
		return "ran", nil
	})
	_, rnc := replica(t, e.url, toolexec.Config{}, rec)
	if err := rnc.Flush(); err != nil { // the replica's cancel subscription is in place
		t.Fatal(err)
	}
	rt := remote(t, e, "rec")
	// A cancel that overtakes its call: the replica remembers it and
	// answers the call as cancelled without running the tool. (The cancel
	// and the call reach the replica on different goroutines, so retry
	// with a fresh call id in the unlikely case the call won.)
	for i := 0; ; i++ {
		id := fmt.Sprintf("c%d", i)
		e.tc.Cancel(id)
		if err := e.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		_, err := rt.Execute(call(ctx(t), "t1", id), nil)
		var re *natsrt.ResultError
		if errors.As(err, &re) && strings.Contains(re.Result.Content, "cancelled") {
			mu.Lock()
			defer mu.Unlock()
			if ran[id] {
				t.Fatalf("call %s ran although it was cancelled", id)
			}
			return
		}
		if i == 20 {
			t.Fatalf("early cancel never honoured; last err %v", err)
		}
	}
}

// Two turns whose model reused a call id (local OpenAI-compatible servers
// number calls call_0, call_1, …) each get their own result: JetStream
// de-duplicates by turn and call id together.
func TestSameCallIDInTwoTurns(t *testing.T) {
	e := start(t)
	var calls atomic.Int32
	replica(t, e.url, toolexec.Config{Instance: "r1"}, echo(&calls))
	rt := remote(t, e, "echo")
	for _, turn := range []string{"ta", "tb"} {
		out, err := rt.Execute(call(ctx(t), turn, "call_0"), json.RawMessage(`{"text":"`+turn+`"}`))
		if err != nil || out != turn {
			t.Fatalf("turn %s: %q, %v", turn, out, err)
		}
		if n := resultCount(t, e.js, turn, "call_0"); n != 1 {
			t.Fatalf("turn %s: %d results", turn, n)
		}
	}
	if calls.Load() != 2 {
		t.Fatalf("tool ran %d times, want 2", calls.Load())
	}
}

// LLMW_TOOLRESULTS unavailable for a moment (a stream electing a new leader
// after a node loss looks the same to a client): the call waits it out and
// the model gets the tool's result, not an error about the plumbing.
func TestResultsStreamBrieflyUnavailable(t *testing.T) {
	e := start(t)
	var calls atomic.Int32
	replica(t, e.url, toolexec.Config{Instance: "r1", AckWait: time.Second}, echo(&calls))
	rt := remote(t, e, "echo")
	if err := e.js.DeleteStream(ctx(t), events.StreamToolResults); err != nil {
		t.Fatal(err)
	}
	back := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		back <- natsrt.Provision(context.Background(), e.js, natsrt.ProvisionOptions{})
	}()
	out, err := rt.Execute(call(ctx(t), "t9", "c9"), json.RawMessage(`{"text":"ok"}`))
	if perr := <-back; perr != nil {
		t.Fatal(perr)
	}
	if err != nil || out != "ok" {
		t.Fatalf("Execute = %q, %v", out, err)
	}
	if n := resultCount(t, e.js, "t9", "c9"); n != 1 {
		t.Fatalf("%d results", n)
	}
}
