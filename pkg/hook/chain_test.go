package hook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func texts(msgs []events.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Text()
	}
	return out
}

func eq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %#v\n want %#v", what, got, want)
	}
}

// release returns a channel the test closes at cleanup, so that hooks that
// block "forever" (ignoring ctx) end before goleak looks.
func release(t *testing.T) chan struct{} {
	ch := make(chan struct{})
	t.Cleanup(func() { close(ch) })
	return ch
}

func TestThreeHooksSeeEachOthersChanges(t *testing.T) {
	var c hook.Chain
	var seen [][]string
	appender := func(tag string) hook.MessageSendFunc {
		return func(_ context.Context, in *hook.MessageSendInput) (hook.MessageSendResult, error) {
			seen = append(seen, texts(in.Messages))
			in.Messages = append(in.Messages, events.UserText(tag))
			return hook.MessageSendResult{}, nil
		}
	}
	for _, n := range []string{"A", "B", "C"} {
		if err := c.OnMessageSend(appender(n), hook.Options{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	in := &hook.MessageSendInput{Messages: []events.Message{events.UserText("q")}}
	out := c.RunMessageSend(context.Background(), in)
	eq(t, "kind", out.Kind, events.HookContinue)
	eq(t, "hook", out.Hook, "")
	eq(t, "seen", seen, [][]string{{"q"}, {"q", "A"}, {"q", "A", "B"}})
	eq(t, "final", texts(in.Messages), []string{"q", "A", "B", "C"})
}

func TestThreeToolHooksRewriteCallInOrder(t *testing.T) {
	var c hook.Chain
	var seen []string
	for _, key := range []string{"a", "b", "c"} {
		_ = c.BeforeToolCall(hook.BeforeToolCallFunc(func(_ context.Context, in *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
			seen = append(seen, string(in.Call.Input))
			var m map[string]int
			if err := json.Unmarshal(in.Call.Input, &m); err != nil {
				return hook.BeforeToolCallResult{}, err
			}
			m[key] = len(m)
			in.Call.Input, _ = json.Marshal(m)
			return hook.BeforeToolCallResult{}, nil
		}), hook.Options{Name: key})
	}
	in := &hook.ToolCallInput{Call: events.ToolCall{ID: "1", Name: "t", Input: json.RawMessage(`{}`)}}
	out := c.RunBeforeToolCall(context.Background(), in)
	eq(t, "kind", out.Kind, events.HookContinue)
	eq(t, "seen", seen, []string{`{}`, `{"a":0}`, `{"a":0,"b":1}`})
	eq(t, "final", string(in.Call.Input), `{"a":0,"b":1,"c":2}`)
}

func TestPriorityThenRegistrationOrder(t *testing.T) {
	var c hook.Chain
	rec := &hooktest.Recorder{}
	add := func(name string, o hook.Options) {
		o.Name = name
		if err := c.AfterToolCall(hooktest.Always[hook.ToolResultInput](hook.AfterToolCallResult{}), o); err != nil {
			t.Fatal(err)
		}
	}
	add("p5", hook.Options{Priority: 5})
	add("p0-first", hook.Options{})
	add("pneg", hook.Options{Priority: -3})
	add("p0-second", hook.Options{})
	add("p5-second", hook.Options{Priority: 5})
	c.RunAfterToolCall(context.Background(), &hook.ToolResultInput{Turn: &hook.Turn{Observer: rec}})
	var got []string
	for _, d := range rec.Decisions() {
		got = append(got, d.Hook)
	}
	eq(t, "order", got, []string{"pneg", "p0-first", "p0-second", "p5", "p5-second"})
}

func TestExplicitSeqPlacesRemoteHooks(t *testing.T) {
	var c hook.Chain
	// Added out of registry order, as a KV watcher may deliver them.
	_ = c.OnTurnEnd(hooktest.Always[hook.TurnEndInput](hook.TurnEndResult{}), hook.Options{Name: "rev17", Seq: 17})
	_ = c.OnTurnEnd(hooktest.Always[hook.TurnEndInput](hook.TurnEndResult{}), hook.Options{Name: "rev5", Seq: 5})
	_ = c.OnTurnEnd(hooktest.Always[hook.TurnEndInput](hook.TurnEndResult{}), hook.Options{Name: "local"})
	_ = c.OnTurnEnd(hooktest.Always[hook.TurnEndInput](hook.TurnEndResult{}), hook.Options{Name: "urgent", Seq: 30, Priority: -1})
	var got []string
	var seqs []int64
	for _, i := range c.List() {
		got = append(got, i.Name)
		seqs = append(seqs, i.Seq)
	}
	eq(t, "order", got, []string{"urgent", "rev5", "rev17", "local"})
	eq(t, "seqs", seqs, []int64{30, 5, 17, 18})
}

func TestMatchers(t *testing.T) {
	var c hook.Chain
	rec := &hooktest.Recorder{}
	ok := hooktest.Always[hook.ToolCallInput](hook.BeforeToolCallResult{})
	_ = c.BeforeToolCall(ok, hook.Options{Name: "all"})
	_ = c.BeforeToolCall(ok, hook.Options{Name: "edits", Matcher: "Edit|Create"})
	_ = c.BeforeToolCall(ok, hook.Options{Name: "files", Matcher: `^(Read|Write)File.*`})
	_ = c.AfterToolCall(hooktest.Always[hook.ToolResultInput](hook.AfterToolCallResult{}), hook.Options{Name: "after-edits", Matcher: "^Edit$"})
	run := func(name string) []string {
		rec.Reset()
		turn := &hook.Turn{Observer: rec}
		call := events.ToolCall{ID: "1", Name: name}
		c.RunBeforeToolCall(context.Background(), &hook.ToolCallInput{Turn: turn, Call: call})
		c.RunAfterToolCall(context.Background(), &hook.ToolResultInput{Turn: turn, Call: call})
		var got []string
		for _, d := range rec.Decisions() {
			got = append(got, d.Hook)
		}
		return got
	}
	eq(t, "Edit", run("Edit"), []string{"all", "edits", "after-edits"})
	eq(t, "CreateDir", run("CreateDir"), []string{"all", "edits"})
	eq(t, "ReadFileX", run("ReadFileX"), []string{"all", "files"})
	eq(t, "MyReadFile", run("MyReadFile"), []string{"all"})
	eq(t, "Shell", run("Shell"), []string{"all"})
}

func TestMatcherOnTranscriptHookPoints(t *testing.T) {
	var c hook.Chain
	var ran []string
	_ = c.OnTurnEnd(hook.TurnEndFunc(func(context.Context, *hook.TurnEndInput) (hook.TurnEndResult, error) {
		ran = append(ran, "lint")
		return hook.TurnEndResult{}, nil
	}), hook.Options{Name: "lint", Matcher: "^Edit$"})
	_ = c.OnMessageSend(hook.MessageSendFunc(func(context.Context, *hook.MessageSendInput) (hook.MessageSendResult, error) {
		ran = append(ran, "send")
		return hook.MessageSendResult{}, nil
	}), hook.Options{Name: "send", Matcher: "^Edit$"})
	_ = c.OnAbort(hook.AbortFunc(func(context.Context, *hook.AbortInput) (hook.AbortResult, error) {
		ran = append(ran, "abort")
		return hook.AbortResult{}, nil
	}), hook.Options{Name: "abort", Matcher: "^Edit$"})
	plain := []events.Message{events.UserText("hi"), events.AssistantText("hello")}
	edited := []events.Message{events.UserText("fix it"),
		{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("c1", "Edit", json.RawMessage(`{}`))}},
		{Role: events.RoleUser, Content: []events.Part{events.ToolResultPart("c1", "done", false)}},
		events.AssistantText("fixed")}
	ctx := context.Background()
	c.RunTurnEnd(ctx, &hook.TurnEndInput{Messages: plain})
	c.RunMessageSend(ctx, &hook.MessageSendInput{Messages: plain})
	c.RunAbort(ctx, &hook.AbortInput{Messages: plain})
	eq(t, "no tool used", ran, []string(nil))
	c.RunTurnEnd(ctx, &hook.TurnEndInput{Messages: edited})
	c.RunMessageSend(ctx, &hook.MessageSendInput{Messages: edited})
	c.RunAbort(ctx, &hook.AbortInput{Messages: edited})
	eq(t, "Edit used", ran, []string{"lint", "send", "abort"})
}

func TestRegistrationErrors(t *testing.T) {
	var c hook.Chain
	ok := hooktest.Always[hook.ToolCallInput](hook.BeforeToolCallResult{})
	err := c.BeforeToolCall(ok, hook.Options{Name: "bad", Matcher: "(unclosed"})
	if !errors.Is(err, hook.ErrInvalidMatcher) || !strings.Contains(err.Error(), "(unclosed") {
		t.Fatalf("invalid matcher: %v", err)
	}
	if err := c.BeforeToolCall(nil, hook.Options{}); !errors.Is(err, hook.ErrNilHook) {
		t.Fatalf("nil hook: %v", err)
	}
	if err := c.BeforeToolCall(ok, hook.Options{Failure: "fail_sideways"}); !errors.Is(err, hook.ErrInvalidOptions) {
		t.Fatalf("bad failure: %v", err)
	}
	if err := c.BeforeToolCall(ok, hook.Options{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	// Names are unique across hook points.
	err = c.OnAbort(hooktest.Always[hook.AbortInput](hook.AbortResult{}), hook.Options{Name: "x"})
	if !errors.Is(err, hook.ErrDuplicateName) {
		t.Fatalf("duplicate: %v", err)
	}
	if len(c.List()) != 1 {
		t.Fatalf("failed registrations must not register: %+v", c.List())
	}
}

func TestReplaceAndRemoveAndList(t *testing.T) {
	var c hook.Chain
	_ = c.BeforeToolCall(hooktest.Always[hook.ToolCallInput](hook.BeforeToolCallResult{}), hook.Options{Name: "x"})
	_ = c.OnMessageSend(hooktest.Always[hook.MessageSendInput](hook.MessageSendResult{}), hook.Options{})
	_ = c.OnMessageSend(hooktest.Always[hook.MessageSendInput](hook.MessageSendResult{}), hook.Options{})
	// Replace moves "x" to another hook point atomically.
	err := c.OnAbort(hooktest.Always[hook.AbortInput](hook.AbortResult{}),
		hook.Options{Name: "x", Replace: true, Matcher: "E", Timeout: time.Second, Failure: events.FailOpen, Priority: 2})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.AfterToolCall(hooktest.Always[hook.ToolResultInput](hook.AfterToolCallResult{}), hook.Options{Name: "after"})
	_ = c.OnTurnEnd(hooktest.Always[hook.TurnEndInput](hook.TurnEndResult{}), hook.Options{Name: "end"})
	want := []hook.Info{
		{Name: "on_message_send-2", Event: events.HookOnMessageSend, Failure: events.FailClosed, Seq: 2},
		{Name: "on_message_send-3", Event: events.HookOnMessageSend, Failure: events.FailClosed, Seq: 3},
		{Name: "after", Event: events.HookAfterToolCall, Failure: events.FailClosed, Seq: 4},
		{Name: "end", Event: events.HookOnTurnEnd, Failure: events.FailClosed, Seq: 5},
		{Name: "x", Event: events.HookOnAbort, Priority: 2, Matcher: "E", Timeout: time.Second, Failure: events.FailOpen, Seq: 1},
	}
	eq(t, "list", c.List(), want)
	for _, n := range []string{"x", "after", "end", "on_message_send-2"} {
		if !c.Remove(n) {
			t.Fatalf("Remove(%q) = false", n)
		}
	}
	if c.Remove("x") {
		t.Fatal("second Remove(x) = true")
	}
	eq(t, "after remove", len(c.List()), 1)
	// A generated name never collides with an explicit one.
	_ = c.OnMessageSend(hooktest.Always[hook.MessageSendInput](hook.MessageSendResult{}), hook.Options{Name: "on_message_send-7"})
	_ = c.OnMessageSend(hooktest.Always[hook.MessageSendInput](hook.MessageSendResult{}), hook.Options{Seq: 7})
	names := map[string]bool{}
	for _, i := range c.List() {
		if names[i.Name] {
			t.Fatalf("duplicate name %q", i.Name)
		}
		names[i.Name] = true
	}
	eq(t, "count", len(names), 3)
}

func TestEmptyChain(t *testing.T) {
	var c hook.Chain
	ctx := context.Background()
	eq(t, "send", c.RunMessageSend(ctx, &hook.MessageSendInput{}), hook.Outcome[hook.MessageSendResult]{Kind: events.HookContinue})
	eq(t, "end", c.RunTurnEnd(ctx, &hook.TurnEndInput{}), hook.Outcome[hook.TurnEndResult]{Kind: events.HookFinish})
	if c.RunBeforeToolCall(ctx, &hook.ToolCallInput{}).Stopped() {
		t.Fatal("empty chain stopped")
	}
}

// Every result of every hook point: hook 1 continues, hook 2 answers the
// result, hook 3 runs only when the result lets the chain go on.
func TestEveryResultOnEveryHookPoint(t *testing.T) {
	type row struct {
		name      string
		register  func(c *hook.Chain, second any)
		run       func(c *hook.Chain, turn *hook.Turn) (kind events.HookResultKind, hookName string, result any)
		second    any
		wantKind  events.HookResultKind
		wantStops bool
	}
	var rows []row
	msgs := []events.Message{events.UserText("hi")}

	sendRun := func(c *hook.Chain, turn *hook.Turn) (events.HookResultKind, string, any) {
		o := c.RunMessageSend(context.Background(), &hook.MessageSendInput{Turn: turn, Messages: msgs})
		return o.Kind, o.Hook, o.Result
	}
	sendReg := func(c *hook.Chain, second any) {
		_ = c.OnMessageSend(hooktest.Always[hook.MessageSendInput](hook.MessageSendResult{}), hook.Options{Name: "h1"})
		_ = c.OnMessageSend(hooktest.Always[hook.MessageSendInput](second.(hook.MessageSendResult)), hook.Options{Name: "h2"})
		_ = c.OnMessageSend(hooktest.Always[hook.MessageSendInput](hook.MessageSendResult{}), hook.Options{Name: "h3"})
	}
	for _, r := range []struct {
		res  hook.MessageSendResult
		kind events.HookResultKind
		stop bool
	}{
		{hook.MessageSendResult{Action: hook.MessageSendContinue}, events.HookContinue, false},
		{hook.MessageSendResult{Action: hook.MessageSendCancel, Reason: "r"}, events.HookCancel, true},
	} {
		rows = append(rows, row{"on_message_send/" + string(r.kind), sendReg, sendRun, r.res, r.kind, r.stop})
	}

	beforeRun := func(c *hook.Chain, turn *hook.Turn) (events.HookResultKind, string, any) {
		o := c.RunBeforeToolCall(context.Background(), &hook.ToolCallInput{Turn: turn, Call: events.ToolCall{ID: "c1", Name: "t"}})
		return o.Kind, o.Hook, o.Result
	}
	beforeReg := func(c *hook.Chain, second any) {
		_ = c.BeforeToolCall(hooktest.Always[hook.ToolCallInput](hook.BeforeToolCallResult{}), hook.Options{Name: "h1"})
		_ = c.BeforeToolCall(hooktest.Always[hook.ToolCallInput](second.(hook.BeforeToolCallResult)), hook.Options{Name: "h2"})
		_ = c.BeforeToolCall(hooktest.Always[hook.ToolCallInput](hook.BeforeToolCallResult{}), hook.Options{Name: "h3"})
	}
	for _, r := range []struct {
		res  hook.BeforeToolCallResult
		kind events.HookResultKind
		stop bool
	}{
		{hook.BeforeToolCallResult{Action: hook.ToolContinue}, events.HookContinue, false},
		{hook.BeforeToolCallResult{Action: hook.ToolSkip, Reason: "r"}, events.HookSkip, true},
		{hook.BeforeToolCallResult{Action: hook.ToolAbort, Reason: "r"}, events.HookAbort, true},
		{hook.BeforeToolCallResult{Action: hook.ToolPause, Reason: "r"}, events.HookPause, true},
	} {
		rows = append(rows, row{"before_tool_call/" + string(r.kind), beforeReg, beforeRun, r.res, r.kind, r.stop})
	}

	afterRun := func(c *hook.Chain, turn *hook.Turn) (events.HookResultKind, string, any) {
		o := c.RunAfterToolCall(context.Background(), &hook.ToolResultInput{Turn: turn, Call: events.ToolCall{ID: "c1", Name: "t"}})
		return o.Kind, o.Hook, o.Result
	}
	afterReg := func(c *hook.Chain, second any) {
		_ = c.AfterToolCall(hooktest.Always[hook.ToolResultInput](hook.AfterToolCallResult{}), hook.Options{Name: "h1"})
		_ = c.AfterToolCall(hooktest.Always[hook.ToolResultInput](second.(hook.AfterToolCallResult)), hook.Options{Name: "h2"})
		_ = c.AfterToolCall(hooktest.Always[hook.ToolResultInput](hook.AfterToolCallResult{}), hook.Options{Name: "h3"})
	}
	for _, r := range []struct {
		res  hook.AfterToolCallResult
		kind events.HookResultKind
		stop bool
	}{
		{hook.AfterToolCallResult{Action: hook.ResultContinue}, events.HookContinue, false},
		{hook.AfterToolCallResult{Action: hook.ResultAbort, Reason: "r"}, events.HookAbort, true},
	} {
		rows = append(rows, row{"after_tool_call/" + string(r.kind), afterReg, afterRun, r.res, r.kind, r.stop})
	}

	endRun := func(c *hook.Chain, turn *hook.Turn) (events.HookResultKind, string, any) {
		o := c.RunTurnEnd(context.Background(), &hook.TurnEndInput{Turn: turn, Messages: msgs})
		return o.Kind, o.Hook, o.Result
	}
	endReg := func(c *hook.Chain, second any) {
		_ = c.OnTurnEnd(hooktest.Always[hook.TurnEndInput](hook.TurnEndResult{}), hook.Options{Name: "h1"})
		_ = c.OnTurnEnd(hooktest.Always[hook.TurnEndInput](second.(hook.TurnEndResult)), hook.Options{Name: "h2"})
		_ = c.OnTurnEnd(hooktest.Always[hook.TurnEndInput](hook.TurnEndResult{}), hook.Options{Name: "h3"})
	}
	for _, r := range []struct {
		res  hook.TurnEndResult
		kind events.HookResultKind
		stop bool
	}{
		{hook.TurnEndResult{Action: hook.TurnFinish}, events.HookFinish, false},
		{hook.TurnEndResult{Action: hook.TurnContinueWithMessages, Messages: []events.Message{events.UserText("again")}}, events.HookContinueWithMessages, true},
		{hook.TurnEndResult{Action: hook.TurnPause, Reason: "r"}, events.HookPause, true},
	} {
		rows = append(rows, row{"on_turn_end/" + string(r.kind), endReg, endRun, r.res, r.kind, r.stop})
	}

	abortRun := func(c *hook.Chain, turn *hook.Turn) (events.HookResultKind, string, any) {
		o := c.RunAbort(context.Background(), &hook.AbortInput{Turn: turn, Reason: "x"})
		return o.Kind, o.Hook, o.Result
	}
	abortReg := func(c *hook.Chain, second any) {
		for _, n := range []string{"h1", "h2", "h3"} {
			_ = c.OnAbort(hooktest.Always[hook.AbortInput](hook.AbortResult{}), hook.Options{Name: n})
		}
	}
	rows = append(rows, row{"on_abort", abortReg, abortRun, hook.AbortResult{}, events.HookContinue, false})

	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			var c hook.Chain
			r.register(&c, r.second)
			rec := &hooktest.Recorder{}
			kind, name, result := r.run(&c, &hook.Turn{ID: "t", Observer: rec})
			eq(t, "kind", kind, r.wantKind)
			if r.wantStops {
				eq(t, "hook", name, "h2")
				eq(t, "result", result, r.second)
			} else {
				eq(t, "hook", name, "")
			}
			point := strings.Split(r.name, "/")[0]
			goOn := events.HookContinue
			if point == "on_turn_end" {
				goOn = events.HookFinish
			}
			want := []string{"h1 " + point + " " + string(goOn), "h2 " + point + " " + string(r.wantKind)}
			if !r.wantStops {
				want = append(want, "h3 "+point+" "+string(goOn))
			}
			eq(t, "trace", rec.Trace(), want)
		})
	}
}

func TestInvalidResultIsAFailure(t *testing.T) {
	var c hook.Chain
	_ = c.BeforeToolCall(hooktest.Always[hook.ToolCallInput](hook.BeforeToolCallResult{Action: 9}), hook.Options{Name: "weird"})
	rec := &hooktest.Recorder{}
	out := c.RunBeforeToolCall(context.Background(), &hook.ToolCallInput{Turn: &hook.Turn{Observer: rec}, Call: events.ToolCall{ID: "c", Name: "t"}})
	if !out.Failed || !errors.Is(out.Err, hook.ErrInvalidResult) || out.Result.Action != hook.ToolAbort || out.Hook != "weird" {
		t.Fatalf("outcome %+v", out)
	}
	eq(t, "trace", rec.Trace(), []string{"weird before_tool_call abort (failed)"})
}

// failing returns hooks of every kind of failure for one hook point.
func failures(t *testing.T) map[string]hook.MessageSendFunc {
	block := release(t)
	boom := errors.New("boom")
	return map[string]hook.MessageSendFunc{
		"error": hooktest.Fail[hook.MessageSendInput, hook.MessageSendResult](boom),
		"panic": func(context.Context, *hook.MessageSendInput) (hook.MessageSendResult, error) { panic("kaboom") },
		// Ignores ctx: must be abandoned at its timeout.
		"stuck": func(context.Context, *hook.MessageSendInput) (hook.MessageSendResult, error) {
			<-block
			return hook.MessageSendResult{}, nil
		},
		// Honours ctx: returns its deadline error.
		"polite": func(ctx context.Context, _ *hook.MessageSendInput) (hook.MessageSendResult, error) {
			<-ctx.Done()
			return hook.MessageSendResult{}, ctx.Err()
		},
	}
}

var failureCause = map[string]func(error) bool{
	"error": func(err error) bool {
		return err != nil && err.Error() == "hook \"bad\" (on_message_send) failed: boom"
	},
	"panic":  func(err error) bool { return errors.Is(err, hook.ErrPanic) && strings.Contains(err.Error(), "kaboom") },
	"stuck":  func(err error) bool { return errors.Is(err, hook.ErrTimeout) },
	"polite": func(err error) bool { return errors.Is(err, hook.ErrTimeout) },
}

func TestFailClosed(t *testing.T) {
	for name, h := range failures(t) {
		t.Run(name, func(t *testing.T) {
			var c hook.Chain
			var thirdRan bool
			_ = c.OnMessageSend(h, hook.Options{Name: "bad", Timeout: 20 * time.Millisecond})
			_ = c.OnMessageSend(hook.MessageSendFunc(func(context.Context, *hook.MessageSendInput) (hook.MessageSendResult, error) {
				thirdRan = true
				return hook.MessageSendResult{}, nil
			}), hook.Options{Name: "next"})
			rec := &hooktest.Recorder{}
			out := c.RunMessageSend(context.Background(), &hook.MessageSendInput{Turn: &hook.Turn{Observer: rec}})
			if !out.Failed || out.Hook != "bad" || out.Kind != events.HookCancel || out.Result.Action != hook.MessageSendCancel {
				t.Fatalf("outcome %+v", out)
			}
			if !failureCause[name](out.Err) {
				t.Fatalf("cause %v", out.Err)
			}
			var f *hook.Failure
			if !errors.As(out.Err, &f) || f.Hook != "bad" || f.Event != events.HookOnMessageSend {
				t.Fatalf("failure %#v", out.Err)
			}
			if out.Result.Reason != out.Err.Error() {
				t.Fatalf("reason %q", out.Result.Reason)
			}
			if thirdRan {
				t.Fatal("fail_closed must stop the chain")
			}
			ds := rec.Decisions()
			if len(ds) != 1 || !ds[0].Failed || ds[0].Result != events.HookCancel || ds[0].Reason != out.Err.Error() {
				t.Fatalf("decisions %+v", ds)
			}
		})
	}
}

func TestFailOpen(t *testing.T) {
	for name, h := range failures(t) {
		t.Run(name, func(t *testing.T) {
			var c hook.Chain
			_ = c.OnMessageSend(h, hook.Options{Name: "bad", Timeout: 20 * time.Millisecond, Failure: events.FailOpen})
			_ = c.OnMessageSend(hook.MessageSendFunc(func(_ context.Context, in *hook.MessageSendInput) (hook.MessageSendResult, error) {
				in.Messages = append(in.Messages, events.UserText("next ran"))
				return hook.MessageSendResult{}, nil
			}), hook.Options{Name: "next"})
			rec := &hooktest.Recorder{}
			in := &hook.MessageSendInput{Turn: &hook.Turn{Observer: rec}}
			out := c.RunMessageSend(context.Background(), in)
			if out.Failed || out.Stopped() || out.Kind != events.HookContinue {
				t.Fatalf("outcome %+v", out)
			}
			eq(t, "messages", texts(in.Messages), []string{"next ran"})
			eq(t, "trace", rec.Trace(), []string{"bad on_message_send continue (failed)", "next on_message_send continue"})
			// The reported reason names the cause in words.
			want := map[string]string{"error": "boom", "panic": "kaboom", "stuck": "timed out after 20ms", "polite": "timed out after 20ms"}[name]
			if r := rec.Decisions()[0].Reason; !strings.Contains(r, want) || !strings.HasPrefix(r, `hook "bad" (on_message_send) failed: `) {
				t.Fatalf("reason %q, want it to contain %q", r, want)
			}
		})
	}
}

func TestFailClosedOnEveryHookPoint(t *testing.T) {
	boom := errors.New("boom")
	ctx := context.Background()
	var c hook.Chain
	_ = c.BeforeToolCall(hooktest.Fail[hook.ToolCallInput, hook.BeforeToolCallResult](boom), hook.Options{Name: "b"})
	_ = c.AfterToolCall(hooktest.Fail[hook.ToolResultInput, hook.AfterToolCallResult](boom), hook.Options{Name: "a"})
	_ = c.OnTurnEnd(hooktest.Fail[hook.TurnEndInput, hook.TurnEndResult](boom), hook.Options{Name: "e"})
	rec := &hooktest.Recorder{}
	turn := &hook.Turn{Observer: rec}
	call := events.ToolCall{ID: "c9", Name: "t"}

	b := c.RunBeforeToolCall(ctx, &hook.ToolCallInput{Turn: turn, Call: call})
	if !b.Failed || b.Result.Action != hook.ToolAbort || b.Kind != events.HookAbort || !errors.Is(b.Err, boom) {
		t.Fatalf("before %+v", b)
	}
	a := c.RunAfterToolCall(ctx, &hook.ToolResultInput{Turn: turn, Call: call})
	if !a.Failed || a.Result.Action != hook.ResultAbort || a.Kind != events.HookAbort || !errors.Is(a.Err, boom) {
		t.Fatalf("after %+v", a)
	}
	e := c.RunTurnEnd(ctx, &hook.TurnEndInput{Turn: turn})
	if !e.Failed || e.Kind != events.HookAbort || e.Hook != "e" || !errors.Is(e.Err, boom) {
		t.Fatalf("turn end %+v", e)
	}
	var f *hook.Failure
	if !errors.As(b.Err, &f) || f.CallID != "c9" {
		t.Fatalf("failure %#v", b.Err)
	}
	ds := rec.Decisions()
	eq(t, "call ids", []string{ds[0].CallID, ds[1].CallID, ds[2].CallID}, []string{"c9", "c9", ""})
	eq(t, "trace", rec.Trace(), []string{"b before_tool_call abort (failed)", "a after_tool_call abort (failed)", "e on_turn_end abort (failed)"})
}

// A hook abandoned at its timeout keeps running, but what it does then
// reaches neither the input, nor the variables, nor the UI.
func TestAbandonedHookCannotTouchTheTurn(t *testing.T) {
	var c hook.Chain
	gate := make(chan struct{})
	finished := make(chan struct{})
	_ = c.OnMessageSend(hook.MessageSendFunc(func(_ context.Context, in *hook.MessageSendInput) (hook.MessageSendResult, error) {
		<-gate
		in.Messages[0].Content[0].Text = "tampered"
		in.Messages = append(in.Messages, events.UserText("late"))
		in.Turn.Vars["late"] = "yes"
		in.Turn.Emit(events.AssistantText("too late"))
		close(finished)
		return hook.MessageSendResult{}, nil
	}), hook.Options{Name: "slow", Timeout: 20 * time.Millisecond, Failure: events.FailOpen})
	rec := &hooktest.Recorder{}
	turn := &hook.Turn{Observer: rec, Vars: hook.Variables{"k": "v"}}
	in := &hook.MessageSendInput{Turn: turn, Messages: []events.Message{events.UserText("original")}}
	out := c.RunMessageSend(context.Background(), in)
	if out.Stopped() {
		t.Fatalf("fail_open timeout stopped: %+v", out)
	}
	close(gate)
	<-finished
	eq(t, "messages", texts(in.Messages), []string{"original"})
	eq(t, "vars", turn.Vars, hook.Variables{"k": "v"})
	eq(t, "ui messages", len(rec.Messages()), 0)
	if r := rec.Decisions()[0].Reason; !strings.Contains(r, "timed out after 20ms") {
		t.Fatalf("reason %q", r)
	}
}

func TestFailedHookChangesAreDropped(t *testing.T) {
	var c hook.Chain
	_ = c.BeforeToolCall(hook.BeforeToolCallFunc(func(_ context.Context, in *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
		in.Call.Input = json.RawMessage(`{"x":1}`)
		in.Turn.Vars["x"] = "1"
		return hook.BeforeToolCallResult{}, errors.New("half done")
	}), hook.Options{Name: "half", Failure: events.FailOpen})
	turn := &hook.Turn{}
	in := &hook.ToolCallInput{Turn: turn, Call: events.ToolCall{ID: "c", Name: "t", Input: json.RawMessage(`{}`)}}
	c.RunBeforeToolCall(context.Background(), in)
	eq(t, "input", string(in.Call.Input), `{}`)
	eq(t, "vars", len(turn.Vars), 0)
}

func TestChainTimeoutDefaults(t *testing.T) {
	block := release(t)
	stuck := hook.TurnEndFunc(func(context.Context, *hook.TurnEndInput) (hook.TurnEndResult, error) {
		<-block
		return hook.TurnEndResult{}, nil
	})
	c := hook.Chain{Timeout: 20 * time.Millisecond}
	_ = c.OnTurnEnd(stuck, hook.Options{Name: "stuck"})
	out := c.RunTurnEnd(context.Background(), &hook.TurnEndInput{})
	if !out.Failed || !errors.Is(out.Err, hook.ErrTimeout) {
		t.Fatalf("chain timeout not applied: %+v", out)
	}

	// Negative: no timeout; the hook answers after a while.
	c2 := hook.Chain{Timeout: -1}
	started := make(chan struct{})
	answer := make(chan struct{})
	_ = c2.OnTurnEnd(hook.TurnEndFunc(func(ctx context.Context, _ *hook.TurnEndInput) (hook.TurnEndResult, error) {
		if _, has := ctx.Deadline(); has {
			return hook.TurnEndResult{}, errors.New("unexpected deadline")
		}
		close(started)
		<-answer
		return hook.TurnEndResult{Action: hook.TurnPause}, nil
	}), hook.Options{Name: "patient"})
	done := make(chan hook.Outcome[hook.TurnEndResult])
	go func() { done <- c2.RunTurnEnd(context.Background(), &hook.TurnEndInput{}) }()
	<-started
	close(answer)
	if out := <-done; out.Kind != events.HookPause || out.Failed {
		t.Fatalf("no-timeout hook: %+v", out)
	}

	// Default: DefaultTimeout is the deadline.
	var c3 hook.Chain
	_ = c3.OnTurnEnd(hook.TurnEndFunc(func(ctx context.Context, _ *hook.TurnEndInput) (hook.TurnEndResult, error) {
		dl, ok := ctx.Deadline()
		if !ok || time.Until(dl) > hook.DefaultTimeout || time.Until(dl) < hook.DefaultTimeout/2 {
			return hook.TurnEndResult{}, fmt.Errorf("deadline %v", dl)
		}
		return hook.TurnEndResult{}, nil
	}), hook.Options{})
	if out := c3.RunTurnEnd(context.Background(), &hook.TurnEndInput{}); out.Failed {
		t.Fatalf("default timeout: %v", out.Err)
	}
}

func TestCallerCancelStopsWhateverThePolicy(t *testing.T) {
	var c hook.Chain
	ctx, cancel := context.WithCancel(context.Background())
	block := release(t)
	var nextRan bool
	_ = c.BeforeToolCall(hook.BeforeToolCallFunc(func(context.Context, *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
		cancel()
		<-block // ignores ctx
		return hook.BeforeToolCallResult{}, nil
	}), hook.Options{Name: "slow", Failure: events.FailOpen, Timeout: -1})
	_ = c.BeforeToolCall(hook.BeforeToolCallFunc(func(context.Context, *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
		nextRan = true
		return hook.BeforeToolCallResult{}, nil
	}), hook.Options{Name: "next"})
	out := c.RunBeforeToolCall(ctx, &hook.ToolCallInput{Call: events.ToolCall{ID: "c", Name: "t"}})
	if !out.Failed || !errors.Is(out.Err, context.Canceled) || out.Hook != "slow" || out.Result.Action != hook.ToolAbort {
		t.Fatalf("outcome %+v", out)
	}
	if nextRan {
		t.Fatal("chain went on after the caller cancelled")
	}
	// Already cancelled: no hook runs.
	out = c.RunBeforeToolCall(ctx, &hook.ToolCallInput{Call: events.ToolCall{ID: "c", Name: "t"}})
	if !out.Failed || out.Hook != "" || !errors.Is(out.Err, context.Canceled) || nextRan {
		t.Fatalf("pre-cancelled outcome %+v", out)
	}
}

func TestOnAbortRunsAllAndIgnoresCancel(t *testing.T) {
	var c hook.Chain
	var ran []string
	note := func(name string, err error) hook.AbortFunc {
		return func(ctx context.Context, in *hook.AbortInput) (hook.AbortResult, error) {
			if ctx.Err() != nil {
				return hook.AbortResult{}, fmt.Errorf("ctx already done: %w", ctx.Err())
			}
			ran = append(ran, name+":"+in.Reason)
			return hook.AbortResult{}, err
		}
	}
	e1, e2 := errors.New("e1"), errors.New("e2")
	_ = c.OnAbort(note("a", e1), hook.Options{Name: "a"})
	_ = c.OnAbort(note("b", nil), hook.Options{Name: "b"})
	_ = c.OnAbort(hook.AbortFunc(func(context.Context, *hook.AbortInput) (hook.AbortResult, error) { panic("p") }), hook.Options{Name: "p"})
	_ = c.OnAbort(note("c", e2), hook.Options{Name: "c"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := &hooktest.Recorder{}
	out := c.RunAbort(ctx, &hook.AbortInput{Turn: &hook.Turn{Observer: rec}, Reason: "user cancelled"})
	eq(t, "ran", ran, []string{"a:user cancelled", "b:user cancelled", "c:user cancelled"})
	if !out.Failed || !errors.Is(out.Err, e1) || !errors.Is(out.Err, e2) || !errors.Is(out.Err, hook.ErrPanic) {
		t.Fatalf("outcome %+v", out)
	}
	eq(t, "trace", rec.Trace(), []string{
		"a on_abort continue (failed)", "b on_abort continue", "p on_abort continue (failed)", "c on_abort continue (failed)"})
}

func TestVariablesSharedAcrossHookPoints(t *testing.T) {
	var c hook.Chain
	_ = c.OnMessageSend(hook.MessageSendFunc(func(_ context.Context, in *hook.MessageSendInput) (hook.MessageSendResult, error) {
		in.Turn.Vars["step"] = fmt.Sprint(in.Turn.Step)
		return hook.MessageSendResult{}, nil
	}), hook.Options{})
	_ = c.BeforeToolCall(hook.BeforeToolCallFunc(func(_ context.Context, in *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
		in.Turn.Vars["calls"] += in.Call.Name + ","
		return hook.BeforeToolCallResult{}, nil
	}), hook.Options{})
	_ = c.AfterToolCall(hook.AfterToolCallFunc(func(_ context.Context, in *hook.ToolResultInput) (hook.AfterToolCallResult, error) {
		in.Result.Content += " (step " + in.Turn.Vars.Get("step") + ")"
		delete(in.Turn.Vars, "step")
		return hook.AfterToolCallResult{}, nil
	}), hook.Options{})
	var final hook.Variables
	_ = c.OnTurnEnd(hook.TurnEndFunc(func(_ context.Context, in *hook.TurnEndInput) (hook.TurnEndResult, error) {
		final = in.Turn.Vars.Clone()
		return hook.TurnEndResult{}, nil
	}), hook.Options{})

	ctx := context.Background()
	turn := &hook.Turn{ID: "t", Step: 1}
	c.RunMessageSend(ctx, &hook.MessageSendInput{Turn: turn})
	for _, n := range []string{"a", "b"} {
		c.RunBeforeToolCall(ctx, &hook.ToolCallInput{Turn: turn, Call: events.ToolCall{ID: n, Name: n}})
	}
	res := &hook.ToolResultInput{Turn: turn, Result: events.ToolResult{ToolUseID: "a", Content: "ok"}}
	c.RunAfterToolCall(ctx, res)
	c.RunTurnEnd(ctx, &hook.TurnEndInput{Turn: turn})
	eq(t, "result", res.Result.Content, "ok (step 1)")
	eq(t, "vars at turn end", final, hook.Variables{"calls": "a,b,"})
	eq(t, "turn vars", turn.Vars, hook.Variables{"calls": "a,b,"})
}

func TestEmit(t *testing.T) {
	var c hook.Chain
	_ = c.AfterToolCall(hook.AfterToolCallFunc(func(_ context.Context, in *hook.ToolResultInput) (hook.AfterToolCallResult, error) {
		if in.Turn.Hook() != "notify" || in.Turn.Event() != events.HookAfterToolCall {
			return hook.AfterToolCallResult{}, fmt.Errorf("view names %q %q", in.Turn.Hook(), in.Turn.Event())
		}
		in.Turn.Emit(events.AssistantText("file changed: a.go"), events.AssistantText("second"))
		in.Turn.Emit() // nothing
		return hook.AfterToolCallResult{}, nil
	}), hook.Options{Name: "notify"})
	var order []string
	obs := hook.ObserverFuncs{
		Decision: func(d events.HookDecision) { order = append(order, "decision "+d.Hook) },
		Message: func(m events.HookMessage) {
			order = append(order, fmt.Sprintf("message %s %s %v", m.Hook, m.Event, texts(m.Messages)))
		},
	}
	out := c.RunAfterToolCall(context.Background(), &hook.ToolResultInput{Turn: &hook.Turn{Observer: obs}, Call: events.ToolCall{ID: "c", Name: "Edit"}})
	if out.Failed {
		t.Fatal(out.Err)
	}
	eq(t, "order", order, []string{"message notify after_tool_call [file changed: a.go second]", "decision notify"})

	// Outside a hook: no hook name; nil turn and nil observer are fine.
	rec := &hooktest.Recorder{}
	turn := &hook.Turn{Observer: rec}
	turn.Emit(events.AssistantText("from the worker"))
	eq(t, "outside", rec.Messages(), []events.HookMessage{{Messages: []events.Message{events.AssistantText("from the worker")}}})
	eq(t, "hook name outside", turn.Hook()+string(turn.Event()), "")
	var nilTurn *hook.Turn
	nilTurn.Emit(events.AssistantText("x"))
	eq(t, "nil turn hook", nilTurn.Hook()+string(nilTurn.Event()), "")
	(&hook.Turn{}).Emit(events.AssistantText("x"))
	hook.ObserverFuncs{}.HookDecision(events.HookDecision{})
	hook.ObserverFuncs{}.HookMessage(events.HookMessage{})
}

func TestNilTurnAndNilVars(t *testing.T) {
	var c hook.Chain
	_ = c.OnMessageSend(hook.MessageSendFunc(func(_ context.Context, in *hook.MessageSendInput) (hook.MessageSendResult, error) {
		in.Turn.Vars["ok"] = "1" // the chain always gives hooks a map
		return hook.MessageSendResult{}, nil
	}), hook.Options{})
	if out := c.RunMessageSend(context.Background(), &hook.MessageSendInput{}); out.Failed {
		t.Fatal(out.Err)
	}
	turn := &hook.Turn{}
	c.RunMessageSend(context.Background(), &hook.MessageSendInput{Turn: turn})
	eq(t, "vars", turn.Vars, hook.Variables{"ok": "1"})
}

func TestDecisionFields(t *testing.T) {
	var c hook.Chain
	_ = c.BeforeToolCall(hooktest.Always[hook.ToolCallInput](hook.BeforeToolCallResult{Action: hook.ToolSkip, Reason: "not allowed"}), hook.Options{Name: "deny"})
	rec := &hooktest.Recorder{}
	c.RunBeforeToolCall(context.Background(), &hook.ToolCallInput{Turn: &hook.Turn{Observer: rec}, Call: events.ToolCall{ID: "call_1", Name: "rm"}})
	ds := rec.Decisions()
	if len(ds) != 1 || ds[0].MS < 0 {
		t.Fatalf("decisions %+v", ds)
	}
	ds[0].MS = 0
	eq(t, "decision", ds[0], events.HookDecision{Hook: "deny", Event: events.HookBeforeToolCall, Result: events.HookSkip, Reason: "not allowed", CallID: "call_1"})
}

// Hooks added or removed during a hook point take effect at the next one.
func TestSnapshotPerHookPoint(t *testing.T) {
	var c hook.Chain
	var ran []string
	named := func(n string) hook.BeforeToolCallFunc {
		return func(context.Context, *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
			ran = append(ran, n)
			return hook.BeforeToolCallResult{}, nil
		}
	}
	_ = c.BeforeToolCall(hook.BeforeToolCallFunc(func(context.Context, *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
		ran = append(ran, "A")
		if c.Remove("B") {
			_ = c.BeforeToolCall(named("C"), hook.Options{Name: "C"})
		}
		return hook.BeforeToolCallResult{}, nil
	}), hook.Options{Name: "A"})
	_ = c.BeforeToolCall(named("B"), hook.Options{Name: "B"})
	c.RunBeforeToolCall(context.Background(), &hook.ToolCallInput{})
	c.RunBeforeToolCall(context.Background(), &hook.ToolCallInput{})
	eq(t, "ran", ran, []string{"A", "B", "A", "C"})
}

func TestConcurrentAddRemoveWhileRunning(t *testing.T) {
	var c hook.Chain
	_ = c.BeforeToolCall(hook.BeforeToolCallFunc(func(_ context.Context, in *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
		in.Turn.Vars["n"] += "x"
		return hook.BeforeToolCallResult{}, nil
	}), hook.Options{Name: "fixed", Priority: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("w%d-%d", w, i%5)
				_ = c.BeforeToolCall(hooktest.Always[hook.ToolCallInput](hook.BeforeToolCallResult{}), hook.Options{Name: name, Replace: true, Matcher: "t"})
				c.Remove(fmt.Sprintf("w%d-%d", w, (i+2)%5))
				_ = c.List()
			}
		})
	}
	var runners sync.WaitGroup
	for r := range 3 {
		runners.Go(func() {
			rec := &hooktest.Recorder{}
			turn := &hook.Turn{ID: fmt.Sprint(r), Observer: rec}
			for range 300 {
				out := c.RunBeforeToolCall(ctx, &hook.ToolCallInput{Turn: turn, Call: events.ToolCall{ID: "c", Name: "t"}})
				if out.Stopped() {
					t.Errorf("run stopped: %+v", out)
					return
				}
			}
			if got := len(turn.Vars["n"]); got != 300 {
				t.Errorf("fixed hook ran %d times, want 300", got)
			}
			if ds := rec.Decisions(); len(ds) < 300 || ds[0].Hook != "fixed" {
				t.Errorf("decisions %d", len(ds))
			}
		})
	}
	runners.Wait()
	cancel()
	wg.Wait()
}

func TestActionsKindsStringsAndParse(t *testing.T) {
	eq(t, "send kinds", []events.HookResultKind{hook.MessageSendContinue.Kind(), hook.MessageSendCancel.Kind(), hook.MessageSendAction(7).Kind()},
		[]events.HookResultKind{"continue", "cancel", ""})
	eq(t, "before kinds", []string{hook.ToolContinue.String(), hook.ToolSkip.String(), hook.ToolAbort.String(), hook.ToolPause.String(), hook.BeforeToolCallAction(9).String()},
		[]string{"continue", "skip", "abort", "pause", "invalid(9)"})
	eq(t, "after kinds", []string{hook.ResultContinue.String(), hook.ResultAbort.String(), hook.AfterToolCallAction(5).String()},
		[]string{"continue", "abort", "invalid(5)"})
	eq(t, "end kinds", []string{hook.TurnFinish.String(), hook.TurnContinueWithMessages.String(), hook.TurnPause.String(), hook.TurnEndAction(4).String()},
		[]string{"finish", "continue_with_messages", "pause", "invalid(4)"})
	eq(t, "send string", hook.MessageSendCancel.String(), "cancel")

	// Every wire result parses exactly where docs/protocol.md §7 allows it.
	all := []events.HookResultKind{"", events.HookContinue, events.HookCancel, events.HookSkip, events.HookAbort,
		events.HookPause, events.HookFinish, events.HookContinueWithMessages, "bogus"}
	parsers := map[events.HookEvent]func(events.HookResultKind) (events.HookResultKind, error){
		events.HookOnMessageSend: func(k events.HookResultKind) (events.HookResultKind, error) {
			a, err := hook.ParseMessageSendAction(k)
			return a.Kind(), err
		},
		events.HookBeforeToolCall: func(k events.HookResultKind) (events.HookResultKind, error) {
			a, err := hook.ParseBeforeToolCallAction(k)
			return a.Kind(), err
		},
		events.HookAfterToolCall: func(k events.HookResultKind) (events.HookResultKind, error) {
			a, err := hook.ParseAfterToolCallAction(k)
			return a.Kind(), err
		},
		events.HookOnTurnEnd: func(k events.HookResultKind) (events.HookResultKind, error) {
			a, err := hook.ParseTurnEndAction(k)
			return a.Kind(), err
		},
	}
	allowed := map[events.HookEvent][]events.HookResultKind{
		events.HookOnMessageSend:  {"continue", "cancel"},
		events.HookBeforeToolCall: {"continue", "skip", "abort", "pause"},
		events.HookAfterToolCall:  {"continue", "abort"},
		events.HookOnTurnEnd:      {"finish", "continue_with_messages", "pause"},
	}
	for ev, parse := range parsers {
		for _, k := range all {
			got, err := parse(k)
			want := k
			if k == "" {
				want = allowed[ev][0] // "" is the go-on result
			}
			if slices.Contains(allowed[ev], want) {
				if err != nil || got != want {
					t.Errorf("%s %q: got %q, %v", ev, k, got, err)
				}
			} else if !errors.Is(err, hook.ErrInvalidResult) {
				t.Errorf("%s %q: err %v, want ErrInvalidResult", ev, k, err)
			}
		}
	}
}

func TestRecorderReset(t *testing.T) {
	rec := &hooktest.Recorder{}
	rec.HookDecision(events.HookDecision{Hook: "h"})
	rec.HookMessage(events.HookMessage{Hook: "h"})
	rec.Reset()
	if len(rec.Decisions())+len(rec.Messages())+len(rec.Trace()) != 0 {
		t.Fatal("Reset kept records")
	}
}

func TestReplaceKeepsPlace(t *testing.T) {
	var c hook.Chain
	for _, n := range []string{"a", "b", "c"} {
		_ = c.OnMessageSend(hooktest.Always[hook.MessageSendInput](hook.MessageSendResult{}), hook.Options{Name: n})
	}
	_ = c.OnMessageSend(hooktest.Always[hook.MessageSendInput](hook.MessageSendResult{Action: hook.MessageSendCancel}), hook.Options{Name: "b", Replace: true})
	var got []string
	for _, i := range c.List() {
		got = append(got, i.Name)
	}
	eq(t, "order", got, []string{"a", "b", "c"})
	out := c.RunMessageSend(context.Background(), &hook.MessageSendInput{})
	eq(t, "replaced hook decides", out.Hook, "b")
}

// TestHasMessageSendAndTurnEnd: the worker skips copying the context for
// a hook point only while no hook of it is registered.
func TestHasMessageSendAndTurnEnd(t *testing.T) {
	c := &hook.Chain{}
	if c.HasMessageSend() || c.HasTurnEnd() {
		t.Fatal("an empty chain reports hooks")
	}
	if err := c.OnMessageSend(hooktest.Always[hook.MessageSendInput](hook.MessageSendResult{}), hook.Options{Name: "send"}); err != nil {
		t.Fatal(err)
	}
	if !c.HasMessageSend() || c.HasTurnEnd() {
		t.Fatalf("after OnMessageSend: HasMessageSend %v, HasTurnEnd %v; want true, false", c.HasMessageSend(), c.HasTurnEnd())
	}
	if err := c.OnTurnEnd(hooktest.Always[hook.TurnEndInput](hook.TurnEndResult{Action: hook.TurnFinish}), hook.Options{Name: "end"}); err != nil {
		t.Fatal(err)
	}
	if !c.HasTurnEnd() {
		t.Fatal("after OnTurnEnd: HasTurnEnd false")
	}
	c.Remove("send")
	c.Remove("end")
	if c.HasMessageSend() || c.HasTurnEnd() {
		t.Fatal("hooks reported after both were removed")
	}
}

// TestHasBeforeAndAfterToolCall: the worker skips building the tool hook
// inputs only while no hook of that point is registered, whatever tool
// the hook matches.
func TestHasBeforeAndAfterToolCall(t *testing.T) {
	c := &hook.Chain{}
	if c.HasBeforeToolCall() || c.HasAfterToolCall() {
		t.Fatal("an empty chain reports tool hooks")
	}
	if err := c.BeforeToolCall(hooktest.Always[hook.ToolCallInput](hook.BeforeToolCallResult{}), hook.Options{Name: "before", Matcher: "^other$"}); err != nil {
		t.Fatal(err)
	}
	if !c.HasBeforeToolCall() || c.HasAfterToolCall() {
		t.Fatalf("after BeforeToolCall: HasBeforeToolCall %v, HasAfterToolCall %v; want true, false", c.HasBeforeToolCall(), c.HasAfterToolCall())
	}
	if err := c.AfterToolCall(hooktest.Always[hook.ToolResultInput](hook.AfterToolCallResult{}), hook.Options{Name: "after"}); err != nil {
		t.Fatal(err)
	}
	if !c.HasAfterToolCall() {
		t.Fatal("after AfterToolCall: HasAfterToolCall false")
	}
	c.Remove("before")
	if c.HasBeforeToolCall() || !c.HasAfterToolCall() {
		t.Fatalf("after removing before: HasBeforeToolCall %v, HasAfterToolCall %v; want false, true", c.HasBeforeToolCall(), c.HasAfterToolCall())
	}
	c.Remove("after")
	if c.HasAfterToolCall() {
		t.Fatal("after hook reported after it was removed")
	}
}
