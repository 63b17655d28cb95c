package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/timeline"
	"github.com/llmworker/llmworker/pkg/tool"
)

// pendingCalls turns the collected calls of a step into pending calls.
// Calls that cannot run (invalid input JSON, unknown tool) are answered at
// once with an error result the model can act on; no hook sees them.
func (r *run) pendingCalls(calls []timeline.CollectedCall) []PendingCall {
	out := make([]PendingCall, len(calls))
	for i, c := range calls {
		if r.takeEager(&out[i], i, c.Index, len(calls)) {
			continue // decided while the model streamed
		}
		p := PendingCall{Call: c.ToolCall(), State: CallNew}
		switch {
		case c.Err != nil:
			r.settleError(&p, invalidInputMessage(c.Name, c.Err))
		default:
			if _, ok := r.cfg.lookup(c.Name); !ok {
				r.settleError(&p, r.unknownToolMessage(c.Name))
			}
		}
		out[i] = p
	}
	r.st.Eager, r.eagerRuns = nil, nil
	return out
}

func invalidInputMessage(name string, err error) string {
	cause := err
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		if errs := u.Unwrap(); len(errs) > 0 {
			cause = errs[len(errs)-1]
		}
	}
	return fmt.Sprintf("invalid input for tool %q: %v. Call the tool again with a JSON object as input.", name, cause)
}

func (r *run) unknownToolMessage(name string) string {
	names := r.cfg.toolNames()
	if len(names) == 0 {
		return fmt.Sprintf("unknown tool %q: no tools are available", name)
	}
	return fmt.Sprintf("unknown tool %q; available tools: %s", name, strings.Join(names, ", "))
}

// settleError answers a call that does not run with an error result.
func (r *run) settleError(p *PendingCall, content string) {
	p.State = CallDone
	p.Result = &events.ToolResult{ToolUseID: p.Call.ID, Content: content, IsError: true}
	r.em.emit(events.ToolCallResult{
		CallID: p.Call.ID, Name: p.Call.Name, Content: content, IsError: true})
}

// toolsPhase runs before_tool_call for the new calls in order, then the
// allowed calls in parallel and after_tool_call for each result in order,
// and appends the results as one tool message.
func (r *run) toolsPhase(ctx context.Context) *Result {
	gated := false
	for i := range r.st.Pending {
		p := &r.st.Pending[i]
		if p.State != CallNew {
			continue
		}
		gated = true
		if e := r.gate(ctx, p); e != nil {
			return r.endWith(ctx, e)
		}
	}
	for _, p := range r.st.Pending {
		if p.State == CallPaused {
			// The calls started early ran: the paused checkpoint keeps
			// their outputs, so that the resumed turn does not run them
			// again.
			if res := r.collectEarly(ctx); res != nil {
				return res
			}
			return r.pause(ctx, &Pause{Event: events.HookBeforeToolCall, Hook: p.Hook, Reason: p.Reason})
		}
	}
	// The checkpoint lists the step's decided calls; the ones decided
	// while the model streamed were listed only as the step's early calls.
	if gated || r.eagerStep {
		r.eagerStep = false
		if res := r.checkpoint(ctx); res != nil {
			return res
		}
	}
	if res := r.execute(ctx); res != nil {
		return res
	}
	r.early = nil
	parts := make([]events.Part, len(r.st.Pending))
	for i, p := range r.st.Pending {
		parts[i] = p.Result.Part()
	}
	r.st.Messages = append(r.st.Messages, events.Message{Role: events.RoleTool, Content: parts})
	r.st.Messages = append(r.st.Messages, r.st.Append...)
	r.st.Pending, r.st.Append = nil, nil
	r.st.Phase = PhaseModel
	return nil
}

