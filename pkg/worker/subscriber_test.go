package worker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/timeline"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// lineScope is a per-block scope: each block gets a fresh one.
type lineScope struct {
	n   int
	buf strings.Builder
}

func TestPerKindRegistration(t *testing.T) {
	p := newScripted(
		script{evs: stream(
			thinkingBlock(0, "plan", "s"),
			textBlock(1, "", "a", "b"),
			toolBlock(2, "c1", "get_weather", `{"city":"X"}`),
		)},
		script{evs: stream(textBlock(0, events.StopEndTurn, "c"))},
	)
	var log []string
	add := func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }
	w := mustNew(t, worker.Config{Provider: p, Tools: []tool.Tool{weatherTool(t, nil)}})
	worker.OnTextBlock(w, timeline.HandlerFunc[timeline.TextBlockEvent, lineScope](func(s *lineScope, ev timeline.TextBlockEvent) {
		s.n++
		if ev.Phase == timeline.PhaseDelta {
			s.buf.WriteString(ev.Text)
		}
		if ev.Phase == timeline.PhaseStop {
			add("text %d %q after %d events", ev.Index, s.buf.String(), s.n)
		}
	}))
	worker.OnThinkingBlock(w, timeline.HandlerFunc[timeline.ThinkingBlockEvent, lineScope](func(s *lineScope, ev timeline.ThinkingBlockEvent) {
		if ev.Phase == timeline.PhaseStop {
			add("thinking sig=%s", ev.Signature)
		}
	}))
	worker.OnToolUseBlock(w, timeline.HandlerFunc[timeline.ToolUseBlockEvent, lineScope](func(s *lineScope, ev timeline.ToolUseBlockEvent) {
		if ev.Phase == timeline.PhaseStop {
			add("tool_use %s", ev.Name)
		}
	}))
	w.OnStatus(func(s events.StatusEvent) { add("status %s", s.Status) })
	w.OnTextComplete(func(c events.TextComplete) { add("complete %d/%d %q", c.Step, c.Index, c.Text) })
	w.OnToolCallComplete(func(c events.ToolCallComplete) { add("call %s %s", c.ID, c.Input) })
	w.OnTurnStart(func(s int) { add("start %d", s) })
	w.OnTurnEnd(func(s int) { add("end %d", s) })
	// nil handlers are ignored
	w.OnTextComplete(nil)
	w.OnToolCallComplete(nil)
	w.OnTurnStart(nil)
	w.OnTurnEnd(nil)
	w.OnUsage(nil)
	w.AddObserver(nil)
	worker.Subscribe[struct{}, struct{}](w, nil)

	if res := mustRun(t, w, events.UserText("go")); res.Status != worker.StatusCompleted {
		t.Fatal(res.Reason)
	}
	want := []string{
		"start 1", "status started",
		"thinking sig=s",
		`text 1 "ab" after 4 events`, `complete 1/1 "ab"`,
		"tool_use get_weather", `call c1 {"city":"X"}`,
		"status completed", "end 1",
		"start 2", "status started", `text 0 "c" after 3 events`, `complete 2/0 "c"`, "status completed", "end 2",
	}
	if !slices.Equal(log, want) {
		t.Fatalf("log\n got %q\nwant %q", log, want)
	}
}

type thinkingUI struct {
	worker.NopSubscriber[lineScope, lineScope]
	mu  sync.Mutex
	log []string
}

func (u *thinkingUI) OnThinkingBlock(s *lineScope, ev timeline.ThinkingBlockEvent) {
	if ev.Phase == timeline.PhaseDelta {
		s.buf.WriteString(ev.Thinking)
	}
	if ev.Phase == timeline.PhaseStop {
		u.log = append(u.log, "thought: "+s.buf.String())
	}
}

func (u *thinkingUI) OnUsage(e events.UsageEvent) {
	u.log = append(u.log, fmt.Sprintf("usage %d", *e.OutputTokens))
}
func (u *thinkingUI) OnStatus(e events.StatusEvent) {
	u.log = append(u.log, "status "+string(e.Status))
}
func (u *thinkingUI) OnError(e events.ErrorEvent) { u.log = append(u.log, "error "+e.Message) }

func TestSubscriberThinkingAndMeta(t *testing.T) {
	ui := &thinkingUI{}
	rec := &recorder{}
	p := newScripted(script{evs: []events.Event{
		started(),
		thinkingBlock(0, "deep", "sig")[0], thinkingBlock(0, "deep", "sig")[1], thinkingBlock(0, "deep", "sig")[2],
		usage(1, 4),
		events.ErrorEvent{Code: "x", Message: "oops"},
		events.StatusEvent{Status: events.StatusFailed},
	}})
	w := mustNew(t, worker.Config{Provider: p}, worker.WithSubscriber[lineScope, lineScope](ui), worker.WithObserver(rec))
	res := mustRun(t, w, events.UserText("go"))
	if res.Status != worker.StatusFailed {
		t.Fatal(res.Status)
	}
	want := []string{"status started", "thought: deep", "usage 4", "error oops", "status failed"}
	if !slices.Equal(ui.log, want) {
		t.Fatalf("log %q", ui.log)
	}
	// Thinking blocks travel on the thinking channel.
	for _, ev := range rec.events() {
		if strings.HasPrefix(ev.Type(), "llmw.block.") && ev.Channel() != events.ChannelThinking {
			t.Fatalf("%s on %s", ev.Type(), ev.Channel())
		}
	}
	if n := len(rec.ofType(events.TypeUsage)); n != 1 {
		t.Fatalf("%d usage reports", n)
	}
}

// A delta with no block start (OpenAI-style streams) still gives observers
// a block.start first.
func TestImplicitBlockStart(t *testing.T) {
	rec := &recorder{}
	p := newScripted(script{evs: []events.Event{started(), events.TextDelta(0, "hi"), events.ThinkingDelta(1, "t"),
		events.InputJSONDelta(2, `{}`), completed()}})
	w := mustNew(t, worker.Config{Provider: p, Observer: rec})
	mustRun(t, w, events.UserText("go"))
	got := rec.types()
	if got[2] != "block.start/text" || !slices.Contains(got, "block.start/thinking") {
		t.Fatalf("events %v", got)
	}
}

func TestObserverWithoutHandlersStillBuildsTranscript(t *testing.T) {
	p := newScripted(script{evs: stream(textBlock(0, events.StopEndTurn, "x"))})
	w := mustNew(t, worker.Config{Provider: p})
	res, err := w.Run(context.Background(), []events.Message{events.UserText("go")})
	if err != nil || res.Text() != "x" {
		t.Fatalf("res %+v err %v", res, err)
	}
	var nilRes *worker.Result
	if nilRes.Err() != nil || nilRes.Text() != "" {
		t.Fatal("nil result methods")
	}
}
