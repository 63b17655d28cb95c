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

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooktest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// cityLog is a weather tool that records the cities it was called for.
type cityLog struct {
	mu     sync.Mutex
	cities []string
}

func (l *cityLog) tool() tool.Tool {
	return tool.Must("get_weather", "weather", func(_ context.Context, a weatherArgs) (string, error) {
		l.mu.Lock()
		l.cities = append(l.cities, a.City)
		l.mu.Unlock()
		return "sunny in " + a.City, nil
	})
}

func (l *cityLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := slices.Clone(l.cities)
	slices.Sort(c)
	return c
}

// roundTrip sends a checkpoint through JSON, as a service storing it would.
func roundTrip(t *testing.T, cp *worker.Checkpoint) *worker.Checkpoint {
	t.Helper()
	b, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	var out worker.Checkpoint
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestPauseAndResumeApproveDenyEdit(t *testing.T) {
	var cities cityLog
	var beforeCalls, afterCalls atomic.Int32
	chain := chainWith(t, func(c *chainT) {
		c.before("approval", func(_ context.Context, in *beforeIn) (beforeOut, error) {
			beforeCalls.Add(1)
			if in.Call.ID == "c0" {
				return beforeOut{}, nil // allowed, runs after the resume
			}
			return beforeOut{Action: hook.ToolPause, Reason: "needs a human"}, nil
		})
		c.after("count", func(context.Context, *afterIn) (afterOut, error) { afterCalls.Add(1); return afterOut{}, nil })
	})
	p := newScripted(
		toolStep(call{"c0", "get_weather", `{"city":"Bergen"}`}, call{"c1", "get_weather", `{"city":"Oslo"}`},
			call{"c2", "get_weather", `{"city":"Rome"}`}, call{"c3", "get_weather", `{"city":"Paris"}`}),
		textStep("done"),
	)
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{cities.tool()}, Hooks: chain, Observer: rec, TurnID: "tp"})
	res := mustRun(t, w, events.UserText("weather?"))
	if res.Status != worker.StatusPaused || res.Err() != nil || res.Hook != "approval" {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(res.Reason, "needs a human") || !strings.Contains(res.Reason, "c1") {
		t.Fatalf("reason %q", res.Reason)
	}
	if len(cities.get()) != 0 {
		t.Fatalf("tools ran before the decisions: %v", cities.get())
	}
	awaiting := res.State.Awaiting()
	if len(awaiting) != 3 || awaiting[0].ID != "c1" || string(awaiting[2].Input) != `{"city":"Paris"}` {
		t.Fatalf("awaiting %+v", awaiting)
	}
	tp := rec.ofType(events.TypeTurnPaused)[0].(events.TurnPaused)
	if tp.Hook != "approval" || len(tp.Pending) != 3 || tp.Reason != res.Reason {
		t.Fatalf("turn.paused %+v", tp)
	}

	state := roundTrip(t, res.State)
	rec2 := &recorder{}
	w.AddObserver(rec2)
	res, err := w.Resume(context.Background(), state, map[string]events.Decision{
		"c1": {Kind: events.DecisionApprove},
		"c2": {Kind: events.DecisionDeny, Reason: "no Rome today"},
		"c3": {Kind: events.DecisionEdit, Input: json.RawMessage(`{"city":"Lyon"}`)},
	}, events.UserText("and be quick"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != worker.StatusCompleted {
		t.Fatalf("result %+v", res)
	}
	if got := cities.get(); !slices.Equal(got, []string{"Bergen", "Lyon", "Oslo"}) {
		t.Fatalf("tools ran for %v", got)
	}
	if beforeCalls.Load() != 4 || afterCalls.Load() != 3 {
		t.Fatalf("before_tool_call ran %d times, after_tool_call %d", beforeCalls.Load(), afterCalls.Load())
	}
	rs := res.Messages[2].Content
	want := []events.Part{
		events.ToolResultPart("c0", "sunny in Bergen", false),
		events.ToolResultPart("c1", "sunny in Oslo", false),
		rs[2],
		events.ToolResultPart("c3", "sunny in Lyon", false),
	}
	if !reflect.DeepEqual(rs, want) || !rs[2].IsError || !strings.Contains(rs[2].Content, "no Rome today") {
		t.Fatalf("results %s", jsonString(t, rs))
	}
	// The assistant message keeps the model's own input; the result tells
	// what ran. The extra message of the resume follows the results.
	if res.Messages[3].Text() != "and be quick" {
		t.Fatalf("extra message %s", jsonString(t, res.Messages[3]))
	}
	if res.Steps != 2 {
		t.Fatalf("steps %d", res.Steps)
	}
	types := rec2.types()
	if types[0] != "turn.resumed" || !slices.Contains(types, "tool.skipped") || types[len(types)-1] != "turn.completed" {
		t.Fatalf("events after resume %v", types)
	}
	if d := rec2.ofType(events.TypeTurnResumed)[0].(events.TurnResumed); len(d.Decisions) != 3 {
		t.Fatalf("turn.resumed %+v", d)
	}
}

func TestResumeWithMissingDecisionPausesAgain(t *testing.T) {
	var cities cityLog
	chain := chainWith(t, func(c *chainT) {
		c.before("approval", hooktest.Always[beforeIn](beforeOut{Action: hook.ToolPause}))
	})
	p := newScripted(toolStep(call{"c1", "get_weather", `{"city":"A"}`}, call{"c2", "get_weather", `{"city":"B"}`}), textStep("ok"))
	var cps []*worker.Checkpoint
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{cities.tool()}, Hooks: chain,
		Checkpoint: func(_ context.Context, cp *worker.Checkpoint) error { cps = append(cps, cp); return nil }})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusPaused {
		t.Fatal(res.Reason)
	}
	if last := cps[len(cps)-1]; last.Phase != worker.PhasePaused || last.Pause.Hook != "approval" {
		t.Fatalf("no paused checkpoint: %+v", last)
	}
	res, err := w.Resume(context.Background(), res.State, map[string]events.Decision{"c2": {Kind: events.DecisionApprove}})
	if err != nil || res.Status != worker.StatusPaused {
		t.Fatalf("res %+v err %v", res, err)
	}
	if a := res.State.Awaiting(); len(a) != 1 || a[0].ID != "c1" || len(cities.get()) != 0 {
		t.Fatalf("awaiting %+v, ran %v", a, cities.get())
	}
	res, err = w.Resume(context.Background(), res.State, map[string]events.Decision{"c1": {Kind: events.DecisionApprove}})
	if err != nil || res.Status != worker.StatusCompleted {
		t.Fatalf("res %+v err %v", res, err)
	}
	if got := cities.get(); !slices.Equal(got, []string{"A", "B"}) {
		t.Fatalf("ran %v", got)
	}
}

