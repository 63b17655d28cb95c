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
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// --- cancel ----------------------------------------------------------------

func TestCancelMidStream(t *testing.T) {
	var aborts abortLog
	chain := chainWith(t, func(c *chainT) { c.abort("cleanup", aborts.hook) })
	p := newScripted(script{evs: []events.Event{
		started(),
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "partial"),
	}, block: true})
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Hooks: chain, Observer: rec})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		waitFor(t, "the first delta", func() bool { return len(rec.ofType(events.TypeBlockDelta)) > 0 })
		cancel()
	}()
	res, err := w.Run(ctx, []events.Message{events.UserText("go")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != worker.StatusAborted || res.Code != worker.CodeCancelled || !errors.Is(res.Err(), worker.ErrCancelled) {
		t.Fatalf("result %+v", res)
	}
	if !errors.Is(res.Err(), context.Canceled) {
		t.Fatalf("err %v does not unwrap to context.Canceled", res.Err())
	}
	want := []string{"turn.started", "turn.step", "block.start/text", "block.delta/text", "block.abort/text", "hook.decision", "turn.aborted"}
	if got := rec.types(); !slices.Equal(got, want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	ab := rec.ofType(events.TypeBlockAbort)[0].(events.WorkerBlockAbort)
	if ab.Index != 0 || ab.BlockType != events.BlockText || ab.Step != 1 {
		t.Fatalf("block.abort %+v", ab)
	}
	if got := aborts.get(); len(got) != 1 || !strings.Contains(got[0], "cancelled") {
		t.Fatalf("on_abort %v", got)
	}
	// The partial answer is not in the transcript.
	if len(res.Messages) != 1 {
		t.Fatalf("transcript %s", jsonString(t, res.Messages))
	}
}

func TestCancelWhileToolsRun(t *testing.T) {
	var aborts abortLog
	chain := chainWith(t, func(c *chainT) { c.abort("cleanup", aborts.hook) })
	inTool := make(chan struct{})
	var stopped atomic.Bool
	hang := tool.Must("hang", "hangs", func(ctx context.Context, _ struct{}) (string, error) {
		close(inTool)
		<-ctx.Done()
		stopped.Store(true)
		return "", ctx.Err()
	})
	p := newScripted(toolStep(call{"c1", "hang", `{}`}))
	w := mustNew(t, worker.Config{Provider: p, Hooks: chain, Tools: []tool.Tool{hang}})
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		<-inTool
		cancel(errors.New("user pressed stop"))
	}()
	res, _ := w.Run(ctx, []events.Message{events.UserText("go")})
	if res.Status != worker.StatusAborted || !strings.Contains(res.Reason, "user pressed stop") {
		t.Fatalf("result %+v", res)
	}
	// The tool was cancelled and had returned before Run returned.
	if !stopped.Load() || len(aborts.get()) != 1 {
		t.Fatalf("tool stopped %v, aborts %v", stopped.Load(), aborts.get())
	}
}

func TestCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := newScripted(textStep("x"))
	w := mustNew(t, worker.Config{Provider: p})
	res, _ := w.Run(ctx, []events.Message{events.UserText("go")})
	if res.Status != worker.StatusAborted || len(p.requests()) != 0 {
		t.Fatalf("result %+v, %d calls", res, len(p.requests()))
	}
}

// --- step limit, provider failures ------------------------------------------

func TestStepLimit(t *testing.T) {
	var calls atomic.Int32
	p := newScripted(
		toolStep(call{"c1", "get_weather", `{"city":"A"}`}),
		toolStep(call{"c2", "get_weather", `{"city":"B"}`}),
		toolStep(call{"c3", "get_weather", `{"city":"C"}`}),
	)
	var aborts abortLog
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, &calls)}, MaxSteps: 2,
		Hooks: chainWith(t, func(c *chainT) { c.abort("log", aborts.hook) })})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusFailed || res.Code != worker.CodeMaxSteps || !errors.Is(res.Err(), worker.ErrMaxSteps) {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(res.Reason, "max_steps (2)") || len(p.requests()) != 2 || res.Steps != 2 || calls.Load() != 2 {
		t.Fatalf("reason %q, %d model calls, %d tool calls", res.Reason, len(p.requests()), calls.Load())
	}
	if len(aborts.get()) != 1 {
		t.Fatal("on_abort did not run")
	}
}

