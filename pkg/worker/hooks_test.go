package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooktest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

type (
	sendIn    = hook.MessageSendInput
	sendOut   = hook.MessageSendResult
	beforeIn  = hook.ToolCallInput
	beforeOut = hook.BeforeToolCallResult
	afterIn   = hook.ToolResultInput
	afterOut  = hook.AfterToolCallResult
	endIn     = hook.TurnEndInput
	endOut    = hook.TurnEndResult
	abortIn   = hook.AbortInput
	abortOut  = hook.AbortResult
)

type chainT struct {
	t *testing.T
	c *hook.Chain
}

type opt func(*hook.Options)

func matcher(re string) opt              { return func(o *hook.Options) { o.Matcher = re } }
func timeout(d time.Duration) opt        { return func(o *hook.Options) { o.Timeout = d } }
func failure(p events.FailurePolicy) opt { return func(o *hook.Options) { o.Failure = p } }
func options(name string, os []opt) hook.Options {
	o := hook.Options{Name: name}
	for _, f := range os {
		f(&o)
	}
	return o
}

func chainWith(t *testing.T, f func(c *chainT)) *hook.Chain {
	t.Helper()
	c := &chainT{t: t, c: &hook.Chain{}}
	f(c)
	return c.c
}

func (c *chainT) check(err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
}

func (c *chainT) send(name string, f hook.MessageSendFunc, o ...opt) {
	c.check(c.c.OnMessageSend(f, options(name, o)))
}
func (c *chainT) before(name string, f hook.BeforeToolCallFunc, o ...opt) {
	c.check(c.c.BeforeToolCall(f, options(name, o)))
}
func (c *chainT) after(name string, f hook.AfterToolCallFunc, o ...opt) {
	c.check(c.c.AfterToolCall(f, options(name, o)))
}
func (c *chainT) end(name string, f hook.TurnEndFunc, o ...opt) {
	c.check(c.c.OnTurnEnd(f, options(name, o)))
}
func (c *chainT) abort(name string, f hook.AbortFunc, o ...opt) {
	c.check(c.c.OnAbort(f, options(name, o)))
}

func beforeContinue(context.Context, *beforeIn) (beforeOut, error) { return beforeOut{}, nil }

// abortLog records the on_abort calls.
type abortLog struct {
	mu      sync.Mutex
	reasons []string
}

func (l *abortLog) hook(_ context.Context, in *abortIn) (abortOut, error) {
	l.mu.Lock()
	l.reasons = append(l.reasons, in.Reason)
	l.mu.Unlock()
	return abortOut{}, nil
}

func (l *abortLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reasons)
}

func decisionTrace(rec *recorder) []string {
	var out []string
	for _, d := range rec.ofType(events.TypeHookDecision) {
		hd := d.(events.HookDecision)
		s := hd.Hook + " " + string(hd.Event) + " " + string(hd.Result)
		if hd.Failed {
			s += " (failed)"
		}
		out = append(out, s)
	}
	return out
}

// --- on_message_send ---------------------------------------------------

// TimestampHook of docs/architecture.md#hooks: it changes the context sent to the
// model, not the transcript.
func TestMessageSendContinueChangesContext(t *testing.T) {
	chain := chainWith(t, func(c *chainT) {
		c.send("timestamp", func(_ context.Context, in *sendIn) (sendOut, error) {
			in.Messages = append([]events.Message{events.UserText("[2025-01-01T00:00:00Z]")}, in.Messages...)
			return sendOut{}, nil
		})
	})
	p := newScripted(textStep("hi"))
	w := mustNew(t, worker.Config{Provider: p, Hooks: chain})
	res := mustRun(t, w, events.UserText("hello"))
	if res.Status != worker.StatusCompleted {
		t.Fatal(res.Reason)
	}
	got := p.requests()[0].Messages
	want := []events.Message{events.UserText("[2025-01-01T00:00:00Z]"), events.UserText("hello")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sent %s", jsonString(t, got))
	}
	if !reflect.DeepEqual(res.Messages, []events.Message{events.UserText("hello"), events.AssistantText("hi")}) {
		t.Fatalf("transcript %s", jsonString(t, res.Messages))
	}
}

