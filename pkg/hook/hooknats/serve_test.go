package hooknats_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/hook/hooktest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/provision"
)

var provisionMemory = provision.Options{Memory: true}

func call(id, name, input string) events.ToolCall {
	return events.ToolCall{ID: id, Name: name, Input: json.RawMessage(input)}
}

// appendField returns a handler that appends its letter to the "trail"
// field of the call's input.
func appendField(letter string) hooknats.HandlerFunc {
	return func(_ context.Context, req *events.HookRequest) (*events.HookResponse, error) {
		var in map[string]string
		_ = json.Unmarshal(req.ToolCall.Input, &in)
		in["trail"] += letter
		c := *req.ToolCall
		c.Input, _ = json.Marshal(in)
		return &events.HookResponse{ToolCall: &c}, nil
	}
}

// The hooks of a bridge are registered in the order they were added and
// run in that order, each seeing the previous one's rewrite.
func TestBridgeRegistersInOrder(t *testing.T) {
	e := start(t)
	var hooks []hooknats.Hook
	for _, n := range []string{"z", "a", "m"} { // names not in alphabetical order
		hooks = append(hooks, hooknats.Hook{
			Registration: events.HookRegistration{Name: n, Event: events.HookBeforeToolCall},
			Handler:      appendField(n),
		})
	}
	b := e.server(t, hooks...)
	if got := b.Hooks()[0].Registration.Subject; got != "llmw.hook.z" {
		t.Errorf("default subject %q, want llmw.hook.z", got)
	}
	c, _ := e.chain(t)
	in := &hook.ToolCallInput{Turn: &hook.Turn{ID: "t1"}, Call: call("c1", "x", `{"trail":""}`)}
	if out := c.RunBeforeToolCall(ctx(t), in); out.Stopped() {
		t.Fatalf("outcome %+v", out)
	}
	if string(in.Call.Input) != `{"trail":"zam"}` {
		t.Errorf("input %s, want trail zam", in.Call.Input)
	}

	// A restarted bridge with the same hooks writes nothing: order kept.
	kv, _ := hooknats.Bucket(ctx(t), e.js)
	before, _ := hooknats.List(ctx(t), kv)
	b2, err := hooknats.NewServer(e.nc, hooknats.ServerConfig{Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	if err := b2.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := b2.Stop(ctx(t)); err != nil {
		t.Fatal(err)
	}
	after, _ := hooknats.List(ctx(t), kv)
	if !slices.Equal(before, after) {
		t.Errorf("registry changed by an identical restart:\n%v\n%v", before, after)
	}
}

// Handler errors, panics and responses not valid for the event are error
// replies: hook failures under the hook's policy. nil continues.
func TestBridgeHandlerFailures(t *testing.T) {
	e := start(t)
	e.server(t,
		hooknats.Hook{Registration: events.HookRegistration{Name: "panics", Event: events.HookAfterToolCall},
			Handler: hooknats.HandlerFunc(func(context.Context, *events.HookRequest) (*events.HookResponse, error) { panic("boom") })},
		hooknats.Hook{Registration: events.HookRegistration{Name: "errors", Event: events.HookOnMessageSend},
			Handler: hooknats.HandlerFunc(func(context.Context, *events.HookRequest) (*events.HookResponse, error) {
				return nil, errors.New("database down")
			})},
		hooknats.Hook{Registration: events.HookRegistration{Name: "wrong-result", Event: events.HookOnTurnEnd},
			Handler: hooknats.HandlerFunc(func(context.Context, *events.HookRequest) (*events.HookResponse, error) {
				return hooknats.Respond(events.HookSkip, ""), nil
			})},
		hooknats.Hook{Registration: events.HookRegistration{Name: "nil", Event: events.HookBeforeToolCall},
			Handler: hooknats.HandlerFunc(func(context.Context, *events.HookRequest) (*events.HookResponse, error) { return nil, nil })},
	)
	c, _ := e.chain(t)
	tn := &hook.Turn{ID: "t1"}
	if out := c.RunAfterToolCall(ctx(t), &hook.ToolResultInput{Turn: tn, Call: call("c1", "x", `{}`), Result: events.ToolResult{ToolUseID: "c1"}}); !out.Failed || !errors.Is(out.Err, hooknats.ErrResponder) {
		t.Errorf("panic: %+v", out)
	}
	if out := c.RunMessageSend(ctx(t), &hook.MessageSendInput{Turn: tn}); !out.Failed || out.Result.Action != hook.MessageSendCancel {
		t.Errorf("error: %+v", out)
	}
	if out := c.RunTurnEnd(ctx(t), &hook.TurnEndInput{Turn: tn}); !out.Failed || out.Kind != events.HookAbort {
		t.Errorf("invalid result: %+v", out)
	}
	if out := c.RunBeforeToolCall(ctx(t), &hook.ToolCallInput{Turn: tn, Call: call("c1", "x", `{}`)}); out.Stopped() {
		t.Errorf("nil response: %+v", out)
	}
}

// Stop lets a request in flight finish and answer, then stops serving.
func TestBridgeStopDrains(t *testing.T) {
	e := start(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	b, err := hooknats.NewServer(e.nc, hooknats.ServerConfig{Provision: provisionMemory, Hooks: []hooknats.Hook{{
		Registration: events.HookRegistration{Name: "slow", Event: events.HookBeforeToolCall},
		Handler: hooknats.HandlerFunc(func(context.Context, *events.HookRequest) (*events.HookResponse, error) {
			close(entered)
			<-release
			return hooknats.Respond(events.HookSkip, "drained"), nil
		}),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	c, _ := e.chain(t)
	outc := make(chan hook.Outcome[hook.BeforeToolCallResult], 1)
	go func() {
		outc <- c.RunBeforeToolCall(ctx(t), &hook.ToolCallInput{Turn: &hook.Turn{ID: "t"}, Call: call("c1", "x", `{}`)})
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- b.Stop(ctx(t)) }()
	close(release)
	if out := <-outc; out.Result.Action != hook.ToolSkip || out.Result.Reason != "drained" {
		t.Errorf("in-flight request: %+v", out)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	// Registered still, but nobody serves it now: a failure.
	out := c.RunBeforeToolCall(ctx(t), &hook.ToolCallInput{Turn: &hook.Turn{ID: "t"}, Call: call("c2", "x", `{}`)})
	if !out.Failed || !errors.Is(out.Err, hooknats.ErrNoResponders) {
		t.Errorf("after Stop: %+v", out)
	}
}

// Handle after Start serves and registers at once; invalid hooks are
// refused.
func TestBridgeHandleAfterStart(t *testing.T) {
	e := start(t)
	b := e.server(t)
	c, w := e.chain(t)
	var n atomic.Int32
	if err := b.HandleFunc(ctx(t), events.HookRegistration{Name: "late", Event: events.HookOnAbort},
		func(context.Context, *events.HookRequest) (*events.HookResponse, error) { n.Add(1); return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	c.RunAbort(ctx(t), &hook.AbortInput{Turn: &hook.Turn{ID: "t"}, Reason: "x"})
	if n.Load() != 1 {
		t.Errorf("late hook called %d times", n.Load())
	}
	if err := b.HandleFunc(ctx(t), events.HookRegistration{Name: "late", Event: events.HookOnAbort}, nil); !errors.Is(err, hooknats.ErrInvalidHook) {
		t.Errorf("nil handler: %v", err)
	}
	if err := b.Handle(ctx(t), events.HookRegistration{Name: "bad.name", Event: events.HookOnAbort}, hooknats.HandlerFunc(nil)); !errors.Is(err, hooknats.ErrInvalidHook) {
		t.Errorf("bad name: %v", err)
	}
}

// Replicas share requests through the queue group: one request, one
// answer.
func TestBridgeReplicasShareRequests(t *testing.T) {
	e := start(t)
	var calls atomic.Int32
	h := hooknats.Hook{Registration: events.HookRegistration{Name: "shared", Event: events.HookOnMessageSend},
		Handler: hooknats.HandlerFunc(func(context.Context, *events.HookRequest) (*events.HookResponse, error) {
			calls.Add(1)
			return nil, nil
		})}
	e.server(t, h)
	e.server(t, h)
	c, _ := e.chain(t)
	for range 10 {
		c.RunMessageSend(ctx(t), &hook.MessageSendInput{Turn: &hook.Turn{ID: "t"}})
	}
	if calls.Load() != 10 {
		t.Errorf("10 requests answered %d times", calls.Load())
	}
}

func TestServe(t *testing.T) {
	e := start(t)
	if _, err := e.js.CreateOrUpdateKeyValue(ctx(t), provision.BucketConfigs(provisionMemory)[2]); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- hooknats.Serve(sctx, e.nc, hooknats.Hook{
			Registration: events.HookRegistration{Name: "served", Event: events.HookOnMessageSend},
			Handler:      hooknats.HandlerFunc(func(context.Context, *events.HookRequest) (*events.HookResponse, error) { return nil, nil }),
		})
	}()
	c := &hook.Chain{}
	w, err := hooknats.Watch(ctx(t), e.js, c, hooknats.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	natstest.Eventually(t, "the served hook in the chain", func() bool { return len(c.List()) > 0 })
	if out := c.RunMessageSend(ctx(t), &hook.MessageSendInput{Turn: &hook.Turn{ID: "t"}}); out.Stopped() {
		t.Errorf("outcome %+v", out)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Adapt serves an in-process hook on the wire and the remote chain reads
// back all it did: the rewritten input, a new variable, an emitted message
// and the decision. The same codec maps both directions.
func TestAdaptRoundTrip(t *testing.T) {
	e := start(t)
	typed := hook.BeforeToolCallFunc(func(_ context.Context, in *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
		in.Call.Input = json.RawMessage(`{"path":"/tmp/safe"}`)
		in.Turn.Vars["seen"] = in.Turn.Vars["seen"] + "x"
		in.Turn.Emit(events.AssistantText("path rewritten"))
		if in.Turn.Step != 3 || in.Turn.ID != "t1" {
			return hook.BeforeToolCallResult{}, fmt.Errorf("turn %+v", in.Turn)
		}
		return hook.BeforeToolCallResult{Action: hook.ToolContinue, Reason: "sandboxed"}, nil
	})
	h, err := hooknats.ServeHook(events.HookRegistration{Name: "sandbox"}, typed)
	if err != nil || h.Registration.Event != events.HookBeforeToolCall {
		t.Fatalf("ServeHook: %+v, %v", h.Registration, err)
	}
	e.server(t, h)
	c, _ := e.chain(t)
	var rec hooktest.Recorder
	tn := &hook.Turn{ID: "t1", Step: 3, Vars: hook.Variables{"seen": "a"}, Observer: &rec}
	in := &hook.ToolCallInput{Turn: tn, Call: call("c1", "write", `{"path":"/etc/passwd"}`)}
	out := c.RunBeforeToolCall(ctx(t), in)
	if out.Stopped() || out.Failed {
		t.Fatalf("outcome %+v", out)
	}
	if string(in.Call.Input) != `{"path":"/tmp/safe"}` || tn.Vars["seen"] != "ax" {
		t.Errorf("input %s vars %v", in.Call.Input, tn.Vars)
	}
	if ms := rec.Messages(); len(ms) != 1 || ms[0].Hook != "sandbox" || ms[0].Messages[0].Text() != "path rewritten" {
		t.Errorf("emitted %+v", ms)
	}
	if ds := rec.Decisions(); len(ds) != 1 || ds[0].Reason != "sandboxed" || ds[0].Result != events.HookContinue {
		t.Errorf("decisions %+v", ds)
	}
	if _, err := hooknats.ServeHook(events.HookRegistration{Name: "x", Event: events.HookOnAbort}, typed); !errors.Is(err, hooknats.ErrInvalidHook) {
		t.Errorf("wrong event accepted: %v", err)
	}
	if _, _, err := hooknats.Adapt(42); !errors.Is(err, hooknats.ErrInvalidHook) {
		t.Errorf("a non-hook adapted: %v", err)
	}
}

// A server whose registrations vanished (the NATS server lost its state,
// the bucket was purged by hand) registers them again, so the turns call
// its hooks again without a restart of the hook host.
func TestServerRegistersLostHooksAgain(t *testing.T) {
	e := start(t)
	hooks := []hooknats.Hook{
		{Registration: events.HookRegistration{Name: "first", Event: events.HookBeforeToolCall}, Handler: appendField("f")},
		{Registration: events.HookRegistration{Name: "second", Event: events.HookBeforeToolCall}, Handler: appendField("s")},
	}
	b, err := hooknats.NewServer(e.nc, hooknats.ServerConfig{Hooks: hooks, RecheckInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Stop(ctx(t)) }()
	before, _ := hooknats.List(ctx(t), e.kv)
	for _, h := range hooks {
		if err := e.kv.Purge(ctx(t), h.Registration.Name); err != nil {
			t.Fatal(err)
		}
	}
	var after []hooknats.Entry
	natstest.Eventually(t, fmt.Sprintf("the %d hooks registered again", len(before)), func() bool {
		var err error
		after, err = hooknats.List(ctx(t), e.kv)
		return err == nil && len(after) == len(before)
	})
	for i := range after {
		if after[i].Name != before[i].Name {
			t.Fatalf("registered again in another order: %v, was %v", after, before)
		}
	}
}