func TestResumeErrors(t *testing.T) {
	chain := chainWith(t, func(c *chainT) {
		c.before("approval", hooktest.Always[beforeIn](beforeOut{Action: hook.ToolPause}))
	})
	p := newScripted(toolStep(call{"c1", "get_weather", `{"city":"A"}`}))
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, nil)}, Hooks: chain})
	res := mustRun(t, w, events.UserText("go"))
	ctx := context.Background()
	cases := []struct {
		name string
		st   *worker.Checkpoint
		d    map[string]events.Decision
		msgs []events.Message
		want error
	}{
		{"nil state", nil, nil, nil, worker.ErrInvalidCheckpoint},
		{"unknown call", res.State, map[string]events.Decision{"zz": {Kind: events.DecisionApprove}}, nil, worker.ErrInvalidDecision},
		{"bad edit", res.State, map[string]events.Decision{"c1": {Kind: events.DecisionEdit, Input: json.RawMessage(`[1]`)}}, nil, worker.ErrInvalidDecision},
		{"bad kind", res.State, map[string]events.Decision{"c1": {Kind: "maybe"}}, nil, worker.ErrInvalidDecision},
		{"bad message", res.State, nil, []events.Message{{Role: "x"}}, worker.ErrInvalidMessages},
	}
	for _, c := range cases {
		if _, err := w.Resume(ctx, c.st, c.d, c.msgs...); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	notPaused := res.State.Clone()
	notPaused.Phase, notPaused.Pause = worker.PhaseTools, nil
	for i := range notPaused.Pending {
		notPaused.Pending[i].State = worker.CallAllowed
	}
	if _, err := w.Resume(ctx, notPaused, nil); !errors.Is(err, worker.ErrNotPaused) {
		t.Errorf("not paused: %v", err)
	}
}

