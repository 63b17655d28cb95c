package worker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/timeline"
)

// run is one turn in progress. Everything but the tool goroutines runs on
// the goroutine that called Run.
type run struct {
	w     *Worker
	cfg   *resolved
	h     handlers
	em    *emitter
	chain *hook.Chain
	turn  *hook.Turn
	st    *Checkpoint // the live state; checkpoints are clones of it

	tl     *timeline.Timeline
	texts  *timeline.TextBlockCollector
	thinks *timeline.ThinkingBlockCollector
	calls  *timeline.ToolCallCollector

	step       int    // the step being streamed, for block events
	model      string // the model of the call under way
	stopReason events.StopReason
	// continueHook is the on_turn_end hook whose continue_with_messages led
	// to the next model call, for the max_steps reason.
	continueHook string
	// freshCalls: the pending calls are from this run's model call, not
	// from a checkpoint it continues (tool.CallInfo.First).
	freshCalls bool
	// toolsWG counts the calls of the step under way that run on tool
	// goroutines, and cancelTools cancels the step's tool context (set
	// while its calls run); see stopTools.
	toolsWG     sync.WaitGroup
	cancelTools context.CancelFunc
	// workers hands calls to the turn's tool goroutines (nworkers of them,
	// counted by workersWG); see startWorkers.
	workers   chan *job
	nworkers  int
	workersWG sync.WaitGroup
	nonce     string
	// firstChunk is when the model call under way sent its first event.
	firstChunk time.Time
	// completed is the completed status of the model call under way (the
	// model that answered, the response id), zero until it arrives.
	completed events.StatusEvent
	// defs are the tool definitions of the turn's model calls, once made
	// (see definitions).
	defs     []events.ToolDefinition
	defsMade bool
	// warned is the last step whose warnings were sent: a step's attempts
	// share its settings, so its warnings go out once.
	warned int
	// output is the parsed final answer of a turn with a response format,
	// once it was checked (see checkOutput).
	output []byte

	// Early start (eager.go). eagerOn: calls may start while the model
	// streams; ready: block indexes of local calls that stopped since
	// startReady last looked; eagerRuns: this run's side of r.st.Eager;
	// eagerFor: the step those calls belong to; early: per pending call,
	// the job of one started early (until the step's results are in);
	// eagerStep: the step's calls include some decided early; halt: the
	// turn ends at a decision taken during the stream; stepCtx: the
	// turn's context during the model phase, which early calls run under.
	eagerOn   bool
	ready     []int
	eagerRuns []eagerRun
	eagerFor  int
	early     []*eagerJob
	eagerStep bool
	halt      *ending
	stepCtx   context.Context
}

func (w *Worker) newRun(st *Checkpoint) *run {
	r := &run{
		w: w, cfg: w.cfg, h: w.snapshot(), st: st, chain: w.cfg.Hooks,
		texts:  timeline.NewTextBlockCollector(),
		thinks: timeline.NewThinkingBlockCollector(),
		calls:  timeline.NewToolCallCollector(),
	}
	if r.chain == nil {
		r.chain = &hook.Chain{}
	}
	r.eagerOn = !w.cfg.NoEagerStart
	if len(st.Eager) > 0 {
		r.eagerFor = st.Step + 1
	}
	r.em = &emitter{turnID: st.TurnID, sessionID: st.SessionID, obs: r.h.observers}
	r.turn = &hook.Turn{ID: st.TurnID, SessionID: st.SessionID, Step: st.Step, Vars: hook.Variables(cloneVars(st.Vars))}
	if len(r.h.observers) > 0 {
		r.turn.Observer = hookObserver{r.em}
	}

	// Registration order is dispatch order: the worker events of a block
	// first, then the collectors the transcript is built from, then the
	// user's handlers, and last the complete events, so that a UI sees a
	// block's stop before the block's complete event.
	t := timeline.New()
	timeline.OnFunc(t, timeline.TextBlock, r.onText)
	timeline.OnFunc(t, timeline.ThinkingBlock, r.onThinking)
	timeline.OnFunc(t, timeline.ToolUseBlock, r.onToolUse)
	timeline.On(t, timeline.TextBlock, r.texts)
	timeline.On(t, timeline.ThinkingBlock, r.thinks)
	timeline.On(t, timeline.ToolUseBlock, r.calls)
	for _, reg := range r.h.timeline {
		reg(t)
	}
	timeline.OnFunc(t, timeline.TextBlock, r.onTextComplete)
	timeline.OnFunc(t, timeline.ToolUseBlock, r.onToolCallComplete)
	r.tl = t
	return r
}

