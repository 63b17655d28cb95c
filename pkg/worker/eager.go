package worker

import (
	"bytes"
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/timeline"
	"github.com/llmworker/llmworker/pkg/tool"
)

// Early start (Config.NoEagerStart): a call of a tool that may start
// early goes through its before_tool_call hooks as soon as its block
// stopped, and an allowed one starts on a goroutine of its own while the
// Run goroutine reads the rest of the stream. The calls are kept in
// r.st.Eager (so that a checkpoint lists them: a run that continues it
// takes them over or stops them) and, index for index, in r.eagerRuns.
// When the stream ended, they become pending calls like the others,
// already decided; only their results wait for the step's order.

// eagerJob is one call started while the model streamed.
type eagerJob struct {
	job
	call   events.ToolCall
	fin    chan struct{} // closed when job.out is there
	cancel context.CancelFunc
}

// eagerRun is what this run knows of r.st.Eager[i].
type eagerRun struct {
	// j runs (or ran) the call here; nil: the call was not started by
	// this run (it is paused, skipped, or an earlier run's).
	j *eagerJob
	// index is the call's block index in the response under way; -1:
	// the call came from an earlier response of the step (an attempt
	// that failed, or the model call a checkpoint was written during)
	// and this response has not asked for it again.
	index int
}

// beginEager prepares a model call of the step: every call started so
// far is an earlier response's until this one asks for it again.
func (r *run) beginEager() {
	r.ready = r.ready[:0]
	for len(r.eagerRuns) < len(r.st.Eager) {
		r.eagerRuns = append(r.eagerRuns, eagerRun{})
	}
	for i := range r.eagerRuns {
		r.eagerRuns[i].index = -1
	}
	if len(r.st.Eager) > 0 {
		r.eagerFor = r.st.Step + 1
	}
}

// startReady starts the calls whose blocks stopped since it last looked
// (r.ready, filled by onToolCallComplete), in the order they stopped. A
// decision that ends the turn (a hook's abort or failure, a failed
// checkpoint, the turn's cancel) is left in r.halt, and the stream is
// read no further.
func (r *run) startReady(ctx context.Context) {
	// A call's hooks belong to the turn, not to the model call during
	// whose stream they run: their spans go under the turn's span
	// (invoke_agent), as those of a call that starts after the stream.
	ctx = trace.ContextWithSpan(ctx, trace.SpanFromContext(r.stepCtx))
	for _, index := range r.ready {
		if c, ok := r.calls.CollectedAt(index); ok {
			if e := r.startEager(ctx, c); e != nil {
				r.halt = e
				r.ready = r.ready[:0]
				return
			}
		}
	}
	r.ready = r.ready[:0]
}

// mayStartEarly reports whether a call of tool name whose block stopped
// is one for startEager: its tool may start early, or the step holds
// calls an earlier response started, which a call of this response may
// take over. Any other call waits for the end of the stream, and the
// stream's reading sets up nothing for it.
func (r *run) mayStartEarly(name string) bool {
	if len(r.st.Eager) > 0 {
		return true
	}
	t, ok := r.cfg.lookup(name)
	return ok && tool.EagerOf(t)
}

// startEager decides and starts one call whose block stopped, if its
// tool may start early: a call an earlier response of the step asked for
// in the same words (id, tool, input) is taken over as it stands — its
// hooks decided already, and it runs still, ran, or is started again
// where its result may be stored (an earlier run's: tool.CallInfo.First
// false); any other call goes through its before_tool_call hooks, is
// checkpointed when allowed, and starts.
func (r *run) startEager(ctx context.Context, c timeline.CollectedCall) *ending {
	if c.Err != nil || c.Server {
		return nil
	}
	t, ok := r.cfg.lookup(c.Name)
	if !ok {
		return nil
	}
	if k := r.eagerByID(c.ID); k >= 0 {
		e, er := &r.st.Eager[k], &r.eagerRuns[k]
		if er.index >= 0 || !sameCall(e, c) {
			// The id twice in one response, or another call under an
			// earlier response's id: it waits for the end of the stream
			// (and the earlier call is stopped then).
			return nil
		}
		er.index = c.Index
		if er.j == nil && e.State == CallAllowed && e.Output == nil {
			if t, ok := r.cfg.lookup(e.Call.Name); ok {
				r.dispatch(k, t, false)
			}
		}
		return nil
	}
	if !tool.EagerOf(t) {
		return nil
	}
	r.eagerFor = r.step
	p := PendingCall{Call: c.ToolCall(), State: CallNew}
	if e := r.gate(ctx, &p); e != nil {
		return e
	}
	r.st.Eager = append(r.st.Eager, EagerCall{PendingCall: p, Asked: c.Input})
	r.eagerRuns = append(r.eagerRuns, eagerRun{index: c.Index})
	if p.State != CallAllowed {
		return nil
	}
	// A hook may have made it a call of another tool, which may not
	// start early: it then runs after the stream, as an allowed call.
	t, ok = r.cfg.lookup(p.Call.Name)
	if !ok || !tool.EagerOf(t) {
		return nil
	}
	// The checkpoint lists the call before it starts, so that a run that
	// continues the turn knows of it (the turn service publishes a remote
	// call only once that checkpoint is stored: docs/architecture.md).
	if e := r.checkpointEnding(ctx); e != nil {
		return e
	}
	r.dispatch(len(r.st.Eager)-1, t, true)
	return nil
}

func sameCall(e *EagerCall, c timeline.CollectedCall) bool {
	return e.Call.Name == c.Name && bytes.Equal(bytes.TrimSpace(e.Asked), bytes.TrimSpace(c.Input))
}

