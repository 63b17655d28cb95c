package worker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/tool"
)

// The model call of a step: its failures, retries and fallbacks, and the
// reading of its stream.

type streamFailure struct {
	reason string
	cause  error
	code   string // see StepFailure.Code
	opened bool   // the call was opened; cause is not Provider.Stream's
	// output: the stream had started a block (its first delta reached
	// the turn's observers) before it failed.
	output bool
	// overflow: the provider refused the context as too long after the
	// step compacted for an earlier refusal.
	overflow bool
}

// turnCode is the code a turn that ends with this failure reports: the
// kind the provider's error names (missing_api_key, unknown_model,
// rate_limited, …), or a refusal or content filter the stream reported,
// so a client can act on it; CodeProviderError for anything else.
func (f *streamFailure) turnCode() string {
	if f.overflow || f.overflowed() {
		return CodeContextOverflow
	}
	if !f.opened {
		if k, ok := llm.KindOf(f.cause); ok {
			return string(k)
		}
		return CodeProviderError
	}
	if slices.Contains(StreamFailureCodes, f.code) || f.code == CodeContextOverflow {
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
// are spent, the call overflowed the model's window, the policy declines
// or ctx ended during the wait.
func (r *run) retryStep(ctx context.Context, sf StepFailure) bool {
	if sf.Attempt >= r.cfg.attempts || sf.ContextOverflow() {
		// The same request overflows the same window again.
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
// streamed no block and did not overflow the model's window, and the
// policy (Config.Fallback) takes the failure.
func (r *run) fallback(at int, sf StepFailure) bool {
	if at+1 >= len(r.cfg.models) || sf.Output || sf.ContextOverflow() {
		// An overflow is the transcript's to fix, not another model's:
		// a fallback would hand the long context to a model the turn
		// did not choose, or overflow it as well.
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
	if r.em.observed() { // an event boxed for no observer is an allocation per step
		r.em.emit(events.TurnStep{Step: step, Attempt: attempt, Model: model})
	}

	req := &llm.Request{
		RequestID: r.requestID(step, attempt), Model: model, System: r.cfg.System,
		Messages: msgs, Tools: r.definitions(), MaxTokens: r.cfg.MaxTokens,
		Temperature: r.cfg.Temperature, Thinking: r.cfg.Thinking,
		Compaction: r.nativeRequest(model), ModelOptions: r.cfg.Options,
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
			if !output {
				r.warn(s)
			}
			output = true
		case events.UsageEvent:
			usage = usage.Merge(e)
		case events.StatusEvent:
			status = e.Status
			if status == events.StatusCompleted {
				r.completed = e
				r.warn(s)
				// A provider that sends the stop reason after the blocks
				// (Anthropic) puts it on the status, not on a block stop.
				if e.StopReason != "" {
					r.stopReason = e.StopReason
				}
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

// warn sends the warnings of the model call under way (s is its
// normalized stream, an llm.Warner) as the step's llmw.turn.warning, once
// per step: at the call's first block, or at its completion when it has
// none. A call that fails before either (one a fallback model or another
// attempt takes over) sends none, so the step's warnings are those of the
// call that answered it.
func (r *run) warn(s llm.Stream) {
	w, ok := s.(llm.Warner)
	if !ok || r.warned >= r.step {
		return
	}
	if ws := w.Warnings(); len(ws) > 0 {
		r.warned = r.step
		r.em.emit(events.TurnWarning{Step: r.step, Model: r.model, Warnings: slices.Clone(ws)})
	}
}

// definitions are the tools offered to the model call. Without a
// Registry the offered tools cannot change during the turn, so they are
// made once per turn and shared by its requests (a Provider must not
// modify a request); a Registry's tools may come and go between steps.
//
// While a compaction is active the built-in read_result is offered too
// (readresult.go), after the others: the list changes when the first
// compaction does, and the compaction breaks the prompt cache anyway.
func (r *run) definitions() []events.ToolDefinition {
	var defs []events.ToolDefinition
	if r.cfg.Registry != nil {
		defs = r.cfg.definitions()
	} else {
		if !r.defsMade {
			r.defs, r.defsMade = r.cfg.definitions(), true
		}
		defs = r.defs[:len(r.defs):len(r.defs)]
	}
	if r.offerRead() {
		defs = append(defs, tool.Definition(readResult{}))
	}
	return defs
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
