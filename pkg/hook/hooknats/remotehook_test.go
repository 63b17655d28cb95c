package hooknats_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/hook/hooktest"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// Three hooks registered A, B, C run in that order, each seeing the
// context and variables as the previous one left them (docs/architecture.md#hooks
// "order of several hooks", docs/protocol.md §7 order = registration order).
func TestThreeHooksInRegistrationOrderSeeEachOthersChanges(t *testing.T) {
	e := start(t)
	c, w := e.watch(t)
	var mu sync.Mutex
	var seen []string
	for _, name := range []string{"a", "b", "c"} {
		serve(t, e.nc, "test.hook."+name, binaryCE, func(req events.HookRequest) *events.HookResponse {
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%s saw %d messages, order=%q", name, len(req.Messages), req.Variables["order"]))
			mu.Unlock()
			msgs := append(slices.Clone(req.Messages), events.UserText("note from "+name))
			return &events.HookResponse{
				Result: events.HookContinue, Messages: msgs,
				Variables: map[string]string{"order": req.Variables["order"] + name},
			}
		})
	}
	// Register in the order a, b, c, each with the same priority.
	for _, name := range []string{"a", "b", "c"} {
		e.register(t, w, reg(name, events.HookOnMessageSend, "test.hook."+name))
	}
	rec := &hooktest.Recorder{}
	tn := turn(rec)
	in := &hook.MessageSendInput{Turn: tn, Messages: []events.Message{events.UserText("hi")}}
	out := c.RunMessageSend(ctx(t), in)
	if out.Stopped() || out.Kind != events.HookContinue {
		t.Fatalf("outcome %+v", out)
	}
	want := []string{"user:hi", "user:note from a", "user:note from b", "user:note from c"}
	if got := texts(in.Messages); !slices.Equal(got, want) {
		t.Errorf("messages %q, want %q", got, want)
	}
	wantSeen := []string{`a saw 1 messages, order=""`, `b saw 2 messages, order="a"`, `c saw 3 messages, order="ab"`}
	if !slices.Equal(seen, wantSeen) {
		t.Errorf("hooks saw %q, want %q", seen, wantSeen)
	}
	if tn.Vars.Get("order") != "abc" {
		t.Errorf("turn vars %v, want order=abc", tn.Vars)
	}
	wantTrace := []string{"a on_message_send continue", "b on_message_send continue", "c on_message_send continue"}
	if got := rec.Trace(); !slices.Equal(got, wantTrace) {
		t.Errorf("decisions %q, want %q", got, wantTrace)
	}
}

// A hook with a lower priority value runs before hooks registered earlier.
func TestPriorityRunsFirst(t *testing.T) {
	e := start(t)
	c, w := e.watch(t)
	var mu sync.Mutex
	var order []string
	for _, name := range []string{"late-but-urgent", "first", "second"} {
		serve(t, e.nc, "test.hook."+name, bareJSON, func(events.HookRequest) *events.HookResponse {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			return &events.HookResponse{}
		})
	}
	e.register(t, w, reg("first", events.HookBeforeToolCall, "test.hook.first"))
	e.register(t, w, reg("second", events.HookBeforeToolCall, "test.hook.second"))
	urgent := reg("late-but-urgent", events.HookBeforeToolCall, "test.hook.late-but-urgent")
	urgent.Priority = -10
	e.register(t, w, urgent)
	out := c.RunBeforeToolCall(ctx(t), &hook.ToolCallInput{Turn: turn(nil), Call: events.ToolCall{ID: "c1", Name: "x", Input: json.RawMessage(`{}`)}})
	if out.Stopped() {
		t.Fatalf("outcome %+v", out)
	}
	if want := []string{"late-but-urgent", "first", "second"}; !slices.Equal(order, want) {
		t.Errorf("order %q, want %q", order, want)
	}
	l, err := hooknats.List(ctx(t), e.kv)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range l {
		names = append(names, en.Name)
	}
	if want := []string{"late-but-urgent", "first", "second"}; !slices.Equal(names, want) {
		t.Errorf("List order %q, want %q", names, want)
	}
}