// gate runs the before_tool_call hooks of one call; a non-nil ending
// ends the turn.
func (r *run) gate(ctx context.Context, p *PendingCall) *ending {
	t, ok := r.cfg.lookup(p.Call.Name)
	if !ok { // the tool went away since the model called it
		r.settleError(p, r.unknownToolMessage(p.Call.Name))
		return nil
	}
	// Without before_tool_call hooks the outcome is "continue" with the
	// call as it is: their input (with a copy of the tool's schema) is only
	// built for hooks that read it.
	var out hook.Outcome[hook.BeforeToolCallResult]
	call := p.Call
	hooked := r.chain.HasBeforeToolCall()
	if hooked {
		in := &hook.ToolCallInput{Turn: r.turn, Call: p.Call, Tool: tool.Definition(t), Impl: t}
		out = r.chain.RunBeforeToolCall(ctx, in)
		r.syncVars()
		call = in.Call
	}
	if ctx.Err() != nil {
		return cancelledEnding(ctx)
	}
	if out.Failed {
		return hookFailedEnding(out.Hook, out.Err)
	}
	switch out.Result.Action {
	case hook.ToolSkip:
		p.Hook, p.Reason = out.Hook, out.Result.Reason
		content := fmt.Sprintf("the call of tool %q was skipped by hook %q%s", p.Call.Name, out.Hook, suffix(out.Result.Reason))
		p.State = CallDone
		p.Result = &events.ToolResult{ToolUseID: p.Call.ID, Content: content, IsError: true}
		r.em.emit(events.ToolSkipped{
			CallID: p.Call.ID, Name: p.Call.Name, Hook: out.Hook, Reason: content})
	case hook.ToolAbort:
		reason := fmt.Sprintf("before_tool_call hook %q aborted the turn at the call of tool %q (%s)%s",
			out.Hook, p.Call.Name, p.Call.ID, suffix(out.Result.Reason))
		return &ending{status: StatusAborted, code: CodeHookAbort, kind: ErrHookAbort, reason: reason, hook: out.Hook}
	case hook.ToolPause:
		p.State = CallPaused
		p.Hook, p.Reason = out.Hook, out.Result.Reason
	default:
		call.ID = p.Call.ID // the id ties the result to the model's call
		if len(bytes.TrimSpace(call.Input)) == 0 {
			call.Input = json.RawMessage("{}")
		}
		p.Call = call
		// Without hooks the input is the model's, which is valid JSON
		// (timeline.CollectedCall.Input, or a checkpoint's, checked by
		// Checkpoint.Validate): only whether it is an object is left.
		switch {
		case hooked && !isJSONObject(call.Input) || !hooked && bytes.TrimSpace(call.Input)[0] != '{':
			r.settleError(p, fmt.Sprintf("invalid input for tool %q: a before_tool_call hook rewrote it to something that is not a JSON object", call.Name))
		default:
			if _, ok := r.cfg.lookup(call.Name); !ok {
				r.settleError(p, r.unknownToolMessage(call.Name))
			} else {
				p.State = CallAllowed
			}
		}
	}
	return nil
}

func isJSONObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// job is one tool execution of a step. The jobs of a step are one
// allocation; the Run goroutine reads out only after the job's index came
// back on the step's done channel (or after running it itself).
type job struct {
	r        *run
	t        tool.Tool        // nil: the call does not run in this step
	call     *events.ToolCall // the pending call's, not changed while it runs
	ctx      tool.CallContext // the call's context, with its CallInfo
	throttle tool.Throttler
	out      ToolOutput
	finished bool // out is there (only the Run goroutine reads and sets it)
	result   events.ToolResult
	// For a job that runs in a worker goroutine: its index in the step's
	// jobs, sent on done when it ended.
	index int
	done  chan<- int
}

// stepJobs are a step's jobs as execute hands them to the turn's tool
// goroutines, and the step's number among the run's executes (gen): each
// goroutine handed them claims the next job meant for a tool goroutine
// (done set) that nobody runs yet, and so does the Run goroutine once its
// own call ended when nothing watches the calls settle one by one (see
// execute). Handed by value, they cost the step no allocation.
type stepJobs struct {
	jobs []job
	gen  uint32
}

// claim is the next job of s nobody runs yet, nil when every one is
// taken or s is an earlier step's (r.claims: the step's gen, then the
// index of the next job to look at).
func (r *run) claim(s stepJobs) *job {
	for {
		c := r.claims.Load()
		if uint32(c>>32) != s.gen {
			return nil
		}
		k := int(uint32(c))
		for k < len(s.jobs) && s.jobs[k].done == nil {
			k++
		}
		if k >= len(s.jobs) {
			return nil
		}
		if r.claims.CompareAndSwap(c, uint64(s.gen)<<32|uint64(k+1)) {
			return &s.jobs[k]
		}
	}
}

