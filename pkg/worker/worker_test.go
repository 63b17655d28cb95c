package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

type weatherArgs struct {
	City string `json:"city" jsonschema:"description=the city"`
}

func weatherTool(t *testing.T, calls *atomic.Int32) tool.Tool {
	t.Helper()
	return tool.Must("get_weather", "Current weather of a city.",
		func(_ context.Context, a weatherArgs) (string, error) {
			if calls != nil {
				calls.Add(1)
			}
			return "sunny in " + a.City, nil
		})
}

func TestTextTurnEventsOneToOne(t *testing.T) {
	p := newScripted(script{evs: stream(
		textBlock(0, events.StopEndTurn, "Hel", "lo"),
		[]events.Event{usage(10, 2)},
	)})
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Model: "test:m", TurnID: "t1", SessionID: "s1", Observer: rec})
	res := mustRun(t, w, events.UserText("hi"))

	if res.Status != worker.StatusCompleted || res.Err() != nil {
		t.Fatalf("status %s err %v", res.Status, res.Err())
	}
	want := []events.Message{events.UserText("hi"), events.AssistantText("Hello")}
	if !reflect.DeepEqual(res.Messages, want) {
		t.Fatalf("messages\n got %s\nwant %s", jsonString(t, res.Messages), jsonString(t, want))
	}
	if res.Text() != "Hello" || res.StopReason != events.StopEndTurn || res.Steps != 1 || res.TurnID != "t1" {
		t.Fatalf("result %+v", res)
	}
	if *res.Usage.InputTokens != 10 || *res.Usage.OutputTokens != 2 {
		t.Fatalf("usage %s", jsonString(t, res.Usage))
	}

	// docs/protocol.md §5: the sequence of worker events of a one-step text turn.
	wantTypes := []string{
		"turn.started", "turn.step",
		"block.start/text", "block.delta/text", "block.delta/text", "block.stop/text", "text.complete",
		"usage", "turn.completed",
	}
	if got := rec.types(); !slices.Equal(got, wantTypes) {
		t.Fatalf("event types\n got %v\nwant %v", got, wantTypes)
	}
	evs := rec.events()
	for _, ev := range evs {
		if ev.TurnID != "t1" || ev.SessionID != "s1" {
			t.Fatalf("event %s has ids %q %q", ev.Type(), ev.TurnID, ev.SessionID)
		}
	}
	if d := evs[0].Data.(events.TurnStarted); !reflect.DeepEqual(d, events.TurnStarted{TurnID: "t1", SessionID: "s1", Model: "test:m"}) {
		t.Fatalf("turn.started %+v", d)
	}
	if d := evs[1].Data.(events.TurnStep); d != (events.TurnStep{Step: 1, Attempt: 1, Model: "test:m"}) {
		t.Fatalf("turn.step %+v", d)
	}
	if got := jsonString(t, evs[3].Data); got != `{"index":0,"text":"Hel","step":1}` {
		t.Fatalf("delta json %s", got)
	}
	if got := jsonString(t, evs[5].Data); got != `{"index":0,"block_type":"text","stop_reason":"end_turn","step":1}` {
		t.Fatalf("stop json %s", got)
	}
	if d := evs[6].Data.(events.TextComplete); d != (events.TextComplete{Step: 1, Index: 0, Text: "Hello"}) {
		t.Fatalf("text.complete %+v", d)
	}
	if got := jsonString(t, evs[7].Data); got != `{"step":1,"model":"test:m","usage":{"input_tokens":10,"output_tokens":2},"total":{"input_tokens":10,"output_tokens":2}}` {
		t.Fatalf("usage json %s", got)
	}
	done := evs[8].Data.(events.TurnCompleted)
	if !reflect.DeepEqual(done.Messages, want) || done.StopReason != events.StopEndTurn {
		t.Fatalf("turn.completed %+v", done)
	}
}

// A provider that sends the stop reason after its blocks (Anthropic) puts
// it on the completed status (docs/protocol.md §3): it is the turn's.
func TestStopReasonOfTheCompletedStatus(t *testing.T) {
	evs := append([]events.Event{started()}, textBlock(0, "", "cut sh")...)
	evs = append(evs, events.StatusEvent{Status: events.StatusCompleted, StopReason: events.StopMaxTokens})
	w := mustNew(t, worker.Config{Provider: newScripted(script{evs: evs}), Model: "test:m", TurnID: "t1"})
	res := mustRun(t, w, events.UserText("hi"))
	if res.StopReason != events.StopMaxTokens {
		t.Fatalf("stop reason %q, want the status's max_tokens", res.StopReason)
	}
}