// Each result of each hook point does what docs/protocol.md §7's table says,
// whatever the reply's encoding.
func TestResultsPerEvent(t *testing.T) {
	e := start(t)
	c, w := e.watch(t)
	var mu sync.Mutex
	replies := map[string]*events.HookResponse{}
	requests := map[string]events.HookRequest{}
	setReply := func(name string, r *events.HookResponse) {
		mu.Lock()
		replies[name] = r
		mu.Unlock()
	}
	modes := map[events.HookEvent]replyMode{
		events.HookOnMessageSend: binaryCE, events.HookBeforeToolCall: structuredCE,
		events.HookAfterToolCall: bareJSON, events.HookOnTurnEnd: binaryCE, events.HookOnAbort: bareJSON,
	}
	for _, ev := range events.HookEvents {
		name := string(ev)
		serve(t, e.nc, "test.hook."+name, modes[ev], func(req events.HookRequest) *events.HookResponse {
			mu.Lock()
			defer mu.Unlock()
			requests[name] = req
			return replies[name]
		})
		e.register(t, w, reg(strings.ReplaceAll(name, "_", "-"), ev, "test.hook."+name))
	}
	call := events.ToolCall{ID: "call-1", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)}
	def := events.ToolDefinition{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object"}`)}

	t.Run("on_message_send", func(t *testing.T) {
		setReply("on_message_send", &events.HookResponse{Result: events.HookContinue, Messages: []events.Message{events.UserText("replaced")}})
		in := &hook.MessageSendInput{Turn: turn(nil), Messages: []events.Message{events.UserText("original")}}
		out := c.RunMessageSend(ctx(t), in)
		if out.Stopped() || !slices.Equal(texts(in.Messages), []string{"user:replaced"}) {
			t.Errorf("continue: %+v %q", out, texts(in.Messages))
		}
		setReply("on_message_send", &events.HookResponse{Result: events.HookCancel, Reason: "quota"})
		out = c.RunMessageSend(ctx(t), in)
		if out.Result.Action != hook.MessageSendCancel || out.Hook != "on-message-send" || out.Result.Reason != "quota" || out.Failed {
			t.Errorf("cancel: %+v", out)
		}
	})
	t.Run("before_tool_call", func(t *testing.T) {
		rewritten := call
		rewritten.Input = json.RawMessage(`{"city":"Lyon"}`)
		setReply("before_tool_call", &events.HookResponse{Result: events.HookContinue, ToolCall: &rewritten})
		in := &hook.ToolCallInput{Turn: turn(nil), Call: call, Tool: def}
		if out := c.RunBeforeToolCall(ctx(t), in); out.Stopped() || string(in.Call.Input) != `{"city":"Lyon"}` {
			t.Errorf("rewrite: %+v %s", out, in.Call.Input)
		}
		mu.Lock()
		got := requests["before_tool_call"]
		mu.Unlock()
		if got.ToolCall == nil || got.ToolCall.ID != "call-1" || got.Tool == nil || got.Tool.Name != "get_weather" ||
			got.TurnID != "turn-1" || got.SessionID != "s1" || got.Step != 1 || got.Hook != "before-tool-call" {
			t.Errorf("request %+v", got)
		}
		for res, act := range map[events.HookResultKind]hook.BeforeToolCallAction{
			events.HookSkip: hook.ToolSkip, events.HookAbort: hook.ToolAbort, events.HookPause: hook.ToolPause,
		} {
			setReply("before_tool_call", &events.HookResponse{Result: res, Reason: "because"})
			out := c.RunBeforeToolCall(ctx(t), &hook.ToolCallInput{Turn: turn(nil), Call: call})
			if out.Result.Action != act || out.Kind != res || out.Hook != "before-tool-call" || out.Result.Reason != "because" || out.Failed {
				t.Errorf("%s: %+v", res, out)
			}
		}
	})
	t.Run("after_tool_call", func(t *testing.T) {
		masked := events.ToolResult{ToolUseID: "call-1", Content: "[REDACTED]"}
		setReply("after_tool_call", &events.HookResponse{Result: events.HookContinue, ToolResult: &masked})
		in := &hook.ToolResultInput{Turn: turn(nil), Call: call, Result: events.ToolResult{ToolUseID: "call-1", Content: "secret"}}
		if out := c.RunAfterToolCall(ctx(t), in); out.Stopped() || !reflect.DeepEqual(in.Result, masked) {
			t.Errorf("mask: %+v %+v", out, in.Result)
		}
		mu.Lock()
		got := requests["after_tool_call"]
		mu.Unlock()
		if got.ToolResult == nil || got.ToolResult.Content != "secret" || got.ToolCall == nil || got.ToolCall.Name != "get_weather" {
			t.Errorf("request %+v", got)
		}
		setReply("after_tool_call", &events.HookResponse{Result: events.HookAbort, Reason: "leak"})
		out := c.RunAfterToolCall(ctx(t), in)
		if out.Result.Action != hook.ResultAbort || out.Hook != "after-tool-call" || out.Failed {
			t.Errorf("abort: %+v", out)
		}
	})
	t.Run("on_turn_end", func(t *testing.T) {
		transcript := []events.Message{events.UserText("q"), events.AssistantText("a")}
		setReply("on_turn_end", &events.HookResponse{Result: events.HookContinueWithMessages, Messages: []events.Message{events.UserText("try again")}})
		out := c.RunTurnEnd(ctx(t), &hook.TurnEndInput{Turn: turn(nil), Messages: transcript})
		if out.Result.Action != hook.TurnContinueWithMessages || !slices.Equal(texts(out.Result.Messages), []string{"user:try again"}) {
			t.Errorf("continue_with_messages: %+v", out)
		}
		setReply("on_turn_end", &events.HookResponse{Result: events.HookPause, Reason: "review"})
		if out := c.RunTurnEnd(ctx(t), &hook.TurnEndInput{Turn: turn(nil), Messages: transcript}); out.Result.Action != hook.TurnPause || out.Hook != "on-turn-end" {
			t.Errorf("pause: %+v", out)
		}
		// finish, with messages that must not be appended
		setReply("on_turn_end", &events.HookResponse{Result: events.HookFinish, Messages: []events.Message{events.UserText("ignored")}})
		if out := c.RunTurnEnd(ctx(t), &hook.TurnEndInput{Turn: turn(nil), Messages: transcript}); out.Stopped() || out.Result.Messages != nil {
			t.Errorf("finish: %+v", out)
		}
	})
	t.Run("on_abort", func(t *testing.T) {
		rec := &hooktest.Recorder{}
		tn := turn(rec)
		setReply("on_abort", &events.HookResponse{Variables: map[string]string{"cleaned": "yes"}, Emit: []events.Message{events.AssistantText("bye")}})
		out := c.RunAbort(ctx(t), &hook.AbortInput{Turn: tn, Reason: "cancelled by user"})
		if out.Failed {
			t.Errorf("abort outcome %+v", out)
		}
		mu.Lock()
		got := requests["on_abort"]
		mu.Unlock()
		if got.Reason != "cancelled by user" {
			t.Errorf("request reason %q", got.Reason)
		}
		if tn.Vars.Get("cleaned") != "yes" {
			t.Errorf("vars %v", tn.Vars)
		}
		msgs := rec.Messages()
		if len(msgs) != 1 || msgs[0].Hook != "on-abort" || msgs[0].Event != events.HookOnAbort || msgs[0].Messages[0].Text() != "bye" {
			t.Errorf("emitted %+v", msgs)
		}
	})
}