func TestProviderFailure(t *testing.T) {
	failed := script{evs: []events.Event{
		started(),
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.TextDelta(0, "par"),
		events.ErrorEvent{Code: "overloaded", Message: "the model is overloaded"},
		events.StatusEvent{Status: events.StatusFailed},
	}}
	t.Run("fails with the provider's message", func(t *testing.T) {
		rec := &recorder{}
		var errs []events.ErrorEvent
		w := mustNew(t, worker.Config{Provider: newScripted(failed), Observer: rec})
		w.OnError(func(e events.ErrorEvent) { errs = append(errs, e) })
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusFailed || res.Code != worker.CodeProviderError || !errors.Is(res.Err(), worker.ErrProvider) {
			t.Fatalf("result %+v", res)
		}
		if !strings.Contains(res.Reason, "the model is overloaded") || !strings.Contains(res.Reason, "overloaded") {
			t.Fatalf("reason %q", res.Reason)
		}
		if len(rec.ofType(events.TypeBlockAbort)) != 1 || len(errs) != 1 {
			t.Fatalf("events %v errs %v", rec.types(), errs)
		}
		if d := rec.ofType(events.TypeTurnFailed)[0].(events.TurnFailed); d.Code != "provider_error" {
			t.Fatalf("turn.failed %+v", d)
		}
	})
	t.Run("a retry of the step succeeds", func(t *testing.T) {
		rec := &recorder{}
		p := newScripted(failed, textStep("ok"))
		w := mustNew(t, worker.Config{Provider: p, Observer: rec, StepAttempts: 2, TurnID: "t"})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusCompleted || res.Text() != "ok" || res.Steps != 1 {
			t.Fatalf("result %+v", res)
		}
		steps := rec.ofType(events.TypeTurnStep)
		if len(steps) != 2 || steps[1].(events.TurnStep) != (events.TurnStep{Step: 1, Attempt: 2}) {
			t.Fatalf("turn.step %v", steps)
		}
		reqs := p.requests()
		if reqs[0].RequestID == reqs[1].RequestID {
			t.Fatal("a retry reused the request id")
		}
	})
	t.Run("RetryStep sees the failure and may decline", func(t *testing.T) {
		var seen []worker.StepFailure
		p := newScripted(failed, script{err: errors.New("connection refused")}, textStep("never"))
		w := mustNew(t, worker.Config{Provider: p, StepAttempts: 3, RetryStep: func(f worker.StepFailure) (time.Duration, bool) {
			seen = append(seen, f)
			return time.Millisecond, f.Err == nil
		}})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusFailed || !strings.Contains(res.Reason, "connection refused") || len(p.requests()) != 2 {
			t.Fatalf("result %+v after %d calls", res, len(p.requests()))
		}
		// The first failure is the stream's error event (its code), the
		// second the call that could not be opened (its error, no code).
		if len(seen) != 2 || seen[0].Step != 1 || seen[0].Attempt != 1 || seen[0].Code != "overloaded" || seen[0].Err != nil ||
			seen[1].Attempt != 2 || seen[1].Code != "" || seen[1].Err == nil || !strings.Contains(seen[1].Err.Error(), "connection refused") {
			t.Fatalf("RetryStep saw %+v", seen)
		}
	})
	t.Run("a cancel during the retry's wait aborts the turn", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		p := newScripted(failed, textStep("never"))
		w := mustNew(t, worker.Config{Provider: p, StepAttempts: 2, RetryStep: func(worker.StepFailure) (time.Duration, bool) {
			cancel()
			return time.Hour, true
		}})
		res, _ := w.Run(ctx, []events.Message{events.UserText("go")})
		if res.Status != worker.StatusAborted || len(p.requests()) != 1 {
			t.Fatalf("result %+v after %d calls", res, len(p.requests()))
		}
	})
	t.Run("a retry drops the failed attempt's finished blocks", func(t *testing.T) {
		rec := &recorder{}
		var ran atomic.Int32
		half := llmtest.Script{
			Events: append(append([]events.Event{started()}, llmtest.TextBlockEvents(0, "let me check")...),
				llmtest.ToolUseBlockEvents(1, llmtest.ToolCallSpec{ID: "c_lost", Name: "get_weather", Input: `{"city":"Oslo"}`})...),
			StreamErr: errors.New("connection reset by peer"),
		}
		p := llmtest.NewScripted(half, llmtest.TextStep("ok"))
		w := mustNew(t, worker.Config{Provider: p, Observer: rec, StepAttempts: 2,
			Tools: []tool.Tool{weatherTool(t, &ran)}})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusCompleted || p.Calls() != 2 || ran.Load() != 0 {
			t.Fatalf("result %+v, %d calls, the tool ran %d times", res, p.Calls(), ran.Load())
		}
		if msg := res.Messages[len(res.Messages)-1]; len(msg.Content) != 1 || msg.Text() != "ok" {
			t.Fatalf("assistant message %s", jsonString(t, msg))
		}
	})
	t.Run("Stream error", func(t *testing.T) {
		w := mustNew(t, worker.Config{Provider: newScripted(script{err: errors.New("connection refused")})})
		res := mustRun(t, w, events.UserText("go"))
		if res.Code != worker.CodeProviderError || !strings.Contains(res.Reason, "connection refused") {
			t.Fatalf("result %+v", res)
		}
	})
	t.Run("provider cancels", func(t *testing.T) {
		w := mustNew(t, worker.Config{Provider: newScripted(script{evs: []events.Event{started(), events.StatusEvent{Status: events.StatusCancelled}}})})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusFailed || !strings.Contains(res.Reason, "cancelled") {
			t.Fatalf("result %+v", res)
		}
	})
	t.Run("idle timeout", func(t *testing.T) {
		w := mustNew(t, worker.Config{Provider: newScripted(script{evs: []events.Event{started()}, block: true}), IdleTimeout: 20 * time.Millisecond})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusFailed || !strings.Contains(res.Reason, "idle_timeout") {
			t.Fatalf("result %+v", res)
		}
	})
}