func (r *run) loop(ctx context.Context) *Result {
	defer r.stopWorkers()
	// Calls started early that a later response did not ask for again were
	// cancelled, and may still be ending: no tool of the turn runs after
	// Run returned.
	defer r.stopTools()
	for {
		var res *Result
		switch r.st.Phase {
		case PhaseModel:
			res = r.modelPhase(ctx)
		case PhaseTools:
			res = r.toolsPhase(ctx)
		default: // PhasePaused (Validate admits no other phase)
			res = r.pause(ctx, r.st.Pause)
		}
		if res != nil {
			return res
		}
	}
}

// modelPhase makes model call number Step+1 and decides what follows.
func (r *run) modelPhase(ctx context.Context) *Result {
	if ctx.Err() != nil {
		return r.cancelled(ctx)
	}
	if r.st.Step >= r.cfg.maxSteps {
		reason := fmt.Sprintf("max_steps (%d) reached: the model was still calling tools after %d model calls", r.cfg.maxSteps, r.st.Step)
		if r.continueHook != "" {
			reason = fmt.Sprintf("max_steps (%d) reached: on_turn_end hook %q asked for another model call after %d model calls", r.cfg.maxSteps, r.continueHook, r.st.Step)
		}
		return r.end(ctx, StatusFailed, CodeMaxSteps, ErrMaxSteps, reason, r.continueHook, nil)
	}
	if why := r.overBudget(r.st.Step+1, 1, r.cfg.models[r.modelIndex()]); why != "" {
		return r.budgetExceeded(ctx, why)
	}
	if res := r.checkpoint(ctx); res != nil {
		return res
	}
	step := r.st.Step + 1
	r.turn.Step = step

	// The hooks get a copy of the context to edit; without hooks the model
	// call reads the history itself (llm.Provider must not modify a
	// request), capped so that an append to it cannot write into ours.
	var in *hook.MessageSendInput
	if r.chain.HasMessageSend() {
		in = &hook.MessageSendInput{Turn: r.turn, Messages: cloneMessages(r.st.Messages)}
	} else {
		in = &hook.MessageSendInput{Turn: r.turn, Messages: r.st.Messages[:len(r.st.Messages):len(r.st.Messages)]}
	}
	out := r.chain.RunMessageSend(ctx, in)
	r.syncVars()
	if ctx.Err() != nil {
		return r.cancelled(ctx)
	}
	if out.Failed {
		return r.hookFailed(ctx, out.Hook, out.Err)
	}
	if out.Result.Action == hook.MessageSendCancel {
		reason := fmt.Sprintf("on_message_send hook %q cancelled the model call%s", out.Hook, suffix(out.Result.Reason))
		return r.end(ctx, StatusAborted, CodeHookCancel, ErrHookAbort, reason, out.Hook, nil)
	}

	for _, f := range r.h.turnStart {
		f(step)
	}
	at := r.modelIndex()
	var (
		usage events.UsageEvent
		cost  *float64
		fail  *streamFailure
		over  string // why the next attempt would pass a budget
	)
	r.stepCtx = ctx
	// attempt counts the step's calls (its request ids and llmw.turn.step),
	// tries those on the model in use (StepAttempts, RetryStep).
	for attempt, tries := 1, 1; ; attempt, tries = attempt+1, tries+1 {
		if attempt > 1 {
			if over = r.overBudget(step, attempt, r.cfg.models[at]); over != "" {
				over += "; attempt " + strconv.Itoa(attempt-1) + " failed: " + fail.reason
				break
			}
		}
		var u events.UsageEvent
		u, fail = r.stream(ctx, step, attempt, r.cfg.models[at], in.Messages)
		usage = usage.Add(u)
		cost = addCost(cost, r.charge(r.cfg.models[at], u))
		if fail == nil || ctx.Err() != nil || r.halt != nil {
			break
		}
		sf := r.stepFailure(step, tries, at, fail)
		if r.retryStep(ctx, sf) {
			continue
		}
		if !r.fallback(at, sf) {
			break
		}
		at, tries = at+1, 0
		r.st.Model = r.cfg.models[at]
	}
	if fail == nil && ctx.Err() == nil {
		if res := r.dropOrphans(ctx); res != nil {
			return res
		}
	}
	r.st.Step = step
	r.st.Usage = r.st.Usage.Add(usage)
	if usage != (events.UsageEvent{}) {
		r.em.emit(events.UsageReport{Step: step, Model: r.cfg.models[at], Usage: usage, Total: cloneUsage(r.st.Usage), Cost: cost, TotalCost: clonePtr(r.st.Cost)})
	}
	for _, f := range r.h.turnEnd {
		f(step)
	}
	if ctx.Err() != nil {
		return r.cancelled(ctx)
	}
	if r.halt != nil {
		return r.endWith(ctx, r.halt)
	}
	if over != "" {
		return r.budgetExceeded(ctx, over)
	}
	if fail != nil {
		return r.end(ctx, StatusFailed, fail.turnCode(), ErrProvider, fail.reason, "", fail.cause)
	}

	msg, calls := r.assemble()
	if len(msg.Content) > 0 {
		r.st.Messages = append(r.st.Messages, msg)
	}
	r.st.StopReason = r.stopReason
	if len(calls) > 0 {
		// The next model call is asked for by these tool results, not by an
		// earlier continue_with_messages: a max_steps reached from here on
		// is the tool loop's.
		r.continueHook = ""
		r.st.Pending = r.pendingCalls(calls)
		r.freshCalls = true
		r.st.Phase = PhaseTools
		return nil
	}
	return r.turnEnd(ctx)
}