// A timeout, no responder, an invalid reply, a disallowed result, an error
// reply and a changed call id are hook failures: fail_open continues,
// fail_closed aborts (cancel at on_message_send), and the decision says
// failed.
func TestFailurePolicies(t *testing.T) {
	e := start(t)
	c, w := e.watch(t)
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	serve(t, e.nc, "test.slow", binaryCE, func(events.HookRequest) *events.HookResponse {
		<-block // never answers in time
		return nil
	})
	serveRaw(t, e.nc, "test.garbage", nil, []byte("this is not json"))
	serveRaw(t, e.nc, "test.other-type", nats.Header{
		events.HeaderSpecVersion: {"1.0"}, events.HeaderID: {"x"}, events.HeaderSource: {"/x"}, events.HeaderType: {"llmw.something.else"},
	}, []byte(`{"result":"continue"}`))
	serveRaw(t, e.nc, "test.disallowed", nil, []byte(`{"result":"finish"}`))
	serveRaw(t, e.nc, "test.error", nats.Header{hooknats.HeaderError: {"handler exploded"}, hooknats.HeaderErrorCode: {"500"}}, nil)
	serveRaw(t, e.nc, "test.wrong-id", nil, []byte(`{"result":"continue","tool_call":{"id":"other","name":"x","input":{}}}`))
	// The schema requires "result": a reply without one is no reply.
	serveRaw(t, e.nc, "test.empty", nil, nil)
	serveRaw(t, e.nc, "test.null", nil, []byte("null"))
	serveRaw(t, e.nc, "test.no-result", nil, []byte(`{"reason":"looks fine"}`))

	cases := []struct {
		name, subject string
		timeoutMS     int64
		want          error
	}{
		{"timeout", "test.slow", 50, hook.ErrTimeout},
		{"no-responders", "test.nobody", 0, hooknats.ErrNoResponders},
		{"invalid-reply", "test.garbage", 0, hooknats.ErrInvalidReply},
		{"wrong-type", "test.other-type", 0, hooknats.ErrInvalidReply},
		{"disallowed-result", "test.disallowed", 0, hooknats.ErrInvalidReply},
		{"error-reply", "test.error", 0, hooknats.ErrResponder},
		{"changed-id", "test.wrong-id", 0, hooknats.ErrInvalidReply},
		{"empty-reply", "test.empty", 0, hooknats.ErrInvalidReply},
		{"null-reply", "test.null", 0, hooknats.ErrInvalidReply},
		{"no-result", "test.no-result", 0, hooknats.ErrInvalidReply},
	}
	call := events.ToolCall{ID: "c1", Name: "x", Input: json.RawMessage(`{}`)}
	for _, tc := range cases {
		for _, policy := range []events.FailurePolicy{events.FailOpen, events.FailClosed} {
			t.Run(tc.name+"/"+string(policy), func(t *testing.T) {
				r := reg("h-"+tc.name, events.HookBeforeToolCall, tc.subject)
				r.TimeoutMS, r.Failure = tc.timeoutMS, policy
				if r.TimeoutMS == 0 {
					r.TimeoutMS = 5000
				}
				e.register(t, w, r)
				t.Cleanup(func() { _ = hooknats.Unregister(ctx(t), e.kv, r.Name); _ = w.Sync(ctx(t)) })
				rec := &hooktest.Recorder{}
				out := c.RunBeforeToolCall(ctx(t), &hook.ToolCallInput{Turn: turn(rec), Call: call})
				ds := rec.Decisions()
				if len(ds) != 1 || !ds[0].Failed || ds[0].Hook != r.Name {
					t.Fatalf("decisions %+v", ds)
				}
				if policy == events.FailOpen {
					if out.Stopped() || ds[0].Result != events.HookContinue {
						t.Errorf("fail_open: outcome %+v, decision %+v", out, ds[0])
					}
					return
				}
				if !out.Failed || out.Result.Action != hook.ToolAbort || out.Kind != events.HookAbort || out.Hook != r.Name {
					t.Errorf("fail_closed: outcome %+v", out)
				}
				if !errors.Is(out.Err, tc.want) {
					t.Errorf("error %v, want %v", out.Err, tc.want)
				}
			})
		}
	}

	// fail_closed at on_message_send cancels; at on_turn_end it aborts (the
	// lead's hook.Outcome contract: Failed, Kind abort, Result finish).
	t.Run("fail_closed/on_message_send", func(t *testing.T) {
		e.register(t, w, reg("send-nobody", events.HookOnMessageSend, "test.nobody"))
		t.Cleanup(func() { _ = hooknats.Unregister(ctx(t), e.kv, "send-nobody"); _ = w.Sync(ctx(t)) })
		out := c.RunMessageSend(ctx(t), &hook.MessageSendInput{Turn: turn(nil)})
		if !out.Failed || out.Result.Action != hook.MessageSendCancel || out.Kind != events.HookCancel {
			t.Errorf("outcome %+v", out)
		}
	})
	t.Run("fail_closed/on_turn_end", func(t *testing.T) {
		e.register(t, w, reg("end-garbage", events.HookOnTurnEnd, "test.garbage"))
		t.Cleanup(func() { _ = hooknats.Unregister(ctx(t), e.kv, "end-garbage"); _ = w.Sync(ctx(t)) })
		out := c.RunTurnEnd(ctx(t), &hook.TurnEndInput{Turn: turn(nil)})
		if !out.Failed || out.Kind != events.HookAbort || out.Result.Action != hook.TurnFinish || !errors.Is(out.Err, hooknats.ErrInvalidReply) {
			t.Errorf("outcome %+v", out)
		}
	})
}