func TestMessageSendCancel(t *testing.T) {
	var aborts abortLog
	chain := chainWith(t, func(c *chainT) {
		c.send("guard", func(context.Context, *sendIn) (sendOut, error) {
			return sendOut{Action: hook.MessageSendCancel, Reason: "secret in prompt"}, nil
		})
		c.abort("log", aborts.hook)
	})
	p := newScripted()
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Hooks: chain, Observer: rec})
	res := mustRun(t, w, events.UserText("my password is x"))
	if res.Status != worker.StatusAborted || res.Code != worker.CodeHookCancel || res.Hook != "guard" {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(res.Reason, `"guard"`) || !strings.Contains(res.Reason, "secret in prompt") {
		t.Fatalf("reason %q", res.Reason)
	}
	if !errors.Is(res.Err(), worker.ErrHookAbort) {
		t.Fatalf("err %v", res.Err())
	}
	if len(p.requests()) != 0 {
		t.Fatal("the model was called")
	}
	if got := aborts.get(); len(got) != 1 || got[0] != res.Reason {
		t.Fatalf("on_abort %v", got)
	}
	want := []string{"turn.started", "hook.decision", "hook.decision", "turn.aborted"}
	if got := rec.types(); !slices.Equal(got, want) {
		t.Fatalf("events %v", got)
	}
	if d := rec.ofType(events.TypeTurnAborted)[0].(events.TurnAborted); d.Code != "hook_cancel" || d.Reason != res.Reason {
		t.Fatalf("turn.aborted %+v", d)
	}
}

// --- before_tool_call ----------------------------------------------------

func TestBeforeToolCallContinueRewritesInput(t *testing.T) {
	var got atomic.Value
	echo := tool.Must("echo", "echo", func(_ context.Context, a struct {
		Text string `json:"text"`
	}) (string, error) {
		got.Store(a.Text)
		return a.Text, nil
	})
	chain := chainWith(t, func(c *chainT) {
		c.before("sanitize", func(_ context.Context, in *beforeIn) (beforeOut, error) {
			if in.Tool.Name != "echo" || in.Impl == nil || in.Turn.Step != 1 {
				t.Errorf("hook input %+v", in)
			}
			in.Call.Input = json.RawMessage(`{"text":"[redacted]"}`)
			in.Call.ID = "hijack" // ignored: the id ties the result to the call
			return beforeOut{}, nil
		})
	})
	p := newScripted(toolStep(call{"c1", "echo", `{"text":"secret"}`}), textStep("ok"))
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{echo}, Hooks: chain})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusCompleted || got.Load() != "[redacted]" {
		t.Fatalf("status %s, tool got %v", res.Status, got.Load())
	}
	if want := events.ToolResultPart("c1", "[redacted]", false); !reflect.DeepEqual(res.Messages[2].Content[0], want) {
		t.Fatalf("result %s", jsonString(t, res.Messages[2]))
	}
}

// ToolBlocker of docs/architecture.md#hooks: a skipped call is an error result naming
// the hook, and the tool does not run.
func TestBeforeToolCallSkip(t *testing.T) {
	var ran atomic.Int32
	rm := tool.Must("rm", "remove", func(context.Context, struct{}) (string, error) { ran.Add(1); return "gone", nil })
	blocked := map[string]bool{"rm": true}
	chain := chainWith(t, func(c *chainT) {
		c.before("blocker", func(_ context.Context, in *beforeIn) (beforeOut, error) {
			if blocked[in.Call.Name] {
				return beforeOut{Action: hook.ToolSkip, Reason: "dangerous"}, nil
			}
			return beforeOut{}, nil
		})
	})
	rec := &recorder{}
	p := newScripted(toolStep(call{"c1", "rm", `{}`}, call{"c2", "get_weather", `{"city":"Oslo"}`}), textStep("ok"))
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{rm, weatherTool(t, nil)}, Hooks: chain, Observer: rec})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusCompleted || ran.Load() != 0 {
		t.Fatalf("status %s ran %d", res.Status, ran.Load())
	}
	r := res.Messages[2].Content
	if !r[0].IsError || !strings.Contains(r[0].Content, `"blocker"`) || !strings.Contains(r[0].Content, "dangerous") || r[0].ToolUseID != "c1" {
		t.Fatalf("skip result %+v", r[0])
	}
	if r[1].IsError || r[1].Content != "sunny in Oslo" {
		t.Fatalf("other result %+v", r[1])
	}
	sk := rec.ofType(events.TypeToolSkipped)
	if len(sk) != 1 || sk[0].(events.ToolSkipped).Hook != "blocker" || sk[0].(events.ToolSkipped).CallID != "c1" {
		t.Fatalf("tool.skipped %+v", sk)
	}
	if n := len(rec.ofType(events.TypeToolStarted)); n != 1 {
		t.Fatalf("%d tool.started", n)
	}
}