// Every event's Data has the Go type docs/protocol.md §5 gives its type, on the
// right channel.
func TestObserverTypesAndChannels(t *testing.T) {
	wantData := map[string]reflect.Type{
		events.TypeTurnStarted:      reflect.TypeFor[events.TurnStarted](),
		events.TypeTurnStep:         reflect.TypeFor[events.TurnStep](),
		events.TypeTurnCompleted:    reflect.TypeFor[events.TurnCompleted](),
		events.TypeBlockStart:       reflect.TypeFor[events.WorkerBlockStart](),
		events.TypeBlockDelta:       reflect.TypeFor[events.WorkerBlockDelta](),
		events.TypeBlockStop:        reflect.TypeFor[events.WorkerBlockStop](),
		events.TypeTextComplete:     reflect.TypeFor[events.TextComplete](),
		events.TypeToolCallComplete: reflect.TypeFor[events.ToolCallComplete](),
		events.TypeToolStarted:      reflect.TypeFor[events.ToolStarted](),
		events.TypeToolResult:       reflect.TypeFor[events.ToolCallResult](),
		events.TypeUsage:            reflect.TypeFor[events.UsageReport](),
		events.TypeHookDecision:     reflect.TypeFor[events.HookDecision](),
	}
	wantChan := map[string]events.Channel{
		events.TypeTurnStarted: events.ChannelTurn, events.TypeTurnStep: events.ChannelTurn,
		events.TypeTurnCompleted: events.ChannelTurn, events.TypeTextComplete: events.ChannelText,
		events.TypeToolCallComplete: events.ChannelTool, events.TypeToolStarted: events.ChannelTool,
		events.TypeToolResult: events.ChannelTool, events.TypeUsage: events.ChannelUsage,
		events.TypeHookDecision: events.ChannelHook,
	}
	p := newScripted(
		script{evs: stream(thinkingBlock(0, "hmm", "sig"), toolBlock(1, "c1", "get_weather", `{"city":"Oslo"}`), []events.Event{usage(5, 1)})},
		textStep("done"),
	)
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, nil)}, Observer: rec, Hooks: chainWith(t, func(c *chainT) {
		c.before("audit", beforeContinue)
	})})
	if res := mustRun(t, w, events.UserText("weather?")); res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	seen := map[string]bool{}
	for _, ev := range rec.events() {
		seen[ev.Type()] = true
		if want, ok := wantData[ev.Type()]; ok && reflect.TypeOf(ev.Data) != want {
			t.Errorf("%s: data %T, want %v", ev.Type(), ev.Data, want)
		}
		if want, ok := wantChan[ev.Type()]; ok && ev.Channel() != want {
			t.Errorf("%s: channel %s, want %s", ev.Type(), ev.Channel(), want)
		}
		if strings.HasPrefix(ev.Type(), "llmw.block.") {
			var bt events.BlockType
			switch d := ev.Data.(type) {
			case events.WorkerBlockStart:
				bt = d.BlockType
			case events.WorkerBlockStop:
				bt = d.BlockType
			case events.WorkerBlockDelta:
				bt = map[events.DeltaKind]events.BlockType{events.DeltaText: events.BlockText,
					events.DeltaThinking: events.BlockThinking, events.DeltaInputJSON: events.BlockToolUse}[d.Kind]
			}
			if ev.Channel() != events.BlockChannel(bt) {
				t.Errorf("%s of %s on channel %s", ev.Type(), bt, ev.Channel())
			}
		}
	}
	for typ := range wantData {
		if !seen[typ] {
			t.Errorf("no %s event", typ)
		}
	}
	tcc := rec.ofType(events.TypeToolCallComplete)[0].(events.ToolCallComplete)
	if tcc.ID != "c1" || tcc.Name != "get_weather" || string(tcc.Input) != `{"city":"Oslo"}` || tcc.Step != 1 {
		t.Fatalf("toolcall.complete %+v", tcc)
	}
	tr := rec.ofType(events.TypeToolResult)[0].(events.ToolCallResult)
	if tr.CallID != "c1" || tr.Name != "get_weather" || tr.Content != "sunny in Oslo" || tr.IsError {
		t.Fatalf("tool.result %+v", tr)
	}
}