// startWorkers makes sure the turn has at least n tool goroutines (all idle
// between steps: execute returns only once every call of its step ended).
// They live until the turn's loop ends (stopWorkers), so that a turn of
// many steps starts a few goroutines rather than some per step, and the
// stack each one grew running a tool (JSON decoding is deep) is grown once.
func (r *run) startWorkers(n int) {
	if r.workers == nil {
		r.workers = make(chan stepJobs)
	}
	for ; r.nworkers < n; r.nworkers++ {
		r.workersWG.Add(1)
		go r.work()
	}
}

func (r *run) work() {
	defer r.workersWG.Done()
	for s := range r.workers {
		for j := r.claim(s); j != nil; j = r.claim(s) {
			j.exec()
			j.done <- j.index // buffered for every job of the step: never blocks
			r.toolsWG.Done()
		}
	}
}

// stopWorkers ends the tool goroutines once the turn's loop is over.
func (r *run) stopWorkers() {
	if r.workers != nil {
		close(r.workers)
		r.workersWG.Wait()
		r.workers, r.nworkers = nil, 0
	}
}

// execute runs the allowed calls that have no output yet, in parallel: the
// first on the goroutine that called Run (a step with one call needs no
// other goroutine), the others on the turn's tool goroutines
// (startWorkers), one each; when nothing watches a result settle before
// the step ends, the Run goroutine, once its call ended, runs the calls
// no tool goroutine has taken yet (fast tools then end on one goroutine,
// without waiting for others to be scheduled). It settles every allowed
// call in order as soon as its output is there: after_tool_call, then
// llmw.tool.result. When the
// turn ends early (cancel, a hook abort, a checkpoint error) the running
// tools are cancelled and waited for, so that no tool of the turn runs
// after Run returned.
func (r *run) execute(ctx context.Context) *Result {
	tctx, cancel := context.WithCancel(ctx)
	// end calls stopTools before the on_abort hooks, so the tools are
	// cancelled and gone before the turn reports its end.
	r.cancelTools = cancel
	defer r.stopTools()
	jobs := make([]job, len(r.st.Pending))
	var done chan int // the index of each job that ended in a goroutine
	inline, queued := -1, 0
	for i := range r.st.Pending {
		p := &r.st.Pending[i]
		if p.State != CallAllowed || p.Output != nil || r.earlyJob(i) != nil {
			continue
		}
		t, ok := r.cfg.lookup(p.Call.Name)
		if !ok {
			r.settleError(p, r.unknownToolMessage(p.Call.Name))
			continue
		}
		j := &jobs[i]
		j.r, j.t, j.call = r, t, &p.Call
		j.ctx.Set(tctx, tool.CallInfo{TurnID: r.st.TurnID, SessionID: r.st.SessionID, CallID: p.Call.ID, Name: p.Call.Name, Step: r.st.Step, First: r.freshCalls}, j)
		if r.em.observed() {
			r.em.emit(events.ToolStarted{CallID: j.call.ID, Name: j.call.Name, Input: j.call.Input})
		}
		if inline < 0 {
			inline = i // runs below, once the others are started
			continue
		}
		if done == nil {
			done = make(chan int, len(jobs))
		}
		j.index, j.done = i, done
		queued++
	}
	queue := stepJobs{jobs: jobs}
	if queued > 0 {
		r.startWorkers(queued)
		r.gen++
		queue.gen = r.gen
		r.claims.Store(uint64(r.gen) << 32)
		r.toolsWG.Add(queued)
		for range queued {
			r.workers <- queue // an idle worker takes it: there is one per job
		}
	}
	if inline >= 0 {
		jobs[inline].exec()
		jobs[inline].finished = true
	}
	if queued > 0 && !r.chain.HasAfterToolCall() && !r.em.observed() && !r.cfg.CheckpointToolResults {
		// Nothing can see a result settle before the step ends (no
		// after_tool_call hook, observer or checkpoint per result): run
		// the calls no tool goroutine took yet here, then wait for the
		// calls together, woken once rather than per call. A cancel
		// reaches them through tctx, and Run would wait for them before
		// it returns anyway (stopTools).
		for j := r.claim(queue); j != nil; j = r.claim(queue) {
			j.exec()
			r.toolsWG.Done()
		}
		r.toolsWG.Wait()
		for i := range jobs {
			jobs[i].finished = true
		}
	}
	for i := range r.st.Pending {
		p := &r.st.Pending[i]
		if p.State != CallAllowed {
			continue
		}
		j := &jobs[i]
		if ej := r.earlyJob(i); ej != nil {
			select {
			case <-ej.fin:
			case <-ctx.Done():
				return r.cancelled(ctx)
			}
			out := ej.out
			p.Output = &out
			ej.cancel()
			r.early[i] = nil
		} else if j.t != nil {
			for !j.finished {
				select {
				case k := <-done:
					jobs[k].finished = true
				case <-ctx.Done():
					return r.cancelled(ctx)
				}
			}
			p.Output = &j.out
		}
		if res := r.settle(ctx, p, &j.result); res != nil {
			return res
		}
		if r.cfg.CheckpointToolResults {
			if res := r.checkpoint(ctx); res != nil {
				return res
			}
		}
	}
	return nil
}

