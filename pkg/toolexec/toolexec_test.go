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
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/fence"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, natstest.NotOurGoroutines()...)
}

type env struct {
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
	tc  *toolexec.Client
}

func start(t testing.TB) *env {
	t.Helper()
	s := natstest.Start(t, natstest.Options{Provision: true, FileStorage: true})
	return &env{url: s.URL(), nc: s.NC, js: s.JS, tc: toolexec.NewClient(s.NC, s.JS, toolexec.ClientOptions{})}
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
	return tool.WithCall(c, tool.CallInfo{TurnID: turn, SessionID: "s1", CallID: id})
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
	natstest.Eventually(t, "a result of "+subj+" stored", func() bool { return count() > 0 })
	return count()
}

func remote(t testing.TB, e *env, name string) *toolexec.RemoteTool {
	t.Helper()
	cat, err := toolexec.OpenCatalog(ctx(t), e.js)
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
	res, err := toolexec.DecodeResult(r.Header, r.Data)
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
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	t.Cleanup(func() {
		otel.SetMeterProvider(prev)
		_ = mp.Shutdown(context.Background())
	})
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
	// The metrics an operator alerts on: one redelivery of a block call,
	// and the queue wait of its first delivery only.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	redeliveries, waits := int64(-1), uint64(0)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if m.Name == telemetry.MetricRedeliveries {
					for _, p := range d.DataPoints {
						msg, _ := p.Attributes.Value("llmw.message")
						tl, _ := p.Attributes.Value(telemetry.GenAIToolName)
						if msg.AsString() == "tool_call" && tl.AsString() == "block" {
							redeliveries = p.Value
						}
					}
				}
			case metricdata.Histogram[float64]:
				if m.Name == telemetry.MetricQueueWait {
					for _, p := range d.DataPoints {
						if tl, _ := p.Attributes.Value(telemetry.GenAIToolName); tl.AsString() == "block" {
							waits = p.Count
						}
					}
				}
			}
		}
	}
	if redeliveries != 1 || waits != 1 {
		t.Errorf("llmw.redeliveries of block calls %d, queue waits recorded %d; want 1 and 1", redeliveries, waits)
	}
	if n := resultCount(t, e.js, "t1", "c1"); n != 1 {
		t.Errorf("%d results, want exactly 1", n)
	}
}

