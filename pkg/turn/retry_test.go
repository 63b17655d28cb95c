package turn_test

import (
	"github.com/nats-io/nats.go"

	"errors"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// A model call whose stream breaks (a transport failure) is made again
// within its step: the partial block is aborted, llmw.turn.step announces
// attempt 2, and the transcript holds only the second attempt's answer.
func TestStepRetriedAfterTransportFailure(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(llmtest.FailMidStep(errors.New("connection reset by peer"), "partial"), llmtest.TextStep("full answer"))
	e.scripted(p)
	e.startTurn(turn.Config{RetryBackoff: time.Millisecond})
	id := newID("retry")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("hi")}})
	done := w.completed()
	evs := w.events()
	checkSeq(t, evs)
	var steps []events.TurnStep
	for _, ev := range evs {
		if ev.Type == events.TypeTurnStep {
			steps = append(steps, decode[events.TurnStep](t, ev))
		}
	}
	if len(steps) != 2 || steps[0].Step != 1 || steps[1].Step != 1 || steps[1].Attempt != 2 {
		t.Fatalf("steps %+v", steps)
	}
	ab := find(evs, events.TypeBlockAbort)
	if ab < 0 {
		t.Fatalf("no block.abort:%s", describe(evs))
	}
	if ab > indexOfAttempt(t, evs, 2) {
		t.Fatalf("block.abort after the retry's step event:%s", describe(evs))
	}
	var assistant []events.Message
	for _, m := range done.Messages {
		if m.Role == events.RoleAssistant {
			assistant = append(assistant, m)
		}
	}
	if len(assistant) != 1 || assistant[0].Text() != "full answer" {
		t.Fatalf("assistant messages %s", mustJSON(t, assistant))
	}
	if p.Calls() != 2 {
		t.Fatalf("%d model calls", p.Calls())
	}
}

func indexOfAttempt(t *testing.T, evs []ev, attempt int) int {
	for i, ev := range evs {
		if ev.Type == events.TypeTurnStep && decode[events.TurnStep](t, ev).Attempt == attempt {
			return i
		}
	}
	return len(evs)
}

// A refusal is not a transport failure: the step fails at once.
func TestRefusalNotRetried(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(llmtest.Script{Events: []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.ErrorEvent{Code: "refusal", Message: "I can't help with that."},
		events.StatusEvent{Status: events.StatusFailed},
	}})
	e.scripted(p)
	e.startTurn(turn.Config{RetryBackoff: time.Millisecond})
	id := newID("refusal")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("hi")}})
	end := w.waitEnd()
	te := decode[events.TurnEnded](t, end)
	if end.Type != events.TypeTurnFailed || !strings.Contains(te.Reason, "refusal") {
		t.Fatalf("%s %+v", end.Type, te)
	}
	if p.Calls() != 1 || count(w.events(), events.TypeTurnStep) != 1 {
		t.Fatalf("%d calls, %d steps", p.Calls(), count(w.events(), events.TypeTurnStep))
	}
}

// Without ingest the call is retried StepRetries times, then the turn
// fails with a reason that points at ingest.
func TestNoIngest(t *testing.T) {
	e := newEnv(t)
	e.startTurn(turn.Config{IngestTimeout: 100 * time.Millisecond, StepRetries: 1, RetryBackoff: time.Millisecond})
	id := newID("noingest")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("hi")}})
	end := w.waitEnd()
	te := decode[events.TurnEnded](t, end)
	if end.Type != events.TypeTurnFailed || !strings.Contains(te.Reason, "ingest") {
		t.Fatalf("%s %+v", end.Type, te)
	}
	if n := count(w.events(), events.TypeTurnStep); n != 2 {
		t.Fatalf("%d step events, want 2:%s", n, describe(w.events()))
	}
}

// A request that ingest never answers (lost in a partition: delivered,
// the reply gone) is made again after IngestTimeout, like a missing
// ingest; before, the reply's timeout read as a cancelled call.
func TestIngestReplyLost(t *testing.T) {
	e := newEnv(t)
	hole, err := e.nc.Subscribe(e.subj.LLMComplete(), func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hole.Unsubscribe() })
	e.startTurn(turn.Config{IngestTimeout: 100 * time.Millisecond, StepRetries: 1, RetryBackoff: time.Millisecond})
	id := newID("replylost")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("hi")}})
	end := w.waitEnd()
	te := decode[events.TurnEnded](t, end)
	if end.Type != events.TypeTurnFailed || !strings.Contains(te.Reason, "no ingest reply") {
		t.Fatalf("%s %+v", end.Type, te)
	}
	if n := count(w.events(), events.TypeTurnStep); n != 2 {
		t.Fatalf("%d step events, want 2 (the lost request was not made again):%s", n, describe(w.events()))
	}
}

// A model call that fails after it streamed complete blocks is made again
// from scratch: the failed attempt's finished tool call is neither kept in
// the assistant message nor run, and only the retry's answer is in the
// transcript: kept beside the retry's blocks, the model's call would run
// twice.
func TestRetryDropsFinishedBlocksOfFailedAttempt(t *testing.T) {
	e := newEnv(t)
	failed := llmtest.Script{
		Events: append([]events.Event{events.StatusEvent{Status: events.StatusStarted}},
			llmtest.ToolUseBlockEvents(0, llmtest.ToolCallSpec{ID: "call_lost", Name: "get_weather", Input: `{"city":"Oslo"}`})...),
		StreamErr: errors.New("connection reset by peer"),
	}
	p := llmtest.NewScripted(failed, llmtest.TextStep("full answer"))
	e.scripted(p)
	e.startTurn(turn.Config{RetryBackoff: time.Millisecond})
	id := newID("retryblocks")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("hi")}})
	done := w.completed()
	evs := w.events()
	checkSeq(t, evs)
	if n := count(evs, events.TypeToolStarted) + count(evs, events.TypeToolResult); n != 0 {
		t.Fatalf("the failed attempt's call ran:%s", describe(evs))
	}
	if len(done.Messages) != 2 || done.Messages[1].Role != events.RoleAssistant {
		t.Fatalf("messages %s", mustJSON(t, done.Messages))
	}
	got := done.Messages[1]
	if len(got.Content) != 1 || got.Text() != "full answer" {
		t.Fatalf("assistant message %s, want only the retry's text", mustJSON(t, got))
	}
	if p.Calls() != 2 {
		t.Fatalf("%d model calls, want 2", p.Calls())
	}
}