// stopTools cancels the running tools of the step under way, if any, and
// waits for them.
func (r *run) stopTools() {
	r.cancelEarly()
	if r.cancelTools != nil {
		r.cancelTools()
		r.cancelTools = nil
	}
	r.toolsWG.Wait()
}

// exec runs the job's call under its context (the step's tool context with
// the CallInfo and the progress listener), and traces and measures it.
func (j *job) exec() {
	call := *j.call
	cctx, span := startTool(&j.ctx, j.r.st.TurnID, call)
	defer span.End()
	began := time.Now()
	j.out = runTool(cctx, j.t, call)
	if limit := j.r.cfg.MaxToolResult; limit > 0 && j.out.Parts != nil {
		if n := tool.ResultSize(j.out.Content, j.out.Parts); n > limit {
			j.out = ToolOutput{IsError: true, DurationMS: j.out.DurationMS, Content: fmt.Sprintf(
				"tool %q returned a result of %d bytes with its inline media, more than a message of the turn holds (%d bytes); return smaller media, or media by URL", call.Name, n, limit)}
		}
	}
	j.throttle.Stop()
	if telemetry.CaptureContent() && span.IsRecording() {
		span.SetAttributes(telemetry.GenAIToolCallArguments.String(string(call.Input)), telemetry.GenAIToolCallResult.String(j.out.Content))
	}
	errType := ""
	if j.out.IsError {
		errType = "tool_error"
		telemetry.Fail(span, errType, nil)
	}
	telemetry.RecordTool(cctx, call.Name, time.Since(began), errType)
}

// ReportProgress implements tool.ProgressReporter: the tool's progress
// reports become llmw.tool.progress events, throttled, and none after the
// call ended.
func (j *job) ReportProgress(p tool.Progress) {
	j.throttle.Report(p, j.emitProgress)
}

func (j *job) emitProgress(p tool.Progress) {
	j.r.em.emit(events.ToolProgress{CallID: j.call.ID, Name: j.call.Name, Progress: p.Progress, Total: p.Total, Message: p.Message})
}

// settle runs the after_tool_call hooks on an allowed call's output and
// makes the result final; dst is where the result is kept.
func (r *run) settle(ctx context.Context, p *PendingCall, dst *events.ToolResult) *Result {
	*dst = events.ToolResult{ToolUseID: p.Call.ID, Content: p.Output.Content, Parts: p.Output.Parts, IsError: p.Output.IsError}
	// As in gate: the hooks' input only for hooks that read it.
	if r.chain.HasAfterToolCall() {
		def := events.ToolDefinition{Name: p.Call.Name}
		t, ok := r.cfg.lookup(p.Call.Name)
		if ok {
			def = tool.Definition(t)
		}
		in := &hook.ToolResultInput{Turn: r.turn, Call: p.Call, Tool: def, Impl: t, Result: *dst}
		out := r.chain.RunAfterToolCall(ctx, in)
		r.syncVars()
		if ctx.Err() != nil {
			return r.cancelled(ctx)
		}
		if out.Failed {
			return r.hookFailed(ctx, out.Hook, out.Err)
		}
		if out.Result.Action == hook.ResultAbort {
			reason := fmt.Sprintf("after_tool_call hook %q aborted the turn at the result of tool %q (%s)%s",
				out.Hook, p.Call.Name, p.Call.ID, suffix(out.Result.Reason))
			return r.end(ctx, StatusAborted, CodeHookAbort, ErrHookAbort, reason, out.Hook, nil)
		}
		*dst = in.Result
		dst.ToolUseID = p.Call.ID
	} else if ctx.Err() != nil {
		return r.cancelled(ctx)
	}
	p.Result = dst
	p.State = CallDone
	if r.em.observed() {
		r.em.emit(events.ToolCallResult{
			CallID: p.Call.ID, Name: p.Call.Name, Content: dst.Content, Parts: dst.Parts, IsError: dst.IsError,
			DurationMS: p.Output.DurationMS})
	}
	return nil
}