func TestBeforeToolCallAbort(t *testing.T) {
	var ran atomic.Int32
	var aborts abortLog
	chain := chainWith(t, func(c *chainT) {
		c.before("policy", func(_ context.Context, in *beforeIn) (beforeOut, error) {
			if in.Call.ID == "c2" {
				return beforeOut{Action: hook.ToolAbort, Reason: "not allowed"}, nil
			}
			return beforeOut{}, nil
		})
		c.abort("log", aborts.hook)
	})
	p := newScripted(toolStep(call{"c1", "get_weather", `{"city":"A"}`}, call{"c2", "get_weather", `{"city":"B"}`}))
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, &ran)}, Hooks: chain})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusAborted || res.Code != worker.CodeHookAbort || res.Hook != "policy" || !errors.Is(res.Err(), worker.ErrHookAbort) {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(res.Reason, "not allowed") || !strings.Contains(res.Reason, `"policy"`) {
		t.Fatalf("reason %q", res.Reason)
	}
	if ran.Load() != 0 {
		t.Fatal("a tool ran although the turn aborted before execution")
	}
	if len(aborts.get()) != 1 {
		t.Fatalf("on_abort %v", aborts.get())
	}
}

// --- after_tool_call -----------------------------------------------------

// ResultFormatter of docs/architecture.md#hooks.
func TestAfterToolCallContinueChangesResult(t *testing.T) {
	chain := chainWith(t, func(c *chainT) {
		c.after("formatter", func(_ context.Context, in *afterIn) (afterOut, error) {
			if !in.Result.IsError {
				in.Result.Content = "[OK] " + in.Result.Content
			}
			return afterOut{}, nil
		})
	})
	rec := &recorder{}
	p := newScripted(toolStep(call{"c1", "get_weather", `{"city":"Oslo"}`}, call{"c2", "nope", `{}`}), textStep("ok"))
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, nil)}, Hooks: chain, Observer: rec})
	res := mustRun(t, w, events.UserText("go"))
	r := res.Messages[2].Content
	if r[0].Content != "[OK] sunny in Oslo" {
		t.Fatalf("result %+v", r[0])
	}
	// The UI sees the result the model reads.
	if tr := rec.ofType(events.TypeToolResult); tr[1].(events.ToolCallResult).Content != "[OK] sunny in Oslo" {
		t.Fatalf("tool.result %+v", tr)
	}
}

func TestAfterToolCallAbort(t *testing.T) {
	var aborts abortLog
	chain := chainWith(t, func(c *chainT) {
		c.after("leak-check", func(context.Context, *afterIn) (afterOut, error) {
			return afterOut{Action: hook.ResultAbort, Reason: "result leaks a key"}, nil
		})
		c.abort("log", aborts.hook)
	})
	p := newScripted(toolStep(call{"c1", "get_weather", `{"city":"Oslo"}`}))
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, nil)}, Hooks: chain})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusAborted || res.Code != worker.CodeHookAbort || res.Hook != "leak-check" {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(res.Reason, "result leaks a key") || len(aborts.get()) != 1 {
		t.Fatalf("reason %q aborts %v", res.Reason, aborts.get())
	}
	// The unsettled result is not in the transcript.
	if n := len(res.Messages); n != 2 {
		t.Fatalf("transcript %s", jsonString(t, res.Messages))
	}
}

// --- on_turn_end ---------------------------------------------------------