// A hook registered while a hook point runs is not used by that hook
// point (its snapshot) but by the next one; a deleted hook likewise.
func TestRegisteredMidTurnUsedFromNextHookPoint(t *testing.T) {
	e := start(t)
	c, w := e.watch(t)
	var mu sync.Mutex
	var calls []string
	registered := false
	lateReg := reg("late", events.HookBeforeToolCall, "test.late")
	serve(t, e.nc, "test.late", binaryCE, func(events.HookRequest) *events.HookResponse {
		mu.Lock()
		calls = append(calls, "late")
		mu.Unlock()
		return &events.HookResponse{}
	})
	serve(t, e.nc, "test.early", binaryCE, func(req events.HookRequest) *events.HookResponse {
		mu.Lock()
		calls = append(calls, "early:"+req.ToolCall.ID)
		first := !registered
		registered = true
		mu.Unlock()
		if first {
			// Register another hook while this hook point runs, and wait
			// until the watcher has put it in the chain.
			rev, err := hooknats.Register(ctx(t), e.kv, lateReg)
			if err == nil {
				err = w.WaitRevision(ctx(t), rev)
			}
			if err != nil {
				t.Error(err)
			}
		}
		return &events.HookResponse{}
	})
	e.register(t, w, reg("early", events.HookBeforeToolCall, "test.early"))

	tn := turn(nil)
	for _, id := range []string{"c1", "c2"} {
		out := c.RunBeforeToolCall(ctx(t), &hook.ToolCallInput{Turn: tn, Call: events.ToolCall{ID: id, Name: "x"}})
		if out.Stopped() {
			t.Fatalf("outcome %+v", out)
		}
	}
	if want := []string{"early:c1", "early:c2", "late"}; !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}

	// Unregistered: gone from the next hook point.
	if err := hooknats.Unregister(ctx(t), e.kv, "late"); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	calls = nil
	c.RunBeforeToolCall(ctx(t), &hook.ToolCallInput{Turn: tn, Call: events.ToolCall{ID: "c3", Name: "x"}})
	if want := []string{"early:c3"}; !slices.Equal(calls, want) {
		t.Errorf("after unregister calls %q, want %q", calls, want)
	}
	if _, ok := w.Hooks()["late"]; ok {
		t.Errorf("watcher still owns late: %v rev=%d", w.Hooks(), w.Revision())
	}
}