// runTool executes one call under the tool's timeout. Errors, timeouts and
// panics become error outputs the model reads.
func runTool(ctx context.Context, t tool.Tool, call events.ToolCall) (out ToolOutput) {
	d := tool.TimeoutOf(t)
	tctx := ctx
	if d > 0 {
		var cancel context.CancelFunc
		tctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	start := time.Now()
	defer func() {
		out.DurationMS = time.Since(start).Milliseconds()
		if p := recover(); p != nil {
			out.Content = fmt.Sprintf("tool %q panicked: %v", call.Name, p)
			out.IsError = true
		}
	}()
	input := call.Input
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	content, parts, err := tool.ExecuteContent(tctx, t, input)
	if err == nil && parts != nil {
		if verr := events.ValidateResultParts("content", parts); verr != nil {
			err = fmt.Errorf("tool %q returned an invalid result: %w", call.Name, verr)
		}
	}
	if err != nil {
		out.IsError = true
		switch {
		case d > 0 && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded):
			out.Content = fmt.Sprintf("tool %q timed out after %v", call.Name, d)
		default:
			out.Content = err.Error()
		}
		return out
	}
	out.Content, out.Parts = content, parts
	return out
}

// checkDecisions checks decisions against a paused checkpoint before
// anything happens.
func checkDecisions(st *Checkpoint, decisions map[string]events.Decision) error {
	if st.Pause.Event == events.HookOnTurnEnd {
		if len(decisions) > 0 {
			return fmt.Errorf("%w: the turn paused at on_turn_end has no tool calls to decide", ErrInvalidDecision)
		}
		return nil
	}
	waiting := map[string]bool{}
	var ids []string
	for _, p := range st.Pending {
		if p.State == CallPaused {
			waiting[p.Call.ID] = true
			ids = append(ids, p.Call.ID)
		}
	}
	for id, d := range decisions {
		if !waiting[id] {
			return fmt.Errorf("%w: no call %q waits for a decision (waiting: %s)", ErrInvalidDecision, id, strings.Join(ids, ", "))
		}
		switch d.Kind {
		case events.DecisionApprove, events.DecisionDeny:
		case events.DecisionEdit:
			if !isJSONObject(d.Input) {
				return fmt.Errorf("%w: the edited input of call %q is not a JSON object", ErrInvalidDecision, id)
			}
		default:
			return fmt.Errorf("%w: call %q: unknown decision %q", ErrInvalidDecision, id, d.Kind)
		}
	}
	return nil
}

// applyDecisions settles a paused turn with checked decisions; a non-nil
// Result ends (or re-pauses) the turn right away.
func (r *run) applyDecisions(ctx context.Context, decisions map[string]events.Decision, extra []events.Message) *Result {
	p := r.st.Pause
	if p.Event == events.HookOnTurnEnd {
		r.st.Pause = nil
		if len(extra) == 0 {
			r.st.Phase = PhaseModel
			return r.complete()
		}
		r.st.Messages = append(r.st.Messages, extra...)
		r.st.Phase = PhaseModel
		return nil
	}
	r.st.Append = append(r.st.Append, extra...)
	var still *PendingCall
	for i := range r.st.Pending {
		c := &r.st.Pending[i]
		if c.State != CallPaused {
			continue
		}
		d, ok := decisions[c.Call.ID]
		if !ok {
			if still == nil {
				still = c
			}
			continue
		}
		switch d.Kind {
		case events.DecisionApprove:
			c.State = CallAllowed
		case events.DecisionEdit:
			c.State = CallAllowed
			c.Call.Input = bytes.Clone(d.Input)
		case events.DecisionDeny:
			content := fmt.Sprintf("the user denied the call of tool %q%s", c.Call.Name, suffix(d.Reason))
			c.State = CallDone
			c.Result = &events.ToolResult{ToolUseID: c.Call.ID, Content: content, IsError: true}
			r.em.emit(events.ToolSkipped{
				CallID: c.Call.ID, Name: c.Call.Name, Reason: content})
		}
	}
	if still != nil {
		return r.pause(ctx, &Pause{Event: events.HookBeforeToolCall, Hook: still.Hook, Reason: still.Reason})
	}
	r.st.Pause = nil
	r.st.Phase = PhaseTools
	return nil
}