// JsonValidator of docs/architecture.md#hooks: a non-JSON answer is sent back for a
// fix.
func TestTurnEndContinueWithMessages(t *testing.T) {
	chain := chainWith(t, func(c *chainT) {
		c.end("json", func(_ context.Context, in *endIn) (endOut, error) {
			last := in.Messages[len(in.Messages)-1]
			if last.Role == events.RoleAssistant && !json.Valid([]byte(last.Text())) {
				return endOut{Action: hook.TurnContinueWithMessages,
					Messages: []events.Message{events.UserText("Invalid JSON. Please fix and try again.")}}, nil
			}
			return endOut{}, nil
		})
	})
	p := newScripted(textStep("{oops"), textStep(`{"ok":true}`))
	w := mustNew(t, worker.Config{Provider: p, Hooks: chain})
	res := mustRun(t, w, events.UserText("json please"))
	if res.Status != worker.StatusCompleted || res.Text() != `{"ok":true}` || res.Steps != 2 {
		t.Fatalf("result %+v", res)
	}
	want := []events.Message{events.UserText("json please"), events.AssistantText("{oops"),
		events.UserText("Invalid JSON. Please fix and try again.")}
	if got := p.requests()[1].Messages; !reflect.DeepEqual(got, want) {
		t.Fatalf("retry request %s", jsonString(t, got))
	}
}

func TestTurnEndRetryBound(t *testing.T) {
	var aborts abortLog
	chain := chainWith(t, func(c *chainT) {
		c.end("never-happy", func(context.Context, *endIn) (endOut, error) {
			return endOut{Action: hook.TurnContinueWithMessages, Messages: []events.Message{events.UserText("again")}}, nil
		})
		c.abort("log", aborts.hook)
	})
	p := newScripted(textStep("1"), textStep("2"), textStep("3"))
	w := mustNew(t, worker.Config{Provider: p, Hooks: chain, MaxTurnEndRetries: 2})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusFailed || res.Code != worker.CodeMaxTurnEndRetries || !errors.Is(res.Err(), worker.ErrMaxTurnEndRetries) {
		t.Fatalf("result %+v", res)
	}
	if len(p.requests()) != 3 {
		t.Fatalf("%d model calls, want 1 + 2 retries", len(p.requests()))
	}
	if !strings.Contains(res.Reason, "max_turn_end_retries (2)") || !strings.Contains(res.Reason, `"never-happy"`) || res.Hook != "never-happy" {
		t.Fatalf("reason %q", res.Reason)
	}
	if len(aborts.get()) != 1 {
		t.Fatalf("on_abort %v", aborts.get())
	}
}

func TestTurnEndNoRetries(t *testing.T) {
	chain := chainWith(t, func(c *chainT) {
		c.end("h", func(context.Context, *endIn) (endOut, error) {
			return endOut{Action: hook.TurnContinueWithMessages}, nil
		})
	})
	p := newScripted(textStep("1"))
	w := mustNew(t, worker.Config{Provider: p, Hooks: chain, MaxTurnEndRetries: worker.NoRetries})
	res := mustRun(t, w, events.UserText("go"))
	if res.Code != worker.CodeMaxTurnEndRetries || !strings.Contains(res.Reason, "max_turn_end_retries (0)") {
		t.Fatalf("result %+v", res)
	}
}

func TestTurnEndInvalidMessages(t *testing.T) {
	chain := chainWith(t, func(c *chainT) {
		c.end("bad", func(context.Context, *endIn) (endOut, error) {
			return endOut{Action: hook.TurnContinueWithMessages, Messages: []events.Message{{Role: "robot"}}}, nil
		})
	})
	w := mustNew(t, worker.Config{Provider: newScripted(textStep("1")), Hooks: chain})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusAborted || res.Code != worker.CodeHookFailed || !strings.Contains(res.Reason, "invalid messages") {
		t.Fatalf("result %+v", res)
	}
}

