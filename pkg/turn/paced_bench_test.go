package turn_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

// pacedCall is one tool call of a paced step: the model has streamed its
// whole input done after the model call began, and the tool then takes
// took.
type pacedCall struct{ done, took time.Duration }

// pacedStep is a model step with a live model's timing: text streamed
// until text (none when 0), then the calls' tool_use blocks, each ending
// at its done; the stream ends with the last block.
type pacedStep struct {
	text  time.Duration
	calls []pacedCall
}

// fourCalls is a 2 s answer calling four tools whose inputs are complete
// at 0.5, 1, 1.5 and 2 s, the tools taking 1.5, 1, 0.5 and 0.2 s.
var fourCalls = pacedStep{calls: []pacedCall{
	{500 * time.Millisecond, 1500 * time.Millisecond},
	{1000 * time.Millisecond, 1000 * time.Millisecond},
	{1500 * time.Millisecond, 500 * time.Millisecond},
	{2000 * time.Millisecond, 200 * time.Millisecond},
}}

// oneCall is a 2 s answer of text and then one call, as a model calling
// one tool writes it: the input is complete with the stream, and the tool
// takes 0.5 s.
var oneCall = pacedStep{text: 1500 * time.Millisecond, calls: []pacedCall{{2000 * time.Millisecond, 500 * time.Millisecond}}}

// streamEnd is when the step's stream ends.
func (s pacedStep) streamEnd() time.Duration {
	end := s.text
	for _, c := range s.calls {
		end = max(end, c.done)
	}
	return end
}

// serial is when the step ends with tools started after the stream:
// the stream's end plus its longest tool.
func (s pacedStep) serial() time.Duration {
	var longest time.Duration
	for _, c := range s.calls {
		longest = max(longest, c.took)
	}
	return s.streamEnd() + longest
}

// eager is when the step ends with each tool started once its input is
// complete: its last call's end, or the stream's end when that is later.
func (s pacedStep) eager() time.Duration {
	end := s.streamEnd()
	for _, c := range s.calls {
		end = max(end, c.done+c.took)
	}
	return end
}

// script is the step's stream: calls the "wait" tool, each with its own
// duration as input.
func (s pacedStep) script() llmtest.Script {
	var blocks []llmtest.TimedBlock
	if s.text > 0 {
		blocks = append(blocks, llmtest.Timed(s.text, llmtest.TextBlockEvents(0, "Let me look ", "that up ", "for you.")))
	}
	for i, c := range s.calls {
		spec := llmtest.ToolCallSpec{ID: "call_" + strconv.Itoa(i), Name: "wait", Input: `{"ms":` + strconv.FormatInt(c.took.Milliseconds(), 10) + `}`}
		blocks = append(blocks, llmtest.Timed(c.done, llmtest.ToolUseBlockEvents(len(blocks), spec)))
	}
	return llmtest.TimedStep(blocks...)
}

type waitArgs struct {
	MS int `json:"ms"`
}

// waitTool takes the time its input asks for (or until cancelled). It
// only waits, so it is read-only: its calls may start early.
func waitTool() tool.Tool {
	return tool.Must("wait", "waits ms milliseconds", func(ctx context.Context, a waitArgs) (string, error) {
		t := time.NewTimer(time.Duration(a.MS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return "waited", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}, tool.WithReadOnly())
}

// stepClock is a model that plays step for a turn's first call and
// answers text for the next, and notes when each call began: the first
// step lasts from its call to the next.
type stepClock struct {
	step  pacedStep
	mu    sync.Mutex
	calls []time.Time
}

func (c *stepClock) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	c.mu.Lock()
	c.calls = append(c.calls, time.Now())
	c.mu.Unlock()
	sc := llmtest.TextStep("done")
	for _, m := range req.Messages {
		for _, p := range m.Content {
			if p.Type == events.PartToolResult {
				return llmtest.NewScripted(sc).Stream(ctx, req)
			}
		}
	}
	return llmtest.NewScripted(c.step.script()).Stream(ctx, req)
}

// taken returns the calls noted and forgets them.
func (c *stepClock) taken() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = nil
	return out
}

// BenchmarkPacedStep runs a tool step whose model streams with a live
// model's timing (llmtest.TimedStep) through ingest, the turn service and
// toolexec over NATS, and reports the step's time — from the model call
// to the next one, when the step's results are in and checkpointed — at
// p50 and p99, beside the step's end as the timing dictates
// (target-ms: each tool started once its input is complete;
// serial-ms: every tool started after the stream), with calls started
// early (eager=on) and with every call waiting for the end of the
// response (eager=off, turn.Config.NoEagerStart). four-calls is the 2 s
// stream of four calls (fourCalls), one-call one call at the stream's
// end (oneCall).
func BenchmarkPacedStep(b *testing.B) {
	for _, sc := range []struct {
		name string
		step pacedStep
	}{{"four-calls", fourCalls}, {"one-call", oneCall}} {
		for _, eager := range []bool{false, true} {
			name := sc.name + "/eager=off"
			if eager {
				name = sc.name + "/eager=on"
			}
			b.Run(name, func(b *testing.B) { pacedBench(b, sc.step, eager) })
		}
	}
}

func pacedBench(b *testing.B, step pacedStep, eager bool) {
	e := newEnv(b)
	clock := &stepClock{step: step}
	e.scripted(clock)
	e.startToolexec(toolexec.Config{}, waitTool())
	e.startTurn(turn.Config{NoEagerStart: !eager})
	te := e.turnEvents(b)
	steps := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		id := "paced-" + strconv.Itoa(i)
		_, end := te.expect(id)
		e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}, Tools: []string{"wait"}})
		if typ := waitEnd(b, end); typ != events.TypeTurnCompleted {
			b.Fatalf("turn %s ended %s", id, typ)
		}
		calls := clock.taken()
		if len(calls) != 2 {
			b.Fatalf("turn %s made %d model calls, want 2", id, len(calls))
		}
		steps = append(steps, calls[1].Sub(calls[0]))
	}
	b.StopTimer()
	b.ReportMetric(ms(percentile(steps, 0.5)), "step-p50-ms")
	b.ReportMetric(ms(percentile(steps, 0.99)), "step-p99-ms")
	b.ReportMetric(ms(step.eager()), "target-ms")
	b.ReportMetric(ms(step.serial()), "serial-ms")
}