type streamFailure struct {
	reason string
	cause  error
	code   string // see StepFailure.Code
	opened bool   // the call was opened; cause is not Provider.Stream's
	// output: the stream had started a block (its first delta reached
	// the turn's observers) before it failed.
	output bool
}

// turnCode is the code a turn that ends with this failure reports: the
// kind the provider's error names (missing_api_key, unknown_model,
// rate_limited, …), or a refusal or content filter the stream reported,
// so a client can act on it; CodeProviderError for anything else.
func (f *streamFailure) turnCode() string {
	if !f.opened {
		if k, ok := llm.KindOf(f.cause); ok {
			return string(k)
		}
		return CodeProviderError
	}
	if slices.Contains(StreamFailureCodes, f.code) {
		return f.code
	}
	return CodeProviderError
}

// StreamFailureCodes are the codes of a stream's error event that a failed
// turn reports as its own (Result.Code): the model or provider declined to
// answer, which retrying will not change.
var StreamFailureCodes = []string{"refusal", "content_filter", "prompt_blocked"}

// stepFailure is the failed call f of step as RetryStep and Fallback see
// it: tries is its number on the model at index at.
func (r *run) stepFailure(step, tries, at int, f *streamFailure) StepFailure {
	sf := StepFailure{Step: step, Attempt: tries, Model: r.cfg.models[at], Code: f.code, Output: f.output}
	if !f.opened {
		sf.Err = f.cause
	}
	return sf
}