func TestMaxStepsWithTurnEndRetries(t *testing.T) {
	chain := chainWith(t, func(c *chainT) {
		c.end("more", func(context.Context, *endIn) (endOut, error) {
			return endOut{Action: hook.TurnContinueWithMessages, Messages: []events.Message{events.UserText("more")}}, nil
		})
	})
	w := mustNew(t, worker.Config{Provider: newScripted(textStep("1"), textStep("2")), Hooks: chain, MaxSteps: 2, MaxTurnEndRetries: 5})
	res := mustRun(t, w, events.UserText("go"))
	if res.Code != worker.CodeMaxSteps || !strings.Contains(res.Reason, "max_steps (2)") || !strings.Contains(res.Reason, `"more"`) {
		t.Fatalf("result %+v", res)
	}
}

// --- chains, matchers, timeouts, failure policies --------------------------

func TestChainOfThreeHooks(t *testing.T) {
	var seen []string
	var mu sync.Mutex
	mark := func(name string, out beforeOut) hook.BeforeToolCallFunc {
		return func(_ context.Context, in *beforeIn) (beforeOut, error) {
			mu.Lock()
			seen = append(seen, name+":"+string(in.Call.Input))
			mu.Unlock()
			in.Call.Input = json.RawMessage(`{"city":"` + name + `"}`)
			in.Turn.Vars["last"] = name
			return out, nil
		}
	}
	t.Run("continue passes changes on", func(t *testing.T) {
		seen = nil
		rec := &recorder{}
		chain := chainWith(t, func(c *chainT) {
			c.before("A", mark("A", beforeOut{}))
			c.before("B", mark("B", beforeOut{}))
			c.before("C", mark("C", beforeOut{}))
		})
		p := newScripted(toolStep(call{"c1", "get_weather", `{"city":"Oslo"}`}), textStep("ok"))
		w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, nil)}, Hooks: chain, Observer: rec})
		res := mustRun(t, w, events.UserText("go"))
		want := []string{`A:{"city":"Oslo"}`, `B:{"city":"A"}`, `C:{"city":"B"}`}
		if !slices.Equal(seen, want) {
			t.Fatalf("seen %v", seen)
		}
		if res.Messages[2].Content[0].Content != "sunny in C" {
			t.Fatalf("result %+v", res.Messages[2])
		}
		if got := decisionTrace(rec); !slices.Equal(got, []string{"A before_tool_call continue", "B before_tool_call continue", "C before_tool_call continue"}) {
			t.Fatalf("decisions %v", got)
		}
	})
	t.Run("skip stops the chain", func(t *testing.T) {
		seen = nil
		rec := &recorder{}
		chain := chainWith(t, func(c *chainT) {
			c.before("A", mark("A", beforeOut{}))
			c.before("B", mark("B", beforeOut{Action: hook.ToolSkip}))
			c.before("C", mark("C", beforeOut{}))
		})
		p := newScripted(toolStep(call{"c1", "get_weather", `{"city":"Oslo"}`}), textStep("ok"))
		w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, nil)}, Hooks: chain, Observer: rec})
		res := mustRun(t, w, events.UserText("go"))
		if len(seen) != 2 || !strings.Contains(res.Messages[2].Content[0].Content, `"B"`) {
			t.Fatalf("seen %v result %+v", seen, res.Messages[2])
		}
		if got := decisionTrace(rec); !slices.Equal(got, []string{"A before_tool_call continue", "B before_tool_call skip"}) {
			t.Fatalf("decisions %v", got)
		}
	})
	t.Run("priority orders hooks", func(t *testing.T) {
		seen = nil
		chain := chainWith(t, func(c *chainT) {
			c.before("A", mark("A", beforeOut{}), func(o *hook.Options) { o.Priority = 2 })
			c.before("B", mark("B", beforeOut{}), func(o *hook.Options) { o.Priority = 1 })
			c.before("C", mark("C", beforeOut{}), func(o *hook.Options) { o.Priority = 3 })
		})
		p := newScripted(toolStep(call{"c1", "get_weather", `{"city":"Oslo"}`}), textStep("ok"))
		var vars map[string]string
		w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, nil)}, Hooks: chain,
			Checkpoint: func(_ context.Context, cp *worker.Checkpoint) error { vars = cp.Vars; return nil }})
		mustRun(t, w, events.UserText("go"))
		if len(seen) != 3 || !strings.HasPrefix(seen[0], "B:") || !strings.HasPrefix(seen[2], "C:") {
			t.Fatalf("seen %v", seen)
		}
		// Hook variables are shared by the turn's hooks and checkpointed.
		if vars["last"] != "C" {
			t.Fatalf("vars %v", vars)
		}
	})
}