// A second message of a call that arrives while the first one still runs
// on the same replica (published again after the duplicate window) is
// answered from the first one's result once it is stored: not run again,
// and not left unacknowledged until AckWait (60 s here) redelivers it.
func TestDuplicateWhileRunningIsAnswered(t *testing.T) {
	e := start(t)
	b := newBlocker()
	replica(t, e.url, toolexec.Config{Instance: "a", Concurrency: 4, AckWait: time.Minute}, b.tool("a"))
	rt := remote(t, e, "block")
	done := make(chan error, 1)
	go func() {
		_, err := rt.Execute(call(ctx(t), "t1", "c1"), nil)
		done <- err
	}()
	<-b.started
	req, _ := events.NewEnvelope("/test", events.TypeToolCall, events.ToolCallRequest{CallID: "c1", TurnID: "t1", Name: "block"})
	if _, err := e.js.PublishMsg(ctx(t), &nats.Msg{Subject: "llmw.tool.call.block", Header: nats.Header(req.BinaryHeader()), Data: req.Data}, jetstream.WithMsgID("again")); err != nil {
		t.Fatal(err)
	}
	cons, err := e.js.Consumer(ctx(t), events.StreamToolCalls, "tool_block")
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the second message delivered", func() bool {
		info, err := cons.Info(ctx(t))
		return err == nil && info.Delivered.Stream == 2
	})
	close(b.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "both messages acknowledged", func() bool {
		info, err := cons.Info(ctx(t))
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
	if n := b.ran.Load(); n != 1 {
		t.Errorf("tool ran %d times, want 1", n)
	}
	if n := resultCount(t, e.js, "t1", "c1"); n != 1 {
		t.Errorf("%d results, want 1", n)
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
	natstest.Eventually(t, "duplicate consumed", func() bool {
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
			var re *toolexec.ResultError
			if !errors.As(err, &re) || !errors.Is(err, toolexec.ErrToolFailed) || !re.Result.IsError {
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
	if !errors.Is(err, toolexec.ErrToolDeadline) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	// Without a context deadline the tool's timeout bounds the wait.
	tc := toolexec.NewClient(e.nc, e.js, toolexec.ClientOptions{ResultGrace: 100 * time.Millisecond})
	_, err = tc.Tool(rt.Entry()).Execute(call(context.Background(), "t1", "c2"), nil)
	if !errors.Is(err, toolexec.ErrToolDeadline) || !strings.Contains(err.Error(), "nobody_hosts_this") {
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
	natstest.Eventually(t, "cancelled result", func() bool { return resultCount(t, e.js, "t1", "c1") == 1 })
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
	natstest.Eventually(t, "error result", func() bool { return resultCount(t, e.js, "t1", "c1") == 1 })
	r, _, _ := e.tc.StoredResult(ctx(t), "t1", "c1")
	if !r.IsError || !strings.Contains(r.Content, "could not be decoded") {
		t.Errorf("result %+v", r)
	}
	cons, _ := e.js.Consumer(ctx(t), events.StreamToolCalls, "tool_echo")
	natstest.Eventually(t, "both terminated", func() bool {
		info, err := cons.Info(ctx(t))
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.NumRedelivered == 0
	})
}

func TestRegisterAndLifecycleErrors(t *testing.T) {
	e := start(t)
	if _, err := toolexec.New(e.nc, toolexec.Config{CatalogTTL: 500 * time.Millisecond}); !errors.Is(err, toolexec.ErrInvalidConfig) || !strings.Contains(err.Error(), "CatalogTTL") {
		t.Errorf("New with a CatalogTTL under a second = %v, want ErrInvalidConfig naming CatalogTTL", err)
	}
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
		ci, _ := tool.CallFrom(c)
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
		e.tc.Cancel("t1", id)
		if err := e.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		_, err := rt.Execute(call(ctx(t), "t1", id), nil)
		var re *toolexec.ResultError
		if errors.As(err, &re) && strings.Contains(re.Result.Content, "cancelled") {
			mu.Lock()
			ranCancelled := ran[id]
			mu.Unlock()
			if ranCancelled {
				t.Fatalf("call %s ran although it was cancelled", id)
			}
			// The cancel was of turn t1's call: another turn's call with
			// the same id runs.
			if out, err := rt.Execute(call(ctx(t), "t2", id), nil); err != nil || out != "ran" {
				t.Fatalf("turn t2's call %s = %q, %v; want it run", id, out, err)
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
	// The stream comes back once the client was told it is not there: the
	// server's audit advisory of the message get it answered with an error.
	refused := make(chan struct{})
	var once sync.Once
	audit, err := e.nc.Subscribe("$JS.EVENT.ADVISORY.API", func(m *nats.Msg) {
		var a struct {
			Subject  string `json:"subject"`
			Response string `json:"response"`
		}
		if json.Unmarshal(m.Data, &a) == nil && a.Subject == "$JS.API.STREAM.MSG.GET."+events.StreamToolResults && strings.Contains(a.Response, `"error"`) {
			once.Do(func() { close(refused) })
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = audit.Unsubscribe() }()
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	back := make(chan error, 1)
	go func() {
		select {
		case <-refused:
		case <-time.After(10 * time.Second):
			back <- errors.New("no message get of " + events.StreamToolResults + " refused")
			return
		}
		back <- provision.Provision(context.Background(), e.js, provision.Options{})
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

// A turn that is not the caller's (its fence fails) publishes no
// call: the tool does not run, and the fence's error comes back.
func TestFencedCallNotPublished(t *testing.T) {
	e := start(t)
	var calls atomic.Int32
	replica(t, e.url, toolexec.Config{}, echo(&calls))
	rt := remote(t, e, "echo")
	lost := errors.New("another replica owns the turn")
	c := fence.With(call(ctx(t), "t1", "c1"), func(context.Context) error { return lost })
	if _, err := rt.Execute(c, json.RawMessage(`{"text":"x"}`)); !errors.Is(err, lost) {
		t.Fatalf("Execute = %v; want the fence's error", err)
	}
	st, err := e.js.Stream(ctx(t), events.StreamToolCalls)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx(t)); err != nil || info.State.Msgs != 0 || calls.Load() != 0 {
		t.Fatalf("%d calls stored, tool ran %d times (%v); want none", info.State.Msgs, calls.Load(), err)
	}
	// With a fence that holds, the call goes out.
	ok := fence.With(call(ctx(t), "t1", "c2"), func(context.Context) error { return nil })
	if _, err := rt.Execute(ok, json.RawMessage(`{"text":"x"}`)); err != nil || calls.Load() != 1 {
		t.Fatalf("Execute = %v, tool ran %d times", err, calls.Load())
	}
}

// Storing a result hangs (a results stream that does not answer, as
// without quorum) for as long as the replica tries (10 s), longer than
// AckWait: the call stays in progress while the replica tries, is given
// back when it gives up, runs again and is answered once the stream
// answers. Nothing accepted is lost — before, the redelivery that arrived
// while the result was being stored was acknowledged as a duplicate by
// another slot, and the call was gone.
func TestCallSurvivesHangingResultStore(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the 10 s result publish")
	}
	e := start(t)
	var calls atomic.Int32
	holes := make(chan *nats.Subscription, 1)
	// The first run takes the results stream away before it answers: a
	// subscriber takes the results and never answers, so the replica's
	// publish waits for an acknowledgement that never comes.
	tl := tool.Must("echo", "Echoes text.", func(_ context.Context, a EchoArgs) (string, error) {
		if calls.Add(1) == 1 {
			if err := e.js.DeleteStream(context.Background(), events.StreamToolResults); err != nil {
				return "", err
			}
			hole, err := e.nc.Subscribe("llmw.tool.result.>", func(*nats.Msg) {})
			if err != nil {
				return "", err
			}
			holes <- hole
		}
		return a.Text, nil
	}, tool.WithTimeout(5*time.Second))
	replica(t, e.url, toolexec.Config{Instance: "r1", AckWait: time.Second}, tl)
	rt := remote(t, e, "echo")
	back := make(chan error, 1)
	go func() {
		hole := <-holes
		// The store hangs longer than AckWait and ends before the
		// replica's 10 s of trying: the duration is the fault under test.
		time.Sleep(9 * time.Second)
		if err := hole.Unsubscribe(); err != nil {
			back <- err
			return
		}
		back <- provision.Provision(context.Background(), e.js, provision.Options{})
	}()
	c, cancel := context.WithTimeout(call(ctx(t), "t10", "c10"), 25*time.Second)
	defer cancel()
	out, err := rt.Execute(c, json.RawMessage(`{"text":"ok"}`))
	if perr := <-back; perr != nil {
		t.Fatal(perr)
	}
	if err != nil || out != "ok" {
		t.Fatalf("Execute = %q, %v (the tool ran %d times)", out, err, calls.Load())
	}
	if n := resultCount(t, e.js, "t10", "c10"); n != 1 {
		t.Fatalf("%d results", n)
	}
}

// Two turns' calls with the same call id (local OpenAI-compatible servers
// number calls call_0, call_1, … in every turn) run at once on one host;
// cancelling one turn cancels its call only, and the other turn gets its
// own result.
func TestCancelKeyedByTurn(t *testing.T) {
	e := start(t)
	started := make(chan string, 4) // turn id of each started call
	stopped := make(chan string, 4) // turn id of each call whose context ended
	release := make(chan struct{})
	work := tool.Must("work", "Works until released.", func(c context.Context, _ struct{}) (string, error) {
		ci, _ := tool.CallFrom(c)
		started <- ci.TurnID
		select {
		case <-release:
			return "done for " + ci.TurnID, nil
		case <-c.Done():
			stopped <- ci.TurnID
			return "", c.Err()
		}
	})
	replica(t, e.url, toolexec.Config{}, work)
	defer close(release)
	rt := remote(t, e, "work")

	type result struct {
		out string
		err error
	}
	ca, cancelA := context.WithCancel(ctx(t))
	defer cancelA()
	doneA, doneB := make(chan result, 1), make(chan result, 1)
	go func() {
		out, err := rt.Execute(call(ca, "ta", "call_1"), nil)
		doneA <- result{out, err}
	}()
	if got := <-started; got != "ta" {
		t.Fatalf("started %q, want ta", got)
	}
	go func() {
		out, err := rt.Execute(call(ctx(t), "tb", "call_1"), nil)
		doneB <- result{out, err}
	}()
	if got := <-started; got != "tb" {
		t.Fatalf("started %q, want tb", got)
	}

	cancelA()
	if r := <-doneA; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("turn ta: Execute = %q, %v; want context.Canceled", r.out, r.err)
	}
	select {
	case got := <-stopped:
		if got != "ta" {
			t.Fatalf("the cancel of turn ta's call_1 stopped turn %s's call_1", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancel of turn ta's call_1 did not reach its tool")
	}
	select {
	case r := <-doneB:
		t.Fatalf("turn tb's call ended before it was released: %q, %v", r.out, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	release <- struct{}{}
	if r := <-doneB; r.err != nil || r.out != "done for tb" {
		t.Fatalf("turn tb: Execute = %q, %v; want its own result", r.out, r.err)
	}
}