// --- tool errors -------------------------------------------------------------

type rawTool struct {
	name string
	fn   func(ctx context.Context, in json.RawMessage) (string, error)
}

func (r rawTool) Name() string                 { return r.name }
func (r rawTool) Description() string          { return "raw" }
func (r rawTool) InputSchema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (r rawTool) Execute(ctx context.Context, in json.RawMessage) (string, error) {
	return r.fn(ctx, in)
}

func TestToolErrorResults(t *testing.T) {
	panics := rawTool{"panics", func(context.Context, json.RawMessage) (string, error) { panic("kaboom") }}
	fails := rawTool{"fails", func(context.Context, json.RawMessage) (string, error) { return "", errors.New("disk full") }}
	slow := tool.Must("slow", "slow", func(ctx context.Context, _ struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}, tool.WithTimeout(20*time.Millisecond))
	typed := weatherTool(t, nil)
	p := newScripted(script{evs: stream(
		toolBlock(0, "c1", "nope", `{}`),
		toolBlock(1, "c2", "get_weather", `{"city":`),
		toolBlock(2, "c3", "panics", `{}`),
		toolBlock(3, "c4", "fails", `{}`),
		toolBlock(4, "c5", "slow", `{}`),
		toolBlock(5, "c6", "get_weather", `{"city":7}`),
		toolBlock(6, "c7", "hidden", `{}`),
	)}, textStep("ok"))
	hidden := tool.Must("hidden", "not offered", func(context.Context, struct{}) (string, error) { return "x", nil })
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{panics, fails, slow, typed, hidden},
		ToolNames: []string{"get_*", "panics", "fails", "slow"}, Observer: rec})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusCompleted {
		t.Fatalf("result %+v", res)
	}
	rs := res.Messages[2].Content
	check := func(i int, id string, contains ...string) {
		t.Helper()
		if rs[i].ToolUseID != id || !rs[i].IsError {
			t.Errorf("result %d: %+v", i, rs[i])
		}
		for _, s := range contains {
			if !strings.Contains(rs[i].Content, s) {
				t.Errorf("result %s %q does not contain %q", id, rs[i].Content, s)
			}
		}
	}
	check(0, "c1", `unknown tool "nope"`, "available tools: fails, get_weather, panics, slow")
	check(1, "c2", `invalid input for tool "get_weather"`, "JSON")
	check(2, "c3", `tool "panics" panicked: kaboom`)
	check(3, "c4", "disk full")
	check(4, "c5", `tool "slow" timed out after 20ms`)
	check(5, "c6", `"city"`)
	check(6, "c7", `unknown tool "hidden"`)
	// The invalid input goes back to the model as {} with the call.
	if in := string(res.Messages[1].Content[1].Input); in != "{}" {
		t.Fatalf("invalid input in transcript: %s", in)
	}
	if tcc := rec.ofType(events.TypeToolCallComplete)[1].(events.ToolCallComplete); tcc.Error == "" {
		t.Fatalf("toolcall.complete of invalid input without error: %+v", tcc)
	}
	// Only the definitions of offered tools went to the model.
	var names []string
	for _, d := range p.requests()[0].Tools {
		names = append(names, d.Name)
	}
	if !slices.Equal(names, []string{"fails", "get_weather", "panics", "slow"}) {
		t.Fatalf("tools sent %v", names)
	}
}