func TestMatchers(t *testing.T) {
	var fsCalls, allCalls atomic.Int32
	chain := chainWith(t, func(c *chainT) {
		c.before("fs-only", func(context.Context, *beforeIn) (beforeOut, error) { fsCalls.Add(1); return beforeOut{}, nil }, matcher("^fs_"))
		c.after("all", func(context.Context, *afterIn) (afterOut, error) { allCalls.Add(1); return afterOut{}, nil })
	})
	fsRead := tool.Must("fs_read", "read", func(context.Context, struct{}) (string, error) { return "data", nil })
	p := newScripted(toolStep(call{"c1", "fs_read", `{}`}, call{"c2", "get_weather", `{"city":"X"}`}), textStep("ok"))
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{fsRead, weatherTool(t, nil)}, Hooks: chain})
	if res := mustRun(t, w, events.UserText("go")); res.Status != worker.StatusCompleted {
		t.Fatal(res.Reason)
	}
	if fsCalls.Load() != 1 || allCalls.Load() != 2 {
		t.Fatalf("fs hook %d, all hook %d", fsCalls.Load(), allCalls.Load())
	}
}

func TestHookTimeoutAndFailurePolicies(t *testing.T) {
	slow := func(ctx context.Context, _ *beforeIn) (beforeOut, error) {
		<-ctx.Done() // a hook that does not answer in time
		return beforeOut{}, ctx.Err()
	}
	t.Run("fail_open goes on", func(t *testing.T) {
		var ran atomic.Int32
		rec := &recorder{}
		chain := chainWith(t, func(c *chainT) {
			c.before("slow", slow, timeout(20*time.Millisecond), failure(events.FailOpen))
		})
		p := newScripted(toolStep(call{"c1", "get_weather", `{"city":"X"}`}), textStep("ok"))
		w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, &ran)}, Hooks: chain, Observer: rec})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusCompleted || ran.Load() != 1 {
			t.Fatalf("status %s ran %d: %s", res.Status, ran.Load(), res.Reason)
		}
		if got := decisionTrace(rec); !slices.Equal(got, []string{"slow before_tool_call continue (failed)"}) {
			t.Fatalf("decisions %v", got)
		}
	})
	t.Run("fail_closed aborts", func(t *testing.T) {
		var ran atomic.Int32
		var aborts abortLog
		chain := chainWith(t, func(c *chainT) {
			c.before("slow", slow, timeout(20*time.Millisecond))
			c.abort("log", aborts.hook)
		})
		p := newScripted(toolStep(call{"c1", "get_weather", `{"city":"X"}`}))
		w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, &ran)}, Hooks: chain})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusAborted || res.Code != worker.CodeHookFailed || res.Hook != "slow" || ran.Load() != 0 {
			t.Fatalf("result %+v ran %d", res, ran.Load())
		}
		if !errors.Is(res.Err(), worker.ErrHookAbort) || !errors.Is(res.Err(), hook.ErrTimeout) {
			t.Fatalf("err %v", res.Err())
		}
		if !strings.Contains(res.Reason, "timed out") || len(aborts.get()) != 1 {
			t.Fatalf("reason %q aborts %v", res.Reason, aborts.get())
		}
	})
	t.Run("errors at every hook point", func(t *testing.T) {
		boom := errors.New("boom")
		cases := map[string]func(c *chainT){
			"on_message_send":  func(c *chainT) { c.send("h", hooktest.Fail[sendIn, sendOut](boom)) },
			"before_tool_call": func(c *chainT) { c.before("h", hooktest.Fail[beforeIn, beforeOut](boom)) },
			"after_tool_call":  func(c *chainT) { c.after("h", hooktest.Fail[afterIn, afterOut](boom)) },
			"on_turn_end":      func(c *chainT) { c.end("h", hooktest.Fail[endIn, endOut](boom)) },
		}
		for name, reg := range cases {
			t.Run(name, func(t *testing.T) {
				var aborts abortLog
				chain := chainWith(t, func(c *chainT) { reg(c); c.abort("log", aborts.hook) })
				p := newScripted(toolStep(call{"c1", "get_weather", `{"city":"X"}`}), textStep("ok"))
				w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, nil)}, Hooks: chain})
				res := mustRun(t, w, events.UserText("go"))
				if res.Status != worker.StatusAborted || res.Code != worker.CodeHookFailed || !errors.Is(res.Err(), boom) {
					t.Fatalf("result %+v err %v", res, res.Err())
				}
				if !strings.Contains(res.Reason, name) || len(aborts.get()) != 1 {
					t.Fatalf("reason %q aborts %v", res.Reason, aborts.get())
				}
			})
		}
	})
}