func TestTurnEndPause(t *testing.T) {
	chain := chainWith(t, func(c *chainT) {
		c.end("review", func(_ context.Context, in *endIn) (endOut, error) {
			if in.Messages[len(in.Messages)-1].Text() == "draft" {
				return endOut{Action: hook.TurnPause, Reason: "a person reviews the draft"}, nil
			}
			return endOut{}, nil
		})
	})
	t.Run("resume without messages completes", func(t *testing.T) {
		p := newScripted(textStep("draft"))
		w := mustNew(t, worker.Config{Provider: p, Hooks: chain})
		res := mustRun(t, w, events.UserText("write"))
		if res.Status != worker.StatusPaused || res.Hook != "review" || !strings.Contains(res.Reason, "a person reviews the draft") {
			t.Fatalf("result %+v", res)
		}
		if len(res.State.Awaiting()) != 0 || res.State.Pause.Event != events.HookOnTurnEnd {
			t.Fatalf("state %+v", res.State)
		}
		if _, err := w.Resume(context.Background(), res.State, map[string]events.Decision{"x": {Kind: events.DecisionApprove}}); !errors.Is(err, worker.ErrInvalidDecision) {
			t.Fatalf("decisions at on_turn_end: %v", err)
		}
		res, err := w.Resume(context.Background(), roundTrip(t, res.State), nil)
		if err != nil || res.Status != worker.StatusCompleted || res.Text() != "draft" || len(p.requests()) != 1 {
			t.Fatalf("res %+v err %v", res, err)
		}
	})
	t.Run("resume with messages goes on", func(t *testing.T) {
		p := newScripted(textStep("draft"), textStep("final"))
		w := mustNew(t, worker.Config{Provider: p, Hooks: chain})
		res := mustRun(t, w, events.UserText("write"))
		res, err := w.Resume(context.Background(), res.State, nil, events.UserText("shorter please"))
		if err != nil || res.Status != worker.StatusCompleted || res.Text() != "final" {
			t.Fatalf("res %+v err %v", res, err)
		}
		if got := p.requests()[1].Messages; got[len(got)-1].Text() != "shorter please" {
			t.Fatalf("request %s", jsonString(t, got))
		}
	})
}

// --- checkpoints and RunFrom ----------------------------------------------