func TestNoToolsOffered(t *testing.T) {
	p := newScripted(toolStep(call{"c1", "get_weather", `{}`}), textStep("ok"))
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, nil)}, ToolNames: []string{}})
	res := mustRun(t, w, events.UserText("go"))
	if got := res.Messages[2].Content[0].Content; !strings.Contains(got, "no tools are available") {
		t.Fatalf("result %q", got)
	}
	if len(p.requests()[0].Tools) != 0 {
		t.Fatal("tools were offered")
	}
}

func TestRegistryAndCallInfo(t *testing.T) {
	var got tool.CallInfo
	reg, err := tool.NewRegistry(tool.Must("whoami", "ids", func(ctx context.Context, _ struct{}) (string, error) {
		ci, ok := tool.CallFrom(ctx)
		if !ok {
			return "", errors.New("no call info")
		}
		got = ci
		return ci.CallID, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	p := newScripted(textStep("warm-up"), toolStep(call{"c9", "whoami", `{}`}), textStep("ok"))
	more := 0
	chain := chainWith(t, func(c *chainT) {
		c.end("once", func(context.Context, *endIn) (endOut, error) {
			if more++; more == 1 {
				return endOut{Action: hook.TurnContinueWithMessages, Messages: []events.Message{events.UserText("now call")}}, nil
			}
			return endOut{}, nil
		})
	})
	w := mustNew(t, worker.Config{Provider: p, Registry: reg, TurnID: "turn-1", SessionID: "sess", Hooks: chain})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusCompleted {
		t.Fatal(res.Reason)
	}
	want := tool.CallInfo{TurnID: "turn-1", SessionID: "sess", CallID: "c9", Name: "whoami", Step: 2, First: true}
	if got != want {
		t.Fatalf("call info %+v", got)
	}
	if defs := w.Tools(); len(defs) != 1 || defs[0].Name != "whoami" {
		t.Fatalf("Tools() %v", defs)
	}
}

// Server tools (the provider runs them) are neither dispatched nor put
// into the transcript; the text around them is.
func TestServerToolsNotDispatched(t *testing.T) {
	var ran atomic.Int32
	p := newScripted(script{evs: []events.Event{
		started(),
		events.BlockStart{Index: 0, BlockType: events.BlockToolUse, ID: "srv1", Name: "get_weather", Server: true},
		events.InputJSONDelta(0, `{"city":"X"}`),
		events.BlockStop{Index: 0, BlockType: events.BlockToolUse},
		events.BlockStart{Index: 1, BlockType: events.BlockToolResult, ToolUseID: "srv1"},
		events.TextDelta(1, "search results"),
		events.BlockStop{Index: 1, BlockType: events.BlockToolResult},
		textBlock(2, events.StopEndTurn, "Found it.")[0],
		textBlock(2, events.StopEndTurn, "Found it.")[1],
		textBlock(2, events.StopEndTurn, "Found it.")[2],
		completed(),
	}})
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, &ran)}, Observer: rec})
	res := mustRun(t, w, events.UserText("search"))
	if res.Status != worker.StatusCompleted || ran.Load() != 0 || res.Steps != 1 {
		t.Fatalf("result %+v ran %d", res, ran.Load())
	}
	if want := events.AssistantText("Found it."); !reflect.DeepEqual(res.Messages[1], want) {
		t.Fatalf("assistant %s", jsonString(t, res.Messages[1]))
	}
	if n := len(rec.ofType(events.TypeToolCallComplete)); n != 0 {
		t.Fatalf("%d toolcall.complete for a server tool", n)
	}
	// The tool_result block of the server tool travels on the text channel.
	starts := rec.ofType(events.TypeBlockStart)
	if s := starts[1].(events.WorkerBlockStart); s.BlockType != events.BlockToolResult || s.ToolUseID != "srv1" {
		t.Fatalf("tool_result start %+v", s)
	}
	if tc := rec.ofType(events.TypeTextComplete); len(tc) != 1 {
		t.Fatalf("text.complete %v", tc)
	}
}

