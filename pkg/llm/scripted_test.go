package llm_test

// The scripted provider of llmtest is tested here, beside the stream
// helpers (show, wantShown) it shares with the Normalize tests.

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
)

func TestScriptedPlaysStepsInOrderAndRecordsRequests(t *testing.T) {
	p := llmtest.NewScripted(llmtest.TextStep("one"), llmtest.TextStep("two"))
	if p.Remaining() != 2 || p.Calls() != 0 {
		t.Fatalf("Remaining = %d, Calls = %d", p.Remaining(), p.Calls())
	}
	temp := 0.5
	req := &llm.Request{
		RequestID: "r1", Model: "openai:gpt", System: "sys",
		Messages: []events.Message{
			events.UserText("hi"),
			{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("c1", "f", json.RawMessage(`{"a":1}`))}},
		},
		Tools:       []events.ToolDefinition{{Name: "f", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		Temperature: &temp,
		Thinking:    &events.ThinkingConfig{BudgetTokens: 100},
	}
	var texts []string
	for i := 0; i < 2; i++ {
		s, err := p.Stream(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := llm.Collect(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := llm.CheckWellFormed(evs); err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if d, ok := ev.(events.BlockDelta); ok {
				texts = append(texts, d.Content)
			}
		}
	}
	if !reflect.DeepEqual(texts, []string{"one", "two"}) {
		t.Fatalf("texts = %q", texts)
	}
	// The caller reuses its request: the recording must not change.
	req.Messages[0].Content[0].Text = "changed"
	req.Messages[1].Content[0].Input[2] = 'X'
	req.Tools[0].InputSchema[2] = 'X'
	*req.Temperature = 9
	req.Thinking.BudgetTokens = 9
	req.Messages = append(req.Messages, events.UserText("more"))

	got := p.Requests()
	if len(got) != 2 || p.Calls() != 2 {
		t.Fatalf("recorded %d requests, Calls = %d", len(got), p.Calls())
	}
	wantJSON := `{"request_id":"r1","model":"openai:gpt","system":"sys","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{"a":1}}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"temperature":0.5,"thinking":{"budget_tokens":100}}`
	for i, r := range got {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != wantJSON {
			t.Fatalf("request %d = %s\nwant %s", i, b, wantJSON)
		}
	}
	// Requests returns copies too.
	got[0].Messages[0].Content[0].Text = "mutated"
	if p.Requests()[0].Messages[0].Content[0].Text != "hi" {
		t.Fatal("Requests returned shared memory")
	}

	// Out of steps.
	if _, err := p.Stream(context.Background(), nil); !errors.Is(err, llmtest.ErrScriptExhausted) {
		t.Fatalf("err = %v, want ErrScriptExhausted", err)
	}
	if p.Calls() != 3 || p.Remaining() != 0 {
		t.Fatalf("Calls = %d Remaining = %d", p.Calls(), p.Remaining())
	}
	p.SetFallback(llmtest.TextStep("again"))
	for i := 0; i < 2; i++ {
		s, err := p.Stream(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		evs, _ := llm.Collect(s)
		if len(evs) != 5 {
			t.Fatalf("fallback played %d events", len(evs))
		}
	}
	p.Add(llmtest.FailStep(errors.New("x")))
	if p.Remaining() != 1 {
		t.Fatalf("Remaining after Add = %d", p.Remaining())
	}
}

func TestScriptedFailures(t *testing.T) {
	boom := errors.New("boom")
	onCallErr := errors.New("on call")
	var seen string
	p := llmtest.NewScripted(
		llmtest.FailStep(boom),
		llmtest.FailMidStep(boom, "par", "tial"),
		llmtest.Script{OnCall: func(ctx context.Context, req *llm.Request) error { seen = req.RequestID; return onCallErr }},
		llmtest.TextStep("never"),
	)
	if _, err := p.Stream(context.Background(), &llm.Request{}); err != boom {
		t.Fatalf("FailStep: err = %v", err)
	}
	s, err := p.Stream(context.Background(), &llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := llm.Collect(s)
	if err != boom {
		t.Fatalf("FailMidStep: err = %v", err)
	}
	wantShown(t, show(t, evs), "status started", "start 0 text", `delta 0 text "par"`, `delta 0 text "tial"`)
	if _, err := p.Stream(context.Background(), &llm.Request{RequestID: "r9"}); err != onCallErr || seen != "r9" {
		t.Fatalf("OnCall: err = %v seen = %q", err, seen)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Stream(ctx, &llm.Request{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: err = %v", err)
	}
}

func TestScriptedStreamHonoursCancelAndClose(t *testing.T) {
	// Cancel while blocking.
	ctx, cancel := context.WithCancel(context.Background())
	p := llmtest.NewScripted(llmtest.BlockingStep("x"), llmtest.BlockingStep(), llmtest.TextStep("a", "b").WithDelay(time.Hour), llmtest.TextStep("c").WithDelay(time.Hour))
	s, _ := p.Stream(ctx, &llm.Request{})
	var n int
	for s.Next() {
		n++
		if n == 3 {
			cancel()
		}
	}
	if n != 3 || !errors.Is(s.Err(), context.Canceled) {
		t.Fatalf("events = %d, Err = %v", n, s.Err())
	}
	if s.Next() {
		t.Fatal("Next after end")
	}

	// Close unblocks a blocked Next.
	s, _ = p.Stream(context.Background(), &llm.Request{})
	s.Next()
	s.Next()
	done := make(chan bool)
	go func() { done <- s.Next() }()
	s.Close()
	if <-done || !errors.Is(s.Err(), llm.ErrStreamClosed) {
		t.Fatalf("Err after Close = %v", s.Err())
	}

	// Delay is cut by cancel and by Close.
	ctx, cancel = context.WithCancel(context.Background())
	s, _ = p.Stream(ctx, &llm.Request{})
	go cancel()
	if s.Next() || !errors.Is(s.Err(), context.Canceled) {
		t.Fatalf("delay vs cancel: Err = %v", s.Err())
	}
	s, _ = p.Stream(context.Background(), &llm.Request{})
	go s.Close()
	if s.Next() || !errors.Is(s.Err(), llm.ErrStreamClosed) {
		t.Fatalf("delay vs close: Err = %v", s.Err())
	}
	// Close before Next.
	p.Add(llmtest.TextStep("d"))
	s, _ = p.Stream(context.Background(), &llm.Request{})
	s.Close()
	if s.Next() || !errors.Is(s.Err(), llm.ErrStreamClosed) || s.Current() != nil {
		t.Fatalf("closed: Err = %v", s.Err())
	}
}

func TestStepBuildersAreWellFormed(t *testing.T) {
	steps := map[string]llmtest.Script{
		"text":          llmtest.TextStep("a", "b"),
		"thinking":      llmtest.ThinkingStep("think", "sig", "answer"),
		"tools":         llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "f", Input: `{"q":"日本語"}`}, llmtest.ToolCallSpec{ID: "c2", Name: "g"}),
		"text and tool": llmtest.TextToolStep("let me look", llmtest.ToolCallSpec{ID: "c1", Name: "f", Input: "{}"}),
		"usage":         llmtest.TextStep("x").WithUsage(10, 5),
		"usage at end":  llmtest.Script{Events: []events.Event{started}}.WithUsage(1, 2),
	}
	for name, s := range steps {
		evs := s.Events
		if name == "usage at end" {
			evs = append(evs, completed)
		}
		if err := llm.CheckWellFormed(evs); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	wantShown(t, show(t, steps["tools"].Events),
		"status started",
		"start 0 tool_use c1 f", `delta 0 input_json "{\"q\":\""`, `delta 0 input_json "日本語\"}"`, "stop 0 tool_use tool_use",
		"start 1 tool_use c2 g", "stop 1 tool_use tool_use",
		"status completed")
	wantShown(t, show(t, steps["text and tool"].Events),
		"status started",
		"start 0 text", `delta 0 text "let me look"`, "stop 0 text",
		"start 1 tool_use c1 f", `delta 1 input_json "{"`, `delta 1 input_json "}"`, "stop 1 tool_use tool_use",
		"status completed")
	u := steps["usage"].Events
	if got, ok := u[len(u)-2].(events.UsageEvent); !ok || *got.InputTokens != 10 || *got.OutputTokens != 5 || *got.TotalTokens != 15 {
		t.Fatalf("usage event = %#v", u[len(u)-2])
	}
	// A tool step without ids becomes well-formed through Normalize.
	evs, err := llm.Collect(llm.Normalize(context.Background(), llm.SliceStream(llmtest.ToolStep(llmtest.ToolCallSpec{Name: "f"}).Events...), llm.NormalizeOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := llm.CheckWellFormed(evs); err != nil {
		t.Fatal(err)
	}
}

func TestScriptedConcurrentCalls(t *testing.T) {
	const n = 50
	p := llmtest.NewScripted()
	p.SetFallback(llmtest.TextStep("x"))
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := p.Stream(context.Background(), &llm.Request{RequestID: "r", Messages: []events.Message{events.UserText("q")}})
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := llm.Collect(s); err != nil {
				t.Error(err)
			}
			_ = p.Requests()
		}()
	}
	wg.Wait()
	if p.Calls() != n {
		t.Fatalf("Calls = %d, want %d", p.Calls(), n)
	}
}

func TestSliceStream(t *testing.T) {
	s := llm.SliceStream(started, completed)
	if s.Current() != nil {
		t.Fatal("Current before Next")
	}
	if !s.Next() || s.Current() != started {
		t.Fatal("first event")
	}
	s.Close()
	if s.Next() || !errors.Is(s.Err(), llm.ErrStreamClosed) || s.Current() != nil {
		t.Fatalf("after Close: Err = %v", s.Err())
	}
	if s.Next() {
		t.Fatal("Next after error")
	}
	// Closing after the end is not an error.
	s = llm.SliceStream(started)
	for s.Next() {
	}
	s.Close()
	if s.Next() || s.Err() != nil {
		t.Fatalf("Err = %v", s.Err())
	}
}

type closeErrStream struct{ llm.Stream }

func (closeErrStream) Close() error { return errors.New("close failed") }

func TestCollectReportsCloseError(t *testing.T) {
	evs, err := llm.Collect(closeErrStream{llm.SliceStream(started)})
	if len(evs) != 1 || err == nil || err.Error() != "close failed" {
		t.Fatalf("evs = %v, err = %v", evs, err)
	}
}

// A timed step yields each block's last event at the block's end, not
// earlier (a tool call's input is complete then), and no later than a
// scheduling slack; its stream stays well formed.
func TestTimedStepYieldsBlocksAtTheirEnds(t *testing.T) {
	const first, second = 150 * time.Millisecond, 300 * time.Millisecond
	step := llmtest.TimedStep(
		llmtest.Timed(first, llmtest.ToolUseBlockEvents(0, llmtest.ToolCallSpec{ID: "c1", Name: "f", Input: `{"a":1}`})),
		llmtest.Timed(second, llmtest.TextBlockEvents(1, "a", "b", "c")),
	)
	p := llmtest.NewScripted(step)
	start := time.Now()
	s := p.MustStream(t)
	defer s.Close()
	var stops []time.Duration
	var last time.Duration
	n := 0
	for s.Next() {
		n++
		last = time.Since(start)
		if _, ok := s.Current().(events.BlockStop); ok {
			stops = append(stops, last)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(step.Events) || len(stops) != 2 {
		t.Fatalf("%d events with %d block stops, want %d and 2", n, len(stops), len(step.Events))
	}
	const slack = 100 * time.Millisecond
	for i, want := range []time.Duration{first, second} {
		if stops[i] < want || stops[i] > want+slack {
			t.Errorf("block %d stopped %v after the call, want %v (+%v)", i, stops[i], want, slack)
		}
	}
	if last < second || last > second+slack {
		t.Errorf("stream ended %v after the call, want %v", last, second)
	}
	if err := llm.CheckWellFormed(step.Events); err != nil {
		t.Errorf("timed step is not well formed: %v", err)
	}
}