func TestCheckpointAndRunFrom(t *testing.T) {
	var cities cityLog
	blockedStep2 := make(chan struct{})
	p := newScripted(
		toolStep(call{"c1", "get_weather", `{"city":"Oslo"}`}),
		script{evs: []events.Event{started(), events.BlockStart{Index: 0, BlockType: events.BlockText}, events.TextDelta(0, "It is")},
			block: true, started: blockedStep2},
	)
	var mu sync.Mutex
	var cps []*worker.Checkpoint
	save := func(_ context.Context, cp *worker.Checkpoint) error {
		mu.Lock()
		cps = append(cps, roundTrip(t, cp))
		mu.Unlock()
		return nil
	}
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{cities.tool()}, Checkpoint: save, TurnID: "tc",
		Hooks: chainWith(t, func(c *chainT) {
			c.before("vars", func(_ context.Context, in *beforeIn) (beforeOut, error) {
				in.Turn.Vars["k"] = "v"
				return beforeOut{}, nil
			})
		})})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-blockedStep2
		cancel() // the replica "dies" during the second model call
	}()
	res, _ := w.Run(ctx, []events.Message{events.UserText("weather?")})
	if res.Status != worker.StatusAborted {
		t.Fatalf("first run %+v", res)
	}
	mu.Lock()
	phases := []string{}
	for _, cp := range cps {
		phases = append(phases, string(cp.Phase)+":"+itoa(cp.Step))
	}
	last := cps[len(cps)-1]
	mu.Unlock()
	// Before call 1, after the before_tool_call decisions of step 1, before
	// call 2.
	if !slices.Equal(phases, []string{"model:0", "tools:1", "model:1"}) {
		t.Fatalf("checkpoints %v", phases)
	}
	if last.Vars["k"] != "v" || len(last.Messages) != 3 || last.Messages[2].Role != events.RoleTool {
		t.Fatalf("last checkpoint %s", jsonString(t, last))
	}

	// Another replica continues from the last checkpoint.
	p2 := newScripted(textStep("It is sunny."))
	rec := &recorder{}
	w2 := mustNew(t, worker.Config{Provider: p2, Tools: []tool.Tool{cities.tool()}, Observer: rec})
	res, err := w2.RunFrom(context.Background(), last)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != worker.StatusCompleted || res.TurnID != "tc" || res.Text() != "It is sunny." || res.Steps != 2 {
		t.Fatalf("resumed %+v", res)
	}
	if got := cities.get(); !slices.Equal(got, []string{"Oslo"}) {
		t.Fatalf("tool ran %v times: %v", len(got), got)
	}
	if st := rec.ofType(events.TypeTurnStarted)[0].(events.TurnStarted); !st.Resumed || st.TurnID != "tc" {
		t.Fatalf("turn.started %+v", st)
	}
	if step := rec.ofType(events.TypeTurnStep)[0].(events.TurnStep); step.Step != 2 {
		t.Fatalf("turn.step %+v", step)
	}
	req := p2.requests()[0]
	if len(req.Messages) != 3 || !strings.HasPrefix(req.RequestID, "tc-2-r1") || len(req.RequestID) != len("tc-2-r1")+6 {
		t.Fatalf("request %s %s", req.RequestID, jsonString(t, req.Messages))
	}
}