func TestRedactedThinkingAndUsageTotals(t *testing.T) {
	p := newScripted(
		script{evs: stream(
			[]events.Event{usage(10, 0)},
			thinkingBlock(0, "", "opaque-data"),
			toolBlock(1, "c1", "get_weather", `{"city":"X"}`),
			[]events.Event{usage(10, 7)},
		)},
		script{evs: stream(textBlock(0, events.StopEndTurn, "ok"), []events.Event{usage(30, 3)})},
	)
	rec := &recorder{}
	var raw []events.UsageEvent
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, nil)}, Observer: rec})
	w.OnUsage(func(u events.UsageEvent) { raw = append(raw, u) })
	res := mustRun(t, w, events.UserText("go"))
	th := res.Messages[1].Content[0]
	if th.Type != events.PartThinking || !th.Redacted || th.Signature != "opaque-data" {
		t.Fatalf("thinking part %+v", th)
	}
	if got := p.requests()[1].Messages[1].Content[0]; !got.Redacted || got.Signature != "opaque-data" {
		t.Fatalf("thinking sent back %+v", got)
	}
	// Within a step usage is cumulative (merge); steps add up.
	if *res.Usage.InputTokens != 40 || *res.Usage.OutputTokens != 10 || len(raw) != 3 {
		t.Fatalf("usage %s raw %d", jsonString(t, res.Usage), len(raw))
	}
	reports := rec.ofType(events.TypeUsage)
	if got := jsonString(t, reports); got != `[{"step":1,"usage":{"input_tokens":10,"output_tokens":7},"total":{"input_tokens":10,"output_tokens":7}},{"step":2,"usage":{"input_tokens":30,"output_tokens":3},"total":{"input_tokens":40,"output_tokens":10}}]` {
		t.Fatalf("usage reports %s", got)
	}
}

// --- config and misuse ---------------------------------------------------