// Register keeps the place of an identical re-registration, moves a changed
// one to the end of its priority; RegisterOrdered follows the list.
func TestRegisterOrder(t *testing.T) {
	e := start(t)
	c := ctx(t)
	a, b := reg("a", events.HookOnTurnEnd, "s.a"), reg("b", events.HookOnTurnEnd, "s.b")
	ra, err := hooknats.Register(c, e.kv, a)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := hooknats.Register(c, e.kv, b)
	again, _ := hooknats.Register(c, e.kv, a)
	if again != ra || rb <= ra {
		t.Errorf("revisions a=%d b=%d again=%d: identical re-registration must keep a's revision", ra, rb, again)
	}
	a.Matcher = "x"
	changed, _ := hooknats.Register(c, e.kv, a)
	if changed <= rb {
		t.Errorf("changed a got revision %d, want after b's %d", changed, rb)
	}
	// Ordered: b then a is the current order; asking for a, b rewrites b.
	revs, err := hooknats.RegisterOrdered(c, e.kv, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if revs[0] != changed || revs[1] <= revs[0] {
		t.Errorf("ordered revisions %v (a was %d)", revs, changed)
	}
	revs2, _ := hooknats.RegisterOrdered(c, e.kv, a, b)
	if !slices.Equal(revs, revs2) {
		t.Errorf("re-running RegisterOrdered wrote again: %v then %v", revs, revs2)
	}
	if _, err := hooknats.Register(c, e.kv, events.HookRegistration{Name: "bad name"}); !errors.Is(err, hooknats.ErrInvalidRegistration) {
		t.Errorf("invalid registration: %v", err)
	}
}

// A registry value with an unknown event guards nothing, one whose key is
// not its name is a failing hook under its key; a name used by an
// in-process hook keeps the in-process hook.
func TestWatchBrokenValuesAndInProcessHooks(t *testing.T) {
	e := start(t)
	c := &hook.Chain{}
	if err := c.BeforeToolCall(hooktest.Always[hook.ToolCallInput](hook.BeforeToolCallResult{Action: hook.ToolSkip, Reason: "local"}), hook.Options{Name: "local"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kv.Put(ctx(t), "broken", []byte(`{"name":"broken","event":"nope"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kv.Put(ctx(t), "mismatch", []byte(`{"name":"other","event":"on_abort","subject":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := hooknats.Register(ctx(t), e.kv, reg("local", events.HookBeforeToolCall, "test.nobody")); err != nil {
		t.Fatal(err)
	}
	e.register(t, nil, reg("good", events.HookOnAbort, "test.good"))
	w, err := hooknats.Watch(ctx(t), e.js, c, hooknats.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range c.List() {
		names = append(names, i.Name)
	}
	if want := []string{"local", "mismatch", "good"}; !slices.Equal(names, want) {
		t.Errorf("chain %q, want %q", names, want)
	}
	out := c.RunBeforeToolCall(ctx(t), &hook.ToolCallInput{Turn: turn(nil), Call: events.ToolCall{ID: "c", Name: "x"}})
	if out.Result.Reason != "local" {
		t.Errorf("in-process hook replaced: %+v", out)
	}
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	names = nil
	for _, i := range c.List() {
		names = append(names, i.Name)
	}
	if want := []string{"local"}; !slices.Equal(names, want) {
		t.Errorf("after Stop chain %q, want %q", names, want)
	}
}

// Stop is a clean stop: cancelling the watch closes its update channel
// too, and which of the two the watcher sees first must not turn the stop
// into a "watch closed" error. Many stops make the race likely.
func TestWatcherStopIsClean(t *testing.T) {
	e := start(t)
	for i := range 200 {
		w, err := hooknats.Watch(ctx(t), e.js, &hook.Chain{}, hooknats.WatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Stop(); err != nil {
			t.Fatalf("stop %d: %v", i, err)
		}
	}
}

// A reply under the request's own headers (nats-py's Msg.respond copies
// them: ce-type llmw.hook.request) is read as the bare JSON response its
// body is. Before, it was taken for a CloudEvent of the wrong type and
// the turn aborted under fail_closed.
func TestReplyWithEchoedRequestHeaders(t *testing.T) {
	e := start(t)
	c, w := e.watch(t)
	serve(t, e.nc, "test.hook.echo", echoedHeaders, func(events.HookRequest) *events.HookResponse {
		return &events.HookResponse{Result: events.HookSkip, Reason: "not this one"}
	})
	e.register(t, w, reg("echo", events.HookBeforeToolCall, "test.hook.echo"))
	out := c.RunBeforeToolCall(ctx(t), &hook.ToolCallInput{Turn: turn(nil), Call: events.ToolCall{ID: "c1", Name: "x", Input: json.RawMessage(`{}`)}})
	if out.Failed || out.Result.Action != hook.ToolSkip || out.Result.Reason != "not this one" {
		t.Fatalf("outcome %+v, want the hook's skip", out)
	}
}

// A reply that is a CloudEvent of another type says which header to
// change.
func TestReplyOfWrongTypeNamesTheFix(t *testing.T) {
	h := nats.Header{}
	env, _ := events.NewEnvelope("/x", "com.example.other", map[string]any{})
	env.WriteBinaryHeader(h)
	_, err := hooknats.DecodeResponse(h, []byte(`{"result":"continue"}`), events.HookBeforeToolCall)
	if !errors.Is(err, hooknats.ErrInvalidReply) || !strings.Contains(err.Error(), `"com.example.other"`) ||
		!strings.Contains(err.Error(), events.TypeHookResponse) || !strings.Contains(err.Error(), "no ce- headers") {
		t.Fatalf("error %v", err)
	}
}

// A replica of LLMW_HOOKS that is behind (here: since the hooks were
// first registered) answers some of the direct gets. Register decides
// on its read whether to write at all, so it must not believe one: a
// hook unregistered since, or changed since, and registered again as it
// was, is stored again — the registry then holds what was registered
// last, and RegisterOrdered's list stays in its order.
func TestRegisterWithALaggingReplica(t *testing.T) {
	e := start(t)
	c := ctx(t)
	const n = 6
	regs := make([]events.HookRegistration, n)
	for i := range regs {
		regs[i] = reg(fmt.Sprintf("lag-%d", i), events.HookOnTurnEnd, fmt.Sprintf("s.lag.%d", i))
		if _, err := hooknats.Register(c, e.kv, regs[i]); err != nil {
			t.Fatal(err)
		}
	}
	natstest.LaggingReplica(t, e.js, "KV_"+events.BucketHooks)
	raw, err := e.js.KeyValue(c, events.BucketHooks) // reads any replica
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range regs {
		if i%2 == 0 {
			if err := hooknats.Unregister(c, e.kv, r.Name); err != nil {
				t.Fatal(err)
			}
			continue
		}
		changed := r
		changed.Matcher = "changed"
		if _, err := hooknats.Register(c, e.kv, changed); err != nil {
			t.Fatal(err)
		}
	}
	stale := 0
	for range 40 {
		if en, err := raw.Get(c, regs[1].Name); err == nil && !strings.Contains(string(en.Value()), "changed") {
			stale++
		}
	}
	if stale == 0 {
		t.Fatal("the lagging replica answered none of 40 direct gets: the test would prove nothing")
	}
	revs, err := hooknats.RegisterOrdered(c, e.kv, regs...)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := hooknats.List(c, e.kv)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]hooknats.Entry{}
	for _, en := range entries {
		got[en.Name] = en
	}
	for i, r := range regs {
		en, ok := got[r.Name]
		if !ok || en.Matcher != r.Matcher || en.Revision != revs[i] || (i > 0 && revs[i] <= revs[i-1]) {
			t.Errorf("%s: stored %+v (present %v), revisions %v; want it registered again as first registered, in the list's order", r.Name, en, ok, revs)
		}
	}
}