// A checkpoint taken in the tools phase with one result already there:
// RunFrom runs only the other call; after_tool_call runs for both.
func TestRunFromToolsPhase(t *testing.T) {
	var cities cityLog
	inB := make(chan struct{})
	slowB := tool.Must("get_weather", "weather", func(ctx context.Context, a weatherArgs) (string, error) {
		if a.City == "B" {
			close(inB)
			<-ctx.Done()
			return "", ctx.Err()
		}
		return "sunny in " + a.City, nil
	})
	p := newScripted(toolStep(call{"c1", "get_weather", `{"city":"A"}`}, call{"c2", "get_weather", `{"city":"B"}`}))
	var mu sync.Mutex
	var cps []*worker.Checkpoint
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{slowB}, CheckpointToolResults: true,
		Checkpoint: func(_ context.Context, cp *worker.Checkpoint) error {
			mu.Lock()
			cps = append(cps, cp)
			mu.Unlock()
			return nil
		}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-inB
		waitFor(t, "the checkpoint of c1's result", func() bool {
			mu.Lock()
			defer mu.Unlock()
			last := cps[len(cps)-1]
			return last.Phase == worker.PhaseTools && last.Pending[0].State == worker.CallDone
		})
		cancel()
	}()
	if res, _ := w.Run(ctx, []events.Message{events.UserText("go")}); res.Status != worker.StatusAborted {
		t.Fatalf("first run %+v", res)
	}
	mu.Lock()
	last := roundTrip(t, cps[len(cps)-1])
	mu.Unlock()
	if last.Pending[1].State != worker.CallAllowed || last.Pending[0].Result.Content != "sunny in A" {
		t.Fatalf("checkpoint %s", jsonString(t, last))
	}

	var after []string
	chain := chainWith(t, func(c *chainT) {
		c.before("never", func(context.Context, *beforeIn) (beforeOut, error) {
			t.Error("before_tool_call asked again for a decided call")
			return beforeOut{}, nil
		})
		c.after("log", func(_ context.Context, in *afterIn) (afterOut, error) {
			after = append(after, in.Call.ID)
			return afterOut{}, nil
		})
	})
	p2 := newScripted(textStep("ok"))
	w2 := mustNew(t, worker.Config{Provider: p2, Tools: []tool.Tool{cities.tool()}, Hooks: chain})
	res, err := w2.RunFrom(context.Background(), last)
	if err != nil || res.Status != worker.StatusCompleted {
		t.Fatalf("res %+v err %v", res, err)
	}
	if got := cities.get(); !slices.Equal(got, []string{"B"}) {
		t.Fatalf("ran %v", got)
	}
	if !slices.Equal(after, []string{"c2"}) {
		t.Fatalf("after_tool_call for %v", after)
	}
	want := []events.Part{events.ToolResultPart("c1", "sunny in A", false), events.ToolResultPart("c2", "sunny in B", false)}
	if !reflect.DeepEqual(p2.requests()[0].Messages[2].Content, want) {
		t.Fatalf("results %s", jsonString(t, p2.requests()[0].Messages[2]))
	}

	// An output filled in by a service (e.g. from a durable result store)
	// is not run again either; after_tool_call still runs on it.
	filled := last.Clone()
	filled.Pending[1].Output = &worker.ToolOutput{Content: "stored result"}
	after = nil
	p3 := newScripted(textStep("ok"))
	w3 := mustNew(t, worker.Config{Provider: p3, Tools: []tool.Tool{cities.tool()}, Hooks: chain})
	res, err = w3.RunFrom(context.Background(), filled)
	if err != nil || res.Status != worker.StatusCompleted || len(cities.get()) != 1 || !slices.Equal(after, []string{"c2"}) {
		t.Fatalf("res %+v err %v ran %v after %v", res, err, cities.get(), after)
	}
	if got := p3.requests()[0].Messages[2].Content[1].Content; got != "stored result" {
		t.Fatalf("result %q", got)
	}
}

func TestRunFromPausedAndNew(t *testing.T) {
	chain := chainWith(t, func(c *chainT) {
		c.before("approval", hooktest.Always[beforeIn](beforeOut{Action: hook.ToolPause}))
	})
	p := newScripted(toolStep(call{"c1", "get_weather", `{"city":"A"}`}))
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, nil)}, Hooks: chain})
	res := mustRun(t, w, events.UserText("go"))
	again, err := w.RunFrom(context.Background(), res.State)
	if err != nil || again.Status != worker.StatusPaused || len(again.State.Awaiting()) != 1 {
		t.Fatalf("res %+v err %v", again, err)
	}
	// A tools-phase checkpoint with calls before_tool_call has not seen.
	fresh := res.State.Clone()
	fresh.Phase, fresh.Pause = worker.PhaseTools, nil
	fresh.Pending[0].State = worker.CallNew
	again, err = w.RunFrom(context.Background(), fresh)
	if err != nil || again.Status != worker.StatusPaused {
		t.Fatalf("res %+v err %v", again, err)
	}
}

func TestCheckpointErrorFailsTurn(t *testing.T) {
	boom := errors.New("kv: wrong last sequence")
	var aborts abortLog
	w := mustNew(t, worker.Config{Provider: newScripted(textStep("x")),
		Checkpoint: func(context.Context, *worker.Checkpoint) error { return boom },
		Hooks:      chainWith(t, func(c *chainT) { c.abort("log", aborts.hook) })})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusFailed || res.Code != worker.CodeCheckpoint || !errors.Is(res.Err(), worker.ErrCheckpoint) || !errors.Is(res.Err(), boom) {
		t.Fatalf("result %+v", res)
	}
	var te *worker.TurnError
	if !errors.As(res.Err(), &te) || te.Code != "checkpoint" || te.Error() != res.Reason {
		t.Fatalf("turn error %#v", res.Err())
	}
	if len(aborts.get()) != 1 {
		t.Fatal("on_abort did not run")
	}
}