func TestNewErrors(t *testing.T) {
	p := newScripted()
	dup := weatherTool(t, nil)
	cases := []struct {
		cfg  worker.Config
		want error
	}{
		{worker.Config{}, worker.ErrNoProvider},
		{worker.Config{Provider: p, MaxSteps: -1}, worker.ErrInvalidConfig},
		{worker.Config{Provider: p, Tools: []tool.Tool{dup, dup}}, worker.ErrInvalidConfig},
		{worker.Config{Provider: p, Tools: []tool.Tool{nil}}, worker.ErrInvalidConfig},
		{worker.Config{Provider: p, Tools: []tool.Tool{rawTool{name: "bad name"}}}, worker.ErrInvalidConfig},
		{worker.Config{Provider: p, ToolNames: []string{"[a"}}, worker.ErrInvalidConfig},
	}
	for i, c := range cases {
		if _, err := worker.New(c.cfg); !errors.Is(err, c.want) {
			t.Errorf("case %d: err %v, want %v", i, err, c.want)
		}
	}
	w := mustNew(t, worker.Config{Provider: p})
	if _, err := w.Run(context.Background(), []events.Message{{Role: "robot"}}); !errors.Is(err, worker.ErrInvalidMessages) {
		t.Fatalf("Run err %v", err)
	}
	if len(p.requests()) != 0 {
		t.Fatal("model called")
	}
}

func TestGeneratedTurnIDs(t *testing.T) {
	w := mustNew(t, worker.Config{Provider: newScripted(textStep("a"), textStep("b"))})
	a := mustRun(t, w, events.UserText("1"))
	b := mustRun(t, w, events.UserText("2"))
	if len(a.TurnID) != 26 || a.TurnID == b.TurnID || !events.ValidToken(a.TurnID) {
		t.Fatalf("turn ids %q %q", a.TurnID, b.TurnID)
	}
}

// Concurrent turns on one Worker have their own state.
func TestConcurrentRuns(t *testing.T) {
	prov := providerFunc(func(req *llm.Request) script {
		if req.Messages[len(req.Messages)-1].Role == events.RoleTool {
			return textStep("done")
		}
		return toolStep(call{"c", "get_weather", `{"city":"X"}`})
	})
	w := mustNew(t, worker.Config{Provider: prov, Tools: []tool.Tool{weatherTool(t, nil)}})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := w.Run(context.Background(), []events.Message{events.UserText("go")})
			if err != nil || res.Status != worker.StatusCompleted {
				t.Errorf("res %+v err %v", res, err)
			}
		}()
	}
	wg.Wait()
}

// The same behaviours with the llm package's Scripted test double.
func TestWithLLMScripted(t *testing.T) {
	t.Run("cancel mid-stream", func(t *testing.T) {
		rec := &recorder{}
		var aborts abortLog
		p := llmtest.NewScripted(llmtest.BlockingStep("Hel", "lo"))
		w := mustNew(t, worker.Config{Provider: p, Observer: rec, Hooks: chainWith(t, func(c *chainT) { c.abort("a", aborts.hook) })})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			waitFor(t, "two deltas", func() bool { return len(rec.ofType(events.TypeBlockDelta)) == 2 })
			cancel()
		}()
		res, _ := w.Run(ctx, []events.Message{events.UserText("go")})
		if res.Status != worker.StatusAborted || len(rec.ofType(events.TypeBlockAbort)) != 1 || len(aborts.get()) != 1 {
			t.Fatalf("result %+v events %v", res, rec.types())
		}
	})
	t.Run("broken connection", func(t *testing.T) {
		p := llmtest.NewScripted(llmtest.FailMidStep(errors.New("connection reset"), "par"), llmtest.TextStep("ok"))
		w := mustNew(t, worker.Config{Provider: p, StepAttempts: 2})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusCompleted || res.Text() != "ok" || p.Calls() != 2 {
			t.Fatalf("result %+v", res)
		}
	})
	t.Run("thinking tool loop", func(t *testing.T) {
		p := llmtest.NewScripted(
			llmtest.NewStep(llmtest.ThinkingBlockEvents(0, "need weather", "sig-A"),
				llmtest.ToolUseBlockEvents(1, llmtest.ToolCallSpec{ID: "c1", Name: "get_weather", Input: `{"city":"Oslo"}`})).WithUsage(3, 4),
			llmtest.TextStep("sunny").WithUsage(5, 6),
		)
		w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, nil)}})
		res := mustRun(t, w, events.UserText("go"))
		sent := p.Requests()[1].Messages[1].Content
		if sent[0].Type != events.PartThinking || sent[0].Signature != "sig-A" || sent[0].Redacted || sent[1].ID != "c1" {
			t.Fatalf("sent %s", jsonString(t, sent))
		}
		if *res.Usage.TotalTokens != 18 {
			t.Fatalf("usage %s", jsonString(t, res.Usage))
		}
	})
}