func TestMultiStepToolLoopRequests(t *testing.T) {
	var calls atomic.Int32
	p := newScripted(
		script{evs: stream(
			thinkingBlock(0, "I should check", "sig-1"),
			textBlock(1, "", "Checking."),
			toolBlock(2, "c1", "get_weather", `{"city":"Oslo"}`),
			toolBlock(3, "c2", "get_weather", `{"city":"Rome"}`),
		)},
		toolStep(call{"c3", "get_weather", `{"city":"Paris"}`}),
		textStep("All sunny."),
	)
	w := mustNew(t, worker.Config{Provider: p, Model: "test:m", System: "be brief", Tools: []tool.Tool{weatherTool(t, &calls)}, MaxTokens: 100})
	res := mustRun(t, w, events.UserText("weather?"))
	if res.Status != worker.StatusCompleted || res.Steps != 3 || calls.Load() != 3 {
		t.Fatalf("status %s steps %d calls %d: %s", res.Status, res.Steps, calls.Load(), res.Reason)
	}
	reqs := p.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, r := range reqs {
		if r.Model != "test:m" || r.System != "be brief" || r.MaxTokens != 100 || len(r.Tools) != 1 || r.Tools[0].Name != "get_weather" {
			t.Fatalf("request %d: %+v", i, r)
		}
		if r.RequestID == "" {
			t.Fatalf("request %d without id", i)
		}
	}
	// The second request carries the first response back: thinking with its
	// signature and its origin (the model's provider), text, both
	// tool_use parts in block order, then one tool message with the
	// results in call order.
	want2 := []events.Message{
		events.UserText("weather?"),
		{Role: events.RoleAssistant, Content: []events.Part{
			{Type: events.PartThinking, Thinking: "I should check", Signature: "sig-1", Origin: "test"},
			events.TextPart("Checking."),
			events.ToolUsePart("c1", "get_weather", json.RawMessage(`{"city":"Oslo"}`)),
			events.ToolUsePart("c2", "get_weather", json.RawMessage(`{"city":"Rome"}`)),
		}},
		{Role: events.RoleTool, Content: []events.Part{
			events.ToolResultPart("c1", "sunny in Oslo", false),
			events.ToolResultPart("c2", "sunny in Rome", false),
		}},
	}
	if got, want := jsonString(t, reqs[1].Messages), jsonString(t, want2); got != want {
		t.Fatalf("second request\n got %s\nwant %s", got, want)
	}
	want3 := append(want2,
		events.Message{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("c3", "get_weather", json.RawMessage(`{"city":"Paris"}`))}},
		events.Message{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("c3", "sunny in Paris", false)}},
	)
	if got, want := jsonString(t, reqs[2].Messages), jsonString(t, want3); got != want {
		t.Fatalf("third request\n got %s\nwant %s", got, want)
	}
	if got, want := jsonString(t, res.Messages), jsonString(t, append(want3, events.AssistantText("All sunny."))); got != want {
		t.Fatalf("transcript\n got %s\nwant %s", got, want)
	}
}

func TestParallelToolsOverlap(t *testing.T) {
	aIn, bIn := make(chan struct{}), make(chan struct{})
	// Each tool waits until the other one has started: run one after the
	// other, the first would wait forever (until its deadline).
	barrier := func(mine, other chan struct{}) func(ctx context.Context, _ struct{}) (string, error) {
		return func(ctx context.Context, _ struct{}) (string, error) {
			close(mine)
			select {
			case <-other:
				return "met", nil
			case <-time.After(10 * time.Second):
				return "", errors.New("the other tool never ran at the same time")
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
	}
	a := tool.Must("tool_a", "a", barrier(aIn, bIn))
	b := tool.Must("tool_b", "b", barrier(bIn, aIn))
	p := newScripted(toolStep(call{"ca", "tool_a", `{}`}, call{"cb", "tool_b", `{}`}), textStep("ok"))
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{a, b}})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	got := res.Messages[2]
	want := events.Message{Role: events.RoleTool, Content: []events.Part{
		events.ToolResultPart("ca", "met", false), events.ToolResultPart("cb", "met", false)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("results %s", jsonString(t, got))
	}
}

// After a fast first call, the two calls behind it still run at the same
// time, whichever goroutine takes them (the Run goroutine, its call ended,
// takes those no tool goroutine took yet; the other runs on a tool
// goroutine).
func TestCallsBehindAFastOneOverlap(t *testing.T) {
	for range 20 {
		aIn, bIn := make(chan struct{}), make(chan struct{})
		barrier := func(mine, other chan struct{}) func(ctx context.Context, _ struct{}) (string, error) {
			return func(ctx context.Context, _ struct{}) (string, error) {
				close(mine)
				select {
				case <-other:
					return "met", nil
				case <-time.After(10 * time.Second):
					return "", errors.New("the other tool never ran at the same time")
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
		}
		fast := tool.Must("fast", "fast", func(context.Context, struct{}) (string, error) { return "fast", nil })
		a := tool.Must("tool_a", "a", barrier(aIn, bIn))
		b := tool.Must("tool_b", "b", barrier(bIn, aIn))
		p := newScripted(toolStep(call{"cf", "fast", `{}`}, call{"ca", "tool_a", `{}`}, call{"cb", "tool_b", `{}`}), textStep("ok"))
		w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{fast, a, b}})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusCompleted {
			t.Fatalf("status %s: %s", res.Status, res.Reason)
		}
		want := events.Message{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("cf", "fast", false),
			events.ToolResultPart("ca", "met", false), events.ToolResultPart("cb", "met", false)}}
		if got := res.Messages[2]; !reflect.DeepEqual(got, want) {
			t.Fatalf("results %s", jsonString(t, got))
		}
	}
}