func (r *run) eagerByID(id string) int {
	for i := range r.st.Eager {
		if r.st.Eager[i].Call.ID == id {
			return i
		}
	}
	return -1
}

func (r *run) eagerAt(index int) int {
	for i := range r.eagerRuns {
		if r.eagerRuns[i].index == index {
			return i
		}
	}
	return -1
}

// dispatch starts r.st.Eager[k] on a goroutine of its own, under the
// turn's context (not the model call's: the call outlives the stream).
func (r *run) dispatch(k int, t tool.Tool, first bool) {
	e := &r.st.Eager[k]
	ej := &eagerJob{call: e.Call, fin: make(chan struct{})}
	ctx, cancel := context.WithCancel(r.stepCtx)
	ej.cancel = cancel
	ej.r, ej.t, ej.job.call = r, t, &ej.call
	ej.ctx.Set(ctx, tool.CallInfo{TurnID: r.st.TurnID, SessionID: r.st.SessionID, CallID: e.Call.ID, Name: e.Call.Name,
		Step: r.eagerFor, First: first}, &ej.job)
	r.eagerRuns[k].j = ej
	if r.em.observed() {
		if !e.Announced {
			r.em.emit(events.ToolStarted{CallID: ej.call.ID, Name: ej.call.Name, Input: ej.call.Input})
		}
		e.Announced = true
	}
	r.toolsWG.Add(1)
	go func() {
		defer r.toolsWG.Done()
		ej.exec()
		close(ej.fin)
	}()
}

// dropOrphans stops the calls of earlier responses of the step that the
// response which completed it did not ask for again. The checkpoint that
// leaves them out is written first: a run that continues the turn
// must not take over a call this one stopped.
func (r *run) dropOrphans(ctx context.Context) *Result {
	n := 0
	for _, er := range r.eagerRuns {
		if er.index < 0 {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	gone := make([]EagerCall, 0, n)
	goneRuns := make([]eagerRun, 0, n)
	keep, keepRuns := r.st.Eager[:0], r.eagerRuns[:0]
	for i, er := range r.eagerRuns {
		if er.index < 0 {
			gone = append(gone, r.st.Eager[i])
			goneRuns = append(goneRuns, er)
			continue
		}
		keep, keepRuns = append(keep, r.st.Eager[i]), append(keepRuns, er)
	}
	r.st.Eager, r.eagerRuns = keep, keepRuns
	if len(keep) == 0 {
		r.st.Eager, r.eagerRuns = nil, nil
	}
	res := r.checkpoint(ctx)
	r.stopEager(ctx, gone, goneRuns, "the model's response, made again, does not ask for it")
	return res
}

// dropEager stops every call started early for the response under way,
// whose stream did not complete the step (reason says why).
func (r *run) dropEager(ctx context.Context, reason string) {
	if len(r.st.Eager) == 0 {
		return
	}
	gone, runs := r.st.Eager, r.eagerRuns
	r.st.Eager, r.eagerRuns = nil, nil
	r.stopEager(ctx, gone, runs, reason)
}

// stopEager stops calls started early and reports each: a call running
// here through its context, an earlier run's through its tool
// (tool.CallCanceller), with ctx's values but not its cancel (a turn
// being cancelled still stops its calls).
func (r *run) stopEager(ctx context.Context, gone []EagerCall, runs []eagerRun, reason string) {
	for i := range gone {
		e := &gone[i]
		var er eagerRun
		if i < len(runs) {
			er = runs[i]
		}
		switch {
		case er.j != nil:
			er.j.cancel()
		case e.State == CallAllowed && e.Output == nil:
			if t, ok := r.cfg.lookup(e.Call.Name); ok {
				if cc, ok := t.(tool.CallCanceller); ok {
					_ = cc.CancelCall(context.WithoutCancel(ctx), tool.CallInfo{TurnID: r.st.TurnID, SessionID: r.st.SessionID,
						CallID: e.Call.ID, Name: e.Call.Name, Step: r.eagerFor})
				}
			}
		}
		r.em.emit(events.ToolCancelled{CallID: e.Call.ID, Name: e.Call.Name, Step: r.eagerFor, Reason: reason})
	}
}

// takeEager hands the calls started early to the pending call at index i
// of the step's calls (the block index of the call is index): the call
// as its hooks left it, and its job, if it runs here.
func (r *run) takeEager(p *PendingCall, i, index, n int) bool {
	k := r.eagerAt(index)
	if k < 0 {
		return false
	}
	*p = r.st.Eager[k].PendingCall
	if j := r.eagerRuns[k].j; j != nil {
		if r.early == nil {
			r.early = make([]*eagerJob, n)
		}
		r.early[i] = j
	}
	r.eagerStep = true
	return true
}

// earlyJob is the job of pending call i if it started early.
func (r *run) earlyJob(i int) *eagerJob {
	if i < len(r.early) {
		return r.early[i]
	}
	return nil
}

// collectEarly waits for the calls started early that ran here and
// keeps their outputs in the pending calls, for a checkpoint (a pause)
// that must not run them again.
func (r *run) collectEarly(ctx context.Context) *Result {
	for i, j := range r.early {
		if j == nil {
			continue
		}
		select {
		case <-j.fin:
		case <-ctx.Done():
			return r.cancelled(ctx)
		}
		if p := &r.st.Pending[i]; p.Output == nil {
			out := j.out
			p.Output = &out
		}
		j.cancel()
		r.early[i] = nil
	}
	return nil
}

// cancelEarly cancels the contexts of the calls started early that run
// here (stopTools, which then waits for them).
func (r *run) cancelEarly() {
	for _, er := range r.eagerRuns {
		if er.j != nil {
			er.j.cancel()
		}
	}
	for _, j := range r.early {
		if j != nil {
			j.cancel()
		}
	}
}