func TestCheckpointValidate(t *testing.T) {
	good := func() *worker.Checkpoint {
		return &worker.Checkpoint{Version: worker.CheckpointVersion, TurnID: "t", Phase: worker.PhaseModel,
			Messages: []events.Message{events.UserText("x")}}
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	pending := []worker.PendingCall{{Call: events.ToolCall{ID: "c", Name: "n"}, State: worker.CallNew}}
	mods := map[string]func(c *worker.Checkpoint){
		"version":       func(c *worker.Checkpoint) { c.Version = 9 },
		"turn id":       func(c *worker.Checkpoint) { c.TurnID = "" },
		"step":          func(c *worker.Checkpoint) { c.Step = -1 },
		"messages":      func(c *worker.Checkpoint) { c.Messages = []events.Message{{Role: "x"}} },
		"append":        func(c *worker.Checkpoint) { c.Append = []events.Message{{Role: "x"}} },
		"phase":         func(c *worker.Checkpoint) { c.Phase = "dreaming" },
		"model+pending": func(c *worker.Checkpoint) { c.Pending = pending },
		"tools+paused": func(c *worker.Checkpoint) {
			c.Phase = worker.PhaseTools
			c.Pending = []worker.PendingCall{{Call: events.ToolCall{ID: "c", Name: "n"}, State: worker.CallPaused}}
		},
		"paused no pause": func(c *worker.Checkpoint) { c.Phase = worker.PhasePaused },
		"paused no calls": func(c *worker.Checkpoint) {
			c.Phase, c.Pause = worker.PhasePaused, &worker.Pause{Event: events.HookBeforeToolCall}
		},
		"turn end with calls": func(c *worker.Checkpoint) {
			c.Phase, c.Pause, c.Pending = worker.PhasePaused, &worker.Pause{Event: events.HookOnTurnEnd}, pending
		},
		"pause event": func(c *worker.Checkpoint) {
			c.Phase, c.Pause = worker.PhasePaused, &worker.Pause{Event: events.HookOnAbort}
		},
		"call id": func(c *worker.Checkpoint) {
			c.Phase, c.Pending = worker.PhaseTools, []worker.PendingCall{{Call: events.ToolCall{Name: "n"}, State: worker.CallNew}}
		},
		"duplicate": func(c *worker.Checkpoint) {
			c.Phase, c.Pending = worker.PhaseTools, append(slices.Clone(pending), pending...)
		},
		"input": func(c *worker.Checkpoint) {
			c.Phase, c.Pending = worker.PhaseTools, []worker.PendingCall{{Call: events.ToolCall{ID: "c", Name: "n", Input: json.RawMessage("{")}, State: worker.CallNew}}
		},
		"state": func(c *worker.Checkpoint) {
			c.Phase, c.Pending = worker.PhaseTools, []worker.PendingCall{{Call: events.ToolCall{ID: "c", Name: "n"}, State: "odd"}}
		},
		"done without result": func(c *worker.Checkpoint) {
			c.Phase, c.Pending = worker.PhaseTools, []worker.PendingCall{{Call: events.ToolCall{ID: "c", Name: "n"}, State: worker.CallDone}}
		},
	}
	for name, mod := range mods {
		c := good()
		mod(c)
		if err := c.Validate(); !errors.Is(err, worker.ErrInvalidCheckpoint) {
			t.Errorf("%s: %v", name, err)
		}
	}
	w := mustNew(t, worker.Config{Provider: newScripted()})
	if _, err := w.RunFrom(context.Background(), &worker.Checkpoint{}); !errors.Is(err, worker.ErrInvalidCheckpoint) {
		t.Fatalf("RunFrom: %v", err)
	}
	var nilCP *worker.Checkpoint
	if nilCP.Clone() != nil || nilCP.Awaiting() != nil {
		t.Fatal("nil checkpoint methods")
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

// A checkpoint's new calls (from another replica, no before_tool_call
// hooks here) whose input is valid JSON but no object are answered with an
// error result, not run; an object input runs.
func TestRunFromCheckpointNewCallNotAnObject(t *testing.T) {
	var ran atomic.Int32
	echo := tool.Must("echo", "echo", func(_ context.Context, a struct {
		X int `json:"x"`
	}) (string, error) {
		ran.Add(1)
		return itoa(a.X), nil
	})
	cp := &worker.Checkpoint{
		Version: worker.CheckpointVersion, TurnID: "tn", Phase: worker.PhaseTools, Step: 1,
		Messages: []events.Message{events.UserText("go"), {Role: events.RoleAssistant, Content: []events.Part{
			events.ToolUsePart("c1", "echo", json.RawMessage(`[1]`)), events.ToolUsePart("c2", "echo", json.RawMessage(` {"x":2}`))}}},
		Pending: []worker.PendingCall{
			{Call: events.ToolCall{ID: "c1", Name: "echo", Input: json.RawMessage(`[1]`)}, State: worker.CallNew},
			{Call: events.ToolCall{ID: "c2", Name: "echo", Input: json.RawMessage(` {"x":2}`)}, State: worker.CallNew},
		},
	}
	w := mustNew(t, worker.Config{Provider: newScripted(textStep("ok")), Tools: []tool.Tool{echo}})
	res, err := w.RunFrom(context.Background(), cp)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	results := res.Messages[2].Content
	if len(results) != 2 || !results[0].IsError || !strings.Contains(results[0].Content, "not a JSON object") ||
		results[1].IsError || results[1].Content != "2" || ran.Load() != 1 {
		t.Fatalf("results %s, tool ran %d times", jsonString(t, results), ran.Load())
	}
}

// tool.CallInfo.First tells a remote executor that nothing can have run a
// call yet: true for the calls of this run's model calls, false for a
// call continued from a checkpoint (another run may have run it).
func TestCallInfoFirstOnlyForThisRunsCalls(t *testing.T) {
	var mu sync.Mutex
	first := map[string][]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	record := tool.Must("rec", "records CallInfo.First", func(c context.Context, _ struct{}) (string, error) {
		ci, _ := tool.CallFrom(c)
		mu.Lock()
		first[ci.CallID] = append(first[ci.CallID], ci.First)
		mu.Unlock()
		if ci.CallID == "c1" && ci.First {
			cancel() // the replica "dies" while c1 runs
			return "", c.Err()
		}
		return "ok", nil
	})
	var cps []*worker.Checkpoint
	w := mustNew(t, worker.Config{Provider: newScripted(toolStep(call{"c1", "rec", `{}`})), Tools: []tool.Tool{record},
		Checkpoint: func(_ context.Context, cp *worker.Checkpoint) error {
			mu.Lock()
			cps = append(cps, cp)
			mu.Unlock()
			return nil
		}})
	if res, _ := w.Run(ctx, []events.Message{events.UserText("go")}); res.Status != worker.StatusAborted {
		t.Fatalf("first run %+v", res)
	}
	mu.Lock()
	last := roundTrip(t, cps[len(cps)-1])
	mu.Unlock()
	if last.Phase != worker.PhaseTools {
		t.Fatalf("last checkpoint %s", jsonString(t, last))
	}
	w2 := mustNew(t, worker.Config{Provider: newScripted(toolStep(call{"c2", "rec", `{}`}), textStep("done")), Tools: []tool.Tool{record}})
	if res, err := w2.RunFrom(context.Background(), last); err != nil || res.Status != worker.StatusCompleted {
		t.Fatalf("continued run %+v, %v", res, err)
	}
	want := map[string][]bool{"c1": {true, false}, "c2": {true}}
	if !reflect.DeepEqual(first, want) {
		t.Fatalf("CallInfo.First by call %v, want %v", first, want)
	}
}