// Results are appended in call order even when a later call finishes
// first, and after_tool_call sees them in call order.
func TestResultsInCallOrder(t *testing.T) {
	release := make(chan struct{})
	slow := tool.Must("slow", "slow", func(ctx context.Context, _ struct{}) (string, error) {
		select {
		case <-release:
			return "slow done", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	rec := &recorder{}
	fast := tool.Must("fast", "fast", func(context.Context, struct{}) (string, error) { return "fast done", nil })
	// The fast call's own result is there before the slow one's; release
	// the slow tool only once the fast tool has finished.
	fastDone := make(chan struct{})
	fastWrapped := tool.Must("fast", "fast", func(ctx context.Context, a struct{}) (string, error) {
		defer close(fastDone)
		return fast.Call(ctx, a)
	})
	go func() {
		<-fastDone
		close(release)
	}()
	var order []string
	chain := chainWith(t, func(c *chainT) {
		c.after("order", func(_ context.Context, in *afterIn) (afterOut, error) {
			order = append(order, in.Call.ID)
			return afterOut{}, nil
		})
	})
	p := newScripted(toolStep(call{"c1", "slow", `{}`}, call{"c2", "fast", `{}`}), textStep("ok"))
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{slow, fastWrapped}, Hooks: chain, Observer: rec})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	if !slices.Equal(order, []string{"c1", "c2"}) {
		t.Fatalf("after_tool_call order %v", order)
	}
	want := []events.Part{events.ToolResultPart("c1", "slow done", false), events.ToolResultPart("c2", "fast done", false)}
	if !reflect.DeepEqual(res.Messages[2].Content, want) {
		t.Fatalf("results %s", jsonString(t, res.Messages[2]))
	}
	var ids []string
	for _, d := range rec.ofType(events.TypeToolResult) {
		ids = append(ids, d.(events.ToolCallResult).CallID)
	}
	if !slices.Equal(ids, []string{"c1", "c2"}) {
		t.Fatalf("tool.result order %v", ids)
	}
}

// Each of a step's parallel calls (the first runs on Run's goroutine, the
// others each in their own) sees its own CallInfo, and its progress
// reports become events of its own call.
func TestParallelCallsCallInfoAndProgress(t *testing.T) {
	type args struct {
		K string `json:"k"`
	}
	var mu sync.Mutex
	seen := map[string]tool.CallInfo{}
	who := tool.Must("who", "ids", func(ctx context.Context, a args) (string, error) {
		ci, ok := tool.CallFrom(ctx)
		if !ok {
			return "", errors.New("no call info")
		}
		mu.Lock()
		seen[a.K] = ci
		mu.Unlock()
		tool.ReportProgress(ctx, tool.Progress{Progress: 1, Total: 1, Message: a.K})
		return a.K, nil
	})
	p := newScripted(toolStep(call{"c1", "who", `{"k":"a"}`}, call{"c2", "who", `{"k":"b"}`}, call{"c3", "who", `{"k":"c"}`}), textStep("ok"))
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{who}, TurnID: "turn-7", SessionID: "sess-7", Observer: rec})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	want := map[string]tool.CallInfo{
		"a": {TurnID: "turn-7", SessionID: "sess-7", CallID: "c1", Name: "who", Step: 1, First: true},
		"b": {TurnID: "turn-7", SessionID: "sess-7", CallID: "c2", Name: "who", Step: 1, First: true},
		"c": {TurnID: "turn-7", SessionID: "sess-7", CallID: "c3", Name: "who", Step: 1, First: true},
	}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("call infos %+v, want %+v", seen, want)
	}
	progress := map[string]string{}
	for _, d := range rec.ofType(events.TypeToolProgress) {
		pr := d.(events.ToolProgress)
		progress[pr.CallID] = pr.Message
	}
	if want := map[string]string{"c1": "a", "c2": "b", "c3": "c"}; !reflect.DeepEqual(progress, want) {
		t.Fatalf("progress by call %v, want %v", progress, want)
	}
	wantParts := []events.Part{events.ToolResultPart("c1", "a", false), events.ToolResultPart("c2", "b", false), events.ToolResultPart("c3", "c", false)}
	if !reflect.DeepEqual(res.Messages[2].Content, wantParts) {
		t.Fatalf("results %s", jsonString(t, res.Messages[2]))
	}
}