func TestHookMessagesAndVariablesReachObserver(t *testing.T) {
	chain := chainWith(t, func(c *chainT) {
		c.send("notes", func(_ context.Context, in *sendIn) (sendOut, error) {
			in.Turn.Emit(events.AssistantText("thinking about it…"))
			in.Turn.Vars["seen"] = "yes"
			return sendOut{}, nil
		})
		c.end("check", func(_ context.Context, in *endIn) (endOut, error) {
			if in.Turn.Vars.Get("seen") != "yes" {
				t.Errorf("variables not shared: %v", in.Turn.Vars)
			}
			return endOut{}, nil
		})
	})
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: newScripted(textStep("ok")), Hooks: chain, Observer: rec, Vars: map[string]string{"user": "u1"}})
	mustRun(t, w, events.UserText("go"))
	msgs := rec.ofType(events.TypeHookMessage)
	if len(msgs) != 1 {
		t.Fatalf("hook messages %v", msgs)
	}
	m := msgs[0].(events.HookMessage)
	if m.Hook != "notes" || m.Event != events.HookOnMessageSend || m.Messages[0].Text() != "thinking about it…" {
		t.Fatalf("hook.message %+v", m)
	}
}

func TestOnAbortFailureIsOnlyReported(t *testing.T) {
	rec := &recorder{}
	var aborts abortLog
	chain := chainWith(t, func(c *chainT) {
		c.send("stop", hooktest.Always[sendIn](sendOut{Action: hook.MessageSendCancel}))
		c.abort("broken", hooktest.Fail[abortIn, abortOut](errors.New("notify failed")))
		c.abort("log", aborts.hook)
	})
	w := mustNew(t, worker.Config{Provider: newScripted(), Hooks: chain, Observer: rec})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusAborted || res.Code != worker.CodeHookCancel || len(aborts.get()) != 1 {
		t.Fatalf("result %+v aborts %v", res, aborts.get())
	}
	want := []string{"stop on_message_send cancel", "broken on_abort continue (failed)", "log on_abort continue"}
	if got := decisionTrace(rec); !slices.Equal(got, want) {
		t.Fatalf("decisions %v", got)
	}
}

func TestBeforeToolCallRewritesBadly(t *testing.T) {
	chain := chainWith(t, func(c *chainT) {
		c.before("rewriter", func(_ context.Context, in *beforeIn) (beforeOut, error) {
			switch in.Call.ID {
			case "c1":
				in.Call.Input = json.RawMessage(`[1,2]`)
			case "c2":
				in.Call.Name = "nope"
			case "c3":
				in.Call.Input = nil // counts as {}
			}
			return beforeOut{}, nil
		})
	})
	echo := tool.Must("echo", "echo", func(context.Context, struct{}) (string, error) { return "ran", nil })
	p := newScripted(toolStep(call{"c1", "echo", `{}`}, call{"c2", "echo", `{}`}, call{"c3", "echo", `{}`}), textStep("ok"))
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{echo}, Hooks: chain})
	res := mustRun(t, w, events.UserText("go"))
	rs := res.Messages[2].Content
	if !rs[0].IsError || !strings.Contains(rs[0].Content, "not a JSON object") {
		t.Fatalf("c1 %+v", rs[0])
	}
	if !rs[1].IsError || !strings.Contains(rs[1].Content, `unknown tool "nope"`) {
		t.Fatalf("c2 %+v", rs[1])
	}
	if rs[2].IsError || rs[2].Content != "ran" {
		t.Fatalf("c3 %+v", rs[2])
	}
}