// The tools offered to each model call of a turn are the Registry's at
// that call: a tool registered during the turn is offered from the next
// step on. Without a Registry every call of the turn offers the same tools.
func TestToolsOfferedPerStep(t *testing.T) {
	reg, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	late := tool.Must("late", "registered during the turn", func(context.Context, struct{}) (string, error) { return "", nil })
	adder := tool.Must("add", "registers late", func(context.Context, struct{}) (string, error) {
		return "added", reg.Register(late)
	})
	if err := reg.Register(adder); err != nil {
		t.Fatal(err)
	}
	p := newScripted(toolStep(call{"c1", "add", `{}`}), textStep("ok"))
	w := mustNew(t, worker.Config{Provider: p, Registry: reg})
	if res := mustRun(t, w, events.UserText("go")); res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	names := func(req int) []string {
		var out []string
		for _, d := range p.requests()[req].Tools {
			out = append(out, d.Name)
		}
		return out
	}
	if got := names(0); !slices.Equal(got, []string{"add"}) {
		t.Fatalf("step 1 offered %v", got)
	}
	if got := names(1); !slices.Equal(got, []string{"add", "late"}) {
		t.Fatalf("step 2 offered %v", got)
	}

	// Static tools: the same definitions, schema included, at every step.
	p2 := newScripted(toolStep(call{"c1", "add", `{}`}), toolStep(call{"c2", "add", `{}`}), textStep("ok"))
	w2 := mustNew(t, worker.Config{Provider: p2, Tools: []tool.Tool{adder}})
	if res := mustRun(t, w2, events.UserText("go")); res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	want := []events.ToolDefinition{tool.Definition(adder)}
	for i, req := range p2.requests() {
		if !reflect.DeepEqual(req.Tools, want) {
			t.Fatalf("request %d offered %+v, want %+v", i, req.Tools, want)
		}
	}
}

// Cancelling a turn while several calls of a step run (nothing observes
// the results one by one: no after_tool_call hook, observer or checkpoint
// per result) stops every call before Run returns.
func TestCancelWhileParallelToolsRun(t *testing.T) {
	var started, stopped atomic.Int32
	allIn := make(chan struct{})
	hang := tool.Must("hang", "hangs", func(ctx context.Context, _ struct{}) (string, error) {
		if started.Add(1) == 3 {
			close(allIn)
		}
		<-ctx.Done()
		stopped.Add(1)
		return "", ctx.Err()
	})
	p := newScripted(toolStep(call{"c1", "hang", `{}`}, call{"c2", "hang", `{}`}, call{"c3", "hang", `{}`}))
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{hang}})
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		<-allIn
		cancel(errors.New("user pressed stop"))
	}()
	res, _ := w.Run(ctx, []events.Message{events.UserText("go")})
	if res.Status != worker.StatusAborted || res.Code != worker.CodeCancelled || !strings.Contains(res.Reason, "user pressed stop") {
		t.Fatalf("result %+v", res)
	}
	if stopped.Load() != 3 {
		t.Fatalf("%d of 3 calls had stopped when Run returned", stopped.Load())
	}
}