// The first call's result is settled (after_tool_call, llmw.tool.result)
// as soon as it is there, while a later call of the step still runs: the
// later call waits for that result event.
func TestFirstResultSettledWhileOthersRun(t *testing.T) {
	firstResult := make(chan struct{})
	var once sync.Once
	rec := worker.ObserverFunc(func(ev worker.Event) {
		if r, ok := ev.Data.(events.ToolCallResult); ok && r.CallID == "c1" {
			once.Do(func() { close(firstResult) })
		}
	})
	quick := tool.Must("quick", "q", func(context.Context, struct{}) (string, error) { return "quick", nil })
	waiter := tool.Must("waiter", "w", func(ctx context.Context, _ struct{}) (string, error) {
		select {
		case <-firstResult:
			return "after", nil
		case <-time.After(10 * time.Second):
			return "", errors.New("the first call's result was not settled while this one ran")
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	p := newScripted(toolStep(call{"c1", "quick", `{}`}, call{"c2", "waiter", `{}`}), textStep("ok"))
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{quick, waiter}, Observer: rec})
	res := mustRun(t, w, events.UserText("go"))
	want := []events.Part{events.ToolResultPart("c1", "quick", false), events.ToolResultPart("c2", "after", false)}
	if res.Status != worker.StatusCompleted || !reflect.DeepEqual(res.Messages[2].Content, want) {
		t.Fatalf("status %s (%s), results %s", res.Status, res.Reason, jsonString(t, res.Messages))
	}
}

// The calls of every step run at the same time, also when a later step has
// more calls than an earlier one (the turn's tool goroutines are reused
// and added to), and no goroutine of the turn outlives Run.
func TestParallelCallsAcrossSteps(t *testing.T) {
	type args struct {
		Group string `json:"group"`
		Size  int    `json:"size"`
	}
	var mu sync.Mutex
	arrived := map[string]int{}
	met := map[string]chan struct{}{}
	meet := tool.Must("meet", "waits until size calls of its group run", func(ctx context.Context, a args) (string, error) {
		mu.Lock()
		if met[a.Group] == nil {
			met[a.Group] = make(chan struct{})
		}
		ch := met[a.Group]
		if arrived[a.Group]++; arrived[a.Group] == a.Size {
			close(ch)
		}
		mu.Unlock()
		select {
		case <-ch:
			return "met", nil
		case <-time.After(10 * time.Second):
			return "", errors.New("the calls of the step did not run at the same time")
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	group := func(g string, n int) []call {
		var calls []call
		for i := range n {
			calls = append(calls, call{g + "-" + strconv.Itoa(i), "meet", `{"group":"` + g + `","size":` + strconv.Itoa(n) + `}`})
		}
		return calls
	}
	p := newScripted(toolStep(group("a", 2)...), toolStep(group("b", 4)...), toolStep(group("c", 3)...), toolStep(group("d", 1)...), textStep("ok"))
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{meet}})
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	for _, m := range res.Messages {
		for _, part := range m.Content {
			if part.Type == events.PartToolResult && (part.Content != "met" || part.IsError) {
				t.Fatalf("result of %s: %q", part.ToolUseID, part.Content)
			}
		}
	}
	if got := len(res.Messages); got != 10 { // user, 4 × (assistant, tool), assistant
		t.Fatalf("%d messages", got)
	}
	goleak.VerifyNone(t)
}