// retryStep reports whether the model call that failed is made again on
// the same model, after Config.RetryStep's wait; false when StepAttempts
// are spent, the policy declines or ctx ended during the wait.
func (r *run) retryStep(ctx context.Context, sf StepFailure) bool {
	if sf.Attempt >= r.cfg.attempts {
		return false
	}
	if r.cfg.RetryStep == nil {
		return true
	}
	wait, ok := r.cfg.RetryStep(sf)
	if !ok {
		return false
	}
	if wait <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// fallback reports whether the step goes on with the model after the one
// at index at (Config.FallbackModels): there is one, the failed call had
// streamed no block, and the policy (Config.Fallback) takes the failure.
func (r *run) fallback(at int, sf StepFailure) bool {
	if at+1 >= len(r.cfg.models) || sf.Output {
		return false
	}
	if r.cfg.Fallback != nil {
		return r.cfg.Fallback(sf)
	}
	return DefaultFallback(sf)
}

// modelIndex is the index in Config.Model and FallbackModels of the model
// a step starts on: the one that answered the turn's last step
// (Checkpoint.Model), the turn's model when that is not on the list (a
// checkpoint continued with another configuration).
func (r *run) modelIndex() int {
	if r.st.Model == "" {
		return 0
	}
	if i := slices.Index(r.cfg.models, r.st.Model); i >= 0 {
		return i
	}
	return 0
}

// stream makes one model call and reads its stream through the Timeline.
// It returns the usage of the call and, if the call failed, why.
func (r *run) stream(ctx context.Context, step, attempt int, model string, msgs []events.Message) (events.UsageEvent, *streamFailure) {
	r.step, r.model = step, model
	r.stopReason = ""
	r.texts.Clear()
	r.thinks.Clear()
	r.calls.Clear()
	r.beginEager()
	r.em.emit(events.TurnStep{Step: step, Attempt: attempt, Model: model})

	req := &llm.Request{
		RequestID: r.requestID(step, attempt), Model: model, System: r.cfg.System,
		Messages: msgs, Tools: r.definitions(), MaxTokens: r.cfg.MaxTokens,
		Temperature: r.cfg.Temperature, Thinking: r.cfg.Thinking,
		ModelOptions: r.cfg.Options,
	}
	if req.ToolChoice.Forces() && step > 1 && !r.cfg.ToolChoiceEveryStep {
		// See Config.Options: a tool forced on every call never ends.
		req.ToolChoice = nil
	}
	ctx, span := r.startChat(ctx, step, attempt)
	if telemetry.CaptureContent() && span.IsRecording() {
		if req.System != "" {
			span.SetAttributes(telemetry.GenAISystemInstructions.String(telemetry.SystemInstructions(req.System)))
		}
		span.SetAttributes(telemetry.GenAIInputMessages.String(telemetry.InputMessages(msgs)))
	}
	if r.em.observed() {
		// A call that waits for shared provider limits (ingest's Client)
		// says so while it waits.
		ctx = llm.WithQueued(ctx, func(st events.StatusEvent) {
			r.em.emit(events.TurnQueued{Step: step, Attempt: attempt, Model: model, Position: st.Position})
		})
	}
	start := time.Now()
	r.firstChunk, r.completed = time.Time{}, events.StatusEvent{}
	usage, f := r.read(ctx, req)
	r.endChat(ctx, span, start, usage, f)
	return usage, f
}

// read makes the model call of stream and reads its stream through the
// Timeline.
func (r *run) read(ctx context.Context, req *llm.Request) (events.UsageEvent, *streamFailure) {
	var usage events.UsageEvent
	src, err := r.cfg.Provider.Stream(ctx, req)
	if err != nil {
		return usage, &streamFailure{reason: "model call failed: " + err.Error(), cause: err}
	}
	if w, ok := src.(llm.Warner); ok && r.warned < r.step {
		if ws := w.Warnings(); len(ws) > 0 {
			r.warned = r.step
			r.em.emit(events.TurnWarning{Step: r.step, Model: r.model, Warnings: slices.Clone(ws)})
		}
	}
	s := llm.Normalize(ctx, src, llm.NormalizeOptions{IdleTimeout: llm.Limit(r.cfg.IdleTimeout, DefaultIdleTimeout)})
	defer s.Close()
	var (
		status  events.StreamStatus
		lastErr *events.ErrorEvent
		output  bool
	)
	for s.Next() {
		ev := s.Current()
		if r.firstChunk.IsZero() {
			r.firstChunk = time.Now()
		}
		switch e := ev.(type) {
		case events.BlockStart, events.BlockDelta:
			output = true
		case events.UsageEvent:
			usage = usage.Merge(e)
		case events.StatusEvent:
			status = e.Status
			if status == events.StatusCompleted {
				r.completed = e
			}
		case events.ErrorEvent:
			lastErr = &e
		}
		r.tl.Dispatch(ev)
		if len(r.ready) > 0 {
			if r.startReady(ctx); r.halt != nil {
				break
			}
		}
	}
	// A well-formed stream has closed every block; this only matters for
	// one that was cut off, so no handler keeps half a block.
	why := "stream ended"
	switch {
	case ctx.Err() != nil:
		why = "cancelled"
	case r.halt != nil:
		why = r.halt.reason
	}
	r.tl.AbortCurrentBlock(why)
	if r.halt != nil {
		return usage, &streamFailure{reason: "model call stopped: " + r.halt.reason, code: "cancelled", opened: true}
	}

	switch {
	case status == events.StatusCompleted && ctx.Err() == nil:
		return usage, nil
	case lastErr != nil:
		reason := "model call failed: " + lastErr.Message
		if lastErr.Code != "" {
			reason += " (" + lastErr.Code + ")"
		}
		return usage, &streamFailure{reason: reason, cause: fmt.Errorf("%s: %s", lastErr.Code, lastErr.Message), code: lastErr.Code, opened: true, output: output}
	case status == events.StatusCancelled && ctx.Err() == nil:
		return usage, &streamFailure{reason: "model call failed: the provider cancelled the stream", code: "cancelled", opened: true, output: output}
	}
	return usage, &streamFailure{reason: "model call failed: the stream ended without a result", code: llm.CodeProviderFailed, opened: true, output: output}
}

// definitions are the tools offered to the model call. Without a
// Registry the offered tools cannot change during the turn, so they are
// made once per turn and shared by its requests (a Provider must not
// modify a request); a Registry's tools may come and go between steps.
func (r *run) definitions() []events.ToolDefinition {
	if r.cfg.Registry != nil {
		return r.cfg.definitions()
	}
	if !r.defsMade {
		r.defs, r.defsMade = r.cfg.definitions(), true
	}
	return r.defs[:len(r.defs):len(r.defs)]
}

func (r *run) requestID(step, attempt int) string {
	id := r.st.TurnID + "-" + strconv.Itoa(step)
	if attempt > 1 {
		id += "-a" + strconv.Itoa(attempt)
	}
	if r.st.Restarts > 0 {
		// A turn continued from the same stored checkpoint twice (its
		// replica died before the next checkpoint) must not reuse the
		// request id of the first continuation, whose stream may still be
		// flowing: add a random part.
		if r.nonce == "" {
			r.nonce = strings.ToLower(NewTurnID()[20:])
		}
		id += "-r" + strconv.Itoa(r.st.Restarts) + r.nonce
	}
	return id
}

// the answer fits the response format (checkOutput).
func (r *run) turnEnd(ctx context.Context) *Result {
	if res, repair := r.checkOutput(ctx); res != nil || repair {
		return res
	}
	// As for on_message_send: a copy only for hooks that could edit it.
	msgs := r.st.Messages[:len(r.st.Messages):len(r.st.Messages)]
	if r.chain.HasTurnEnd() {
		msgs = cloneMessages(r.st.Messages)
	}
	in := &hook.TurnEndInput{Turn: r.turn, Messages: msgs}
	out := r.chain.RunTurnEnd(ctx, in)
	r.syncVars()
	if ctx.Err() != nil {
		return r.cancelled(ctx)
	}
	if out.Failed {
		return r.hookFailed(ctx, out.Hook, out.Err)
	}
	switch out.Result.Action {
	case hook.TurnContinueWithMessages:
		if r.st.TurnEndRetries >= r.cfg.maxRetries {
			reason := fmt.Sprintf("on_turn_end hook %q asked to continue the turn again, past max_turn_end_retries (%d)%s",
				out.Hook, r.cfg.maxRetries, suffix(out.Result.Reason))
			return r.end(ctx, StatusFailed, CodeMaxTurnEndRetries, ErrMaxTurnEndRetries, reason, out.Hook, nil)
		}
		if err := events.ValidateMessages("messages", out.Result.Messages); err != nil {
			return r.hookFailed(ctx, out.Hook, fmt.Errorf("on_turn_end hook %q returned invalid messages: %w", out.Hook, err))
		}
		r.st.TurnEndRetries++
		r.st.Messages = append(r.st.Messages, cloneMessages(out.Result.Messages)...)
		r.continueHook = out.Hook
		r.st.Phase = PhaseModel
		return nil
	case hook.TurnPause:
		return r.pause(ctx, &Pause{Event: events.HookOnTurnEnd, Hook: out.Hook, Reason: out.Result.Reason})
	}
	return r.complete()
}

// syncVars copies the hook variables into the state after a hook point.
func (r *run) syncVars() {
	if len(r.turn.Vars) == 0 && r.st.Vars == nil {
		return
	}
	r.st.Vars = cloneVars(r.turn.Vars)
}

// checkpoint hands the state to Config.Checkpoint; a non-nil Result means
// the turn failed.
func (r *run) checkpoint(ctx context.Context) *Result {
	if e := r.checkpointEnding(ctx); e != nil {
		return r.endWith(ctx, e)
	}
	return nil
}

// checkpointEnding is checkpoint for a caller that ends the turn itself.
func (r *run) checkpointEnding(ctx context.Context) *ending {
	if r.cfg.Checkpoint == nil {
		return nil
	}
	if err := r.cfg.Checkpoint(ctx, r.st.Clone()); err != nil {
		return &ending{status: StatusFailed, code: CodeCheckpoint, kind: ErrCheckpoint, reason: "checkpoint failed: " + err.Error(), cause: err}
	}
	return nil
}

func (r *run) result(status Status) *Result {
	return &Result{
		TurnID: r.st.TurnID, SessionID: r.st.SessionID, Status: status,
		Messages: cloneMessages(r.st.Messages), StopReason: r.st.StopReason,
		Usage: cloneUsage(r.st.Usage), Cost: clonePtr(r.st.Cost), Steps: r.st.Step,
	}
}

func (r *run) complete() *Result {
	res := r.result(StatusCompleted)
	if r.cfg.Options.ResponseFormat != nil {
		if r.output == nil {
			// A turn resumed at an on_turn_end pause: its answer was
			// checked before the pause; parse it again.
			r.output, _ = r.parseOutput()
		}
		res.Output = slices.Clone(r.output)
	}
	if r.em.observed() { // the copies are the observers' own
		r.em.emit(events.TurnCompleted{Messages: cloneMessages(res.Messages), StopReason: res.StopReason, Usage: cloneUsage(res.Usage),
			Output: slices.Clone(r.output), Cost: clonePtr(res.Cost)})
	}
	return res
}

// pause checkpoints the paused state and reports it.
func (r *run) pause(ctx context.Context, p *Pause) *Result {
	r.st.Phase = PhasePaused
	r.st.Pause = p
	if res := r.checkpoint(ctx); res != nil {
		return res
	}
	res := r.result(StatusPaused)
	res.Hook = p.Hook
	res.State = r.st.Clone()
	pending := r.st.Awaiting()
	if p.Event == events.HookOnTurnEnd {
		res.Reason = fmt.Sprintf("on_turn_end hook %q paused the turn%s", p.Hook, suffix(p.Reason))
	} else {
		ids := make([]string, len(pending))
		for i, c := range pending {
			ids[i] = c.Name + " (" + c.ID + ")"
		}
		res.Reason = fmt.Sprintf("before_tool_call hook %q paused the turn until a decision on %s%s",
			p.Hook, strings.Join(ids, ", "), suffix(p.Reason))
	}
	if pending == nil {
		pending = []events.ToolCall{}
	}
	r.em.emit(events.TurnPaused{Reason: res.Reason, Hook: p.Hook, Pending: pending})
	return res
}
