package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm"
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
	// workers hands a step's calls to the turn's tool goroutines
	// (nworkers of them, counted by workersWG); see startWorkers.
	workers   chan stepJobs
	nworkers  int
	workersWG sync.WaitGroup
	// gen numbers the steps whose calls went to the tool goroutines;
	// claims is the one under way's gen and next job (see claim).
	gen    uint32
	claims atomic.Uint64
	nonce  string
	// firstChunk is when the model call under way sent its first event.
	firstChunk time.Time
	// completed is the completed status of the model call under way (the
	// model that answered, the response id), zero until it arrives.
	completed events.StatusEvent
	// defs are the tool definitions of the turn's model calls, once made
	// (see definitions).
	defs     []events.ToolDefinition
	defsMade bool
	// warned is the last step whose warnings were sent (see warn): a
	// step's attempts on one model share its settings, so its warnings go
	// out once.
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

	// unannounced: the active compaction is committed by the checkpoint
	// the run continues from (or is about to write), and its
	// llmw.turn.compacted is yet to be emitted (compact.go, announce).
	unannounced bool
	// counted is what the provider counted of the turn's last model call,
	// for the estimate of the next (compact.go, noteCounted).
	counted counted

	// source is what the turn's read_result calls read (readresult.go).
	source *atomic.Pointer[resultSource]
	// sentFor is the model whose projection the last on_message_send
	// hooks read (messagesFor).
	sentFor string
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
	r.unannounced = r.madeFor(st.Step + 1)
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
	ctx = r.withResults(ctx)
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
	if why := r.sharedOver(ctx, r.st.Step+1, 1, r.cfg.models[r.modelIndex()]); why != "" {
		return r.budgetExceeded(ctx, why)
	}
	step := r.st.Step + 1
	// A compaction is in the state before the checkpoint below: the model
	// call reads it only once it is durable.
	if e := r.compact(ctx, step, r.cfg.models[r.modelIndex()], false); e != nil {
		return r.endWith(ctx, e)
	}
	if res := r.checkpoint(ctx); res != nil {
		return res
	}
	r.announce()
	r.turn.Step = step
	in, res := r.messageSend(ctx, r.cfg.models[r.modelIndex()])
	if res != nil {
		return res
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
		// overflowed: a call of the step was refused as too long (and
		// compacted for); halt ends the step for a compaction that failed.
		overflowed bool
		halt       *ending
	)
	r.stepCtx = ctx
	// attempt counts the step's calls (its request ids and llmw.turn.step),
	// tries those on the model in use (StepAttempts, RetryStep).
	for attempt, tries := 1, 1; ; attempt, tries = attempt+1, tries+1 {
		if attempt > 1 {
			if over = r.overBudget(step, attempt, r.cfg.models[at]); over == "" {
				over = r.sharedOver(ctx, step, attempt, r.cfg.models[at])
			}
			if over != "" {
				over += "; attempt " + strconv.Itoa(attempt-1) + " failed: " + fail.reason
				break
			}
		}
		var u events.UsageEvent
		sent := r.messagesFor(in, r.cfg.models[at])
		u, fail = r.stream(ctx, step, attempt, r.cfg.models[at], sent)
		r.noteCounted(r.cfg.models[at], len(sent), u, fail == nil)
		usage = usage.Add(u)
		cost = addCost(cost, r.charge(r.cfg.models[at], u))
		if fail == nil || ctx.Err() != nil || r.halt != nil {
			break
		}
		if fail.overflowed() {
			// Compact and make the call once more; a second refusal ends
			// the turn (context_overflow), never a loop.
			if overflowed || r.cfg.Compaction.Off() {
				if overflowed {
					fail.reason = "the provider refused the context as too long again after compaction: " + fail.reason
				}
				fail.overflow = true
				break
			}
			overflowed = true
			if halt = r.compact(ctx, step, r.cfg.models[at], true); halt != nil {
				break
			}
			if halt = r.checkpointEnding(ctx); halt != nil {
				break
			}
			r.announce()
			var res *Result
			if in, res = r.messageSend(ctx, r.cfg.models[at]); res != nil {
				return res
			}
			continue
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
	// Also without usage: the call's reservation is released.
	r.chargeShared(ctx)
	if usage != (events.UsageEvent{}) && r.em.observed() {
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
	if halt != nil {
		return r.endWith(ctx, halt)
	}
	if over != "" {
		return r.budgetExceeded(ctx, over)
	}
	if fail != nil {
		kind := ErrProvider
		if fail.overflow {
			kind = ErrContextOverflow
		}
		return r.end(ctx, StatusFailed, fail.turnCode(), kind, fail.reason, "", fail.cause)
	}

	msg, calls := r.assemble()
	if len(msg.Content) > 0 {
		r.nativeCompacted(ctx, step, &msg)
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

// messageSend runs the on_message_send hooks on the projection the model
// reads (compact.go): the hooks get a copy of it to edit; without hooks
// the model call reads it itself (llm.Provider must not modify a
// request), capped so that an append to it cannot write into ours. A
// non-nil Result ends the turn.
func (r *run) messageSend(ctx context.Context, model string) (*hook.MessageSendInput, *Result) {
	msgs := r.projection(model)
	r.sentFor = model
	in := &hook.MessageSendInput{Turn: r.turn, Messages: msgs[:len(msgs):len(msgs)]}
	if r.chain.HasMessageSend() {
		in.Messages = cloneMessages(msgs)
	}
	out := r.chain.RunMessageSend(ctx, in)
	r.syncVars()
	if ctx.Err() != nil {
		return nil, r.cancelled(ctx)
	}
	if out.Failed {
		return nil, r.hookFailed(ctx, out.Hook, out.Err)
	}
	if out.Result.Action == hook.MessageSendCancel {
		reason := fmt.Sprintf("on_message_send hook %q cancelled the model call%s", out.Hook, suffix(out.Result.Reason))
		return nil, r.end(ctx, StatusAborted, CodeHookCancel, ErrHookAbort, reason, out.Hook, nil)
	}
	return in, nil
}

// messagesFor is what model call on model sends: the hooks' messages,
// unless a provider-native compaction is active and model is of
// another origin than the one the hooks read it for, which reads the
// originals (and the compaction of the tiers under it) instead
// (compact.Project).
func (r *run) messagesFor(in *hook.MessageSendInput, model string) []events.Message {
	if r.st.Compaction.Native() == "" || origin(model) == origin(r.sentFor) {
		return in.Messages
	}
	return r.projection(model)
}

// origin is the llm.Origin of model's provider prefix.
func origin(model string) string {
	prefix, _ := events.SplitModel(model)
	return llm.Origin(prefix)
}

// assemble builds the assistant message from the collectors: parts in
// block-index order, thinking with its signature (redacted when only the
// signature came), tool_use with its signature. Calls of provider-run tools
// are left out: they were answered inside the response, and a tool_use
// without a local tool_result would be rejected in the next request.
func (r *run) assemble() (events.Message, []timeline.CollectedCall) {
	prefix, _ := events.SplitModel(r.model)
	return assembleFrom(llm.Origin(prefix), r.texts.TakeBlocks(), r.thinks.TakeCollected(), r.calls.TakeCollected())
}

// assembleFrom is assemble of collected blocks (taken, or copies looked
// at for a span's gen_ai.output.messages): the slices are the caller's
// own, and collected is reused for the calls it returns. origin (the
// llm.Origin of the prefix of the model that answered) marks the parts
// only providers of that origin read: thinking, and parts with a
// signature (events.Part.Origin).
func assembleFrom(origin string, texts []timeline.CollectedText, thinks []timeline.CollectedThinking, collected []timeline.CollectedCall) (events.Message, []timeline.CollectedCall) {
	n := len(texts) + len(thinks) + len(collected)
	content := make([]events.Part, 0, n)
	var small [16]int
	index := small[:0] // content[i]'s block index
	if n > len(small) {
		index = make([]int, 0, n)
	}
	for _, b := range texts {
		content = append(content, events.Part{Type: events.PartText, Text: b.Text, Signature: b.Signature, Origin: signed(origin, b.Signature)})
		index = append(index, b.Index)
	}
	for _, b := range thinks {
		content = append(content, events.Part{Type: events.PartThinking, Thinking: b.Thinking,
			Signature: b.Signature, Redacted: b.Thinking == "" && b.Signature != "", Origin: origin})
		index = append(index, b.Index)
	}
	calls := collected[:0]
	for _, c := range collected {
		if c.Server {
			continue
		}
		calls = append(calls, c)
		content = append(content, events.Part{Type: events.PartToolUse, ID: c.ID, Name: c.Name,
			Input: c.Input, Signature: c.Signature, Origin: signed(origin, c.Signature)})
		index = append(index, c.Index)
	}
	// A stable insertion sort of both by block index: the parts are few
	// and almost always in order already.
	for i := 1; i < len(content); i++ {
		for j := i; j > 0 && index[j-1] > index[j]; j-- {
			index[j-1], index[j] = index[j], index[j-1]
			content[j-1], content[j] = content[j], content[j-1]
		}
	}
	slices.SortStableFunc(calls, func(a, b timeline.CollectedCall) int { return a.Index - b.Index })
	if len(calls) == 0 {
		calls = nil
	}
	return events.Message{Role: events.RoleAssistant, Content: content}, calls
}

// signed is origin for a part with a signature, else "".
func signed(origin, signature string) string {
	if signature == "" {
		return ""
	}
	return origin
}

// turnEnd runs on_turn_end after a response without tool calls, once
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

// result is the run's Result; the run ends with it. Its Messages are the
// run's transcript itself, not a copy: the run copied its input at the
// start and every message it added is its own, the checkpoints and
// observers got copies, and nothing of the run reads or writes the
// transcript once Run returned.
func (r *run) result(status Status) *Result {
	return &Result{
		TurnID: r.st.TurnID, SessionID: r.st.SessionID, Status: status,
		Messages: r.st.Messages[:len(r.st.Messages):len(r.st.Messages)], StopReason: r.st.StopReason,
		Usage: cloneUsage(r.st.Usage), Cost: clonePtr(r.st.Cost), Steps: r.st.Step,
		Compaction: cloneCompaction(r.st.Compaction),
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

// ending is how an aborted or failed turn ends (end's arguments), for a
// decision taken where the turn cannot end at once: during a model
// stream, whose open blocks and early calls go first.
type ending struct {
	status Status
	code   string
	kind   error
	reason string
	hook   string
	cause  error
}

func (r *run) endWith(ctx context.Context, e *ending) *Result {
	return r.end(ctx, e.status, e.code, e.kind, e.reason, e.hook, e.cause)
}

func cancelledEnding(ctx context.Context) *ending {
	cause := context.Cause(ctx)
	return &ending{status: StatusAborted, code: CodeCancelled, kind: ErrCancelled, reason: "the turn was cancelled: " + cause.Error(), cause: cause}
}

func hookFailedEnding(name string, err error) *ending {
	reason := fmt.Sprintf("hook %q failed: %v", name, err)
	var f *hook.Failure
	if errors.As(err, &f) {
		reason = f.Error()
	}
	return &ending{status: StatusAborted, code: CodeHookFailed, kind: ErrHookAbort, reason: reason, hook: name, cause: err}
}

func (r *run) cancelled(ctx context.Context) *Result {
	return r.endWith(ctx, cancelledEnding(ctx))
}

func (r *run) hookFailed(ctx context.Context, name string, err error) *Result {
	return r.endWith(ctx, hookFailedEnding(name, err))
}

// end finishes an aborted or failed turn: open blocks are aborted, the
// on_abort hooks run (detached from ctx, which may be what was cancelled),
// then the terminal event is sent.
func (r *run) end(ctx context.Context, status Status, code string, kind error, reason, hookName string, cause error) *Result {
	r.stopTools()
	if errors.Is(cause, ErrDetached) {
		// The calls started early are the owner's now, as the turn.
		r.st.Eager, r.eagerRuns = nil, nil
		// The turn goes on elsewhere: no trace here (see ErrDetached).
		r.syncVars()
		res := r.result(StatusAborted)
		res.Reason, res.Code = "the run was detached: "+cause.Error(), CodeDetached
		res.err = &TurnError{Status: StatusAborted, Code: CodeDetached, Reason: res.Reason, Cause: cause, kind: ErrDetached}
		return res
	}
	r.tl.AbortCurrentBlock(reason)
	r.dropEager(ctx, reason)
	r.chain.RunAbort(ctx, &hook.AbortInput{Turn: r.turn, Reason: reason, Messages: cloneMessages(r.st.Messages)})
	r.syncVars()
	res := r.result(status)
	res.Reason, res.Code, res.Hook = reason, code, hookName
	res.err = &TurnError{Status: status, Code: code, Reason: reason, Hook: hookName, Cause: cause, kind: kind}
	if status == StatusAborted {
		r.em.emit(events.TurnAborted{Reason: reason, Code: code})
	} else {
		r.em.emit(events.TurnFailed{Reason: reason, Code: code})
	}
	return res
}

func suffix(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}
