// Package worker runs LLM agent turns (docs/architecture.md#the-turn-loop)
// on top of an llm.Provider, a timeline.Timeline, tools (pkg/tool) and hooks
// (pkg/hook). It has no NATS in it; the turn service wraps it.
//
// # Turn lifecycle
//
// Run(ctx, messages) runs one turn, step by step (a step is one model
// call):
//
//  1. Step limit: past Config.MaxSteps model calls the turn fails with code
//     "max_steps". Budgets: a call that would pass Config.MaxTotalTokens
//     or Config.MaxCost (the turn's tokens or cost so far, plus the last
//     call's input and MaxTokens) fails it with code "budget_exceeded",
//     checked again before every further attempt of the call.
//  2. Compaction (compact.go, pkg/compact): when the estimate of the
//     call (the provider's count of the last call and the estimate of
//     what was added) passes Config.Compaction's threshold of the
//     model's room (Config.ModelLimits), the context is compacted; a
//     context no compaction can fit fails the turn with code
//     "context_overflow" (a summary the budgets refuse: code
//     "budget_exceeded"). Then the checkpoint (Config.Checkpoint, which
//     holds the compaction and commits it), llmw.turn.compacted and the
//     summary's llmw.usage once it returned, then
//     on_message_send on the projection the model reads: the hooks may
//     rewrite the context sent to the model (not the transcript) or
//     cancel the call (aborted, code "hook_cancel").
//  3. The model call, with Config.Options (see Model options below):
//     the provider stream is normalized (llm.Normalize;
//     a stream that is llm.WellFormed already passes through) and
//     dispatched through a Timeline with a TextBlockCollector,
//     ThinkingBlockCollector and ToolCallCollector, from which the
//     assistant message is rebuilt in block-index order (text and thinking
//     with their signatures, tool_use with its signature; thinking and
//     signed parts carry llm.Origin of the provider's prefix as their
//     Origin). Calls of
//     provider-run (server) tools are neither run nor kept. A failed stream
//     is tried again up to Config.StepAttempts times (as Config.RetryStep
//     allows; never a call whose context overflowed the model's window,
//     StepFailure.ContextOverflow), each attempt from nothing; then, when
//     the last attempt failed before its first block, did not overflow
//     and Config.Fallback takes the failure,
//     the step goes on with the next of Config.FallbackModels (the turn's
//     later steps start on the model that answered, Checkpoint.Model);
//     else it fails the turn with the
//     provider's message; the code is the kind the error names
//     (llm.KindOf: "missing_api_key", "rate_limited", ...), a decline the
//     stream reported ("refusal", "content_filter", "prompt_blocked") or
//     "context_overflow" as the stream reported it, else
//     "provider_error". A call the provider refused as too long
//     (context_overflow) makes the step compact and call once more; a
//     second refusal fails the turn with code "context_overflow".
//  4. Tool calls, if any: a call of an unknown (or not offered) tool, or
//     with input that is not a JSON object, is answered at once with an
//     error result. For the others, before_tool_call runs per call in order
//     (continue, possibly with a rewritten call; skip: the model reads an
//     error result naming the hook; abort: the turn aborts; pause: see
//     below), the state is checkpointed, the allowed calls run in parallel
//     (the first on the goroutine that called Run, each other one on one of
//     the goroutines the turn keeps for its tool calls until Run returns,
//     or, when no after_tool_call hook, observer or CheckpointToolResults
//     watches the results come in, on the goroutine that called Run once
//     its call ended, if none of those took it yet; each with the tool's
//     timeout and a CallInfo in its context), and
//     after_tool_call runs per result in call order as
//     soon as that result is there. The results are appended as one tool
//     message, in call order, and the loop goes on with step 1.
//
// A call of a tool that may start early (tool.EagerOf; see
// Config.NoEagerStart) goes through step 4's before_tool_call during step
// 3, as soon as its block stopped with a valid input, and an allowed one
// starts on a goroutine of its own while the stream goes on (a pause
// waits for the stream's end and pauses the turn there; an abort or a
// hook failure ends the stream and the turn). After the stream, such
// calls are pending calls already decided; only their results wait for
// the step's order. A call started for a response that fails, or that a
// model call made again does not ask for again (same id, tool and
// input: such a call is taken over, not run again), is cancelled and
// its result dropped: llmw.tool.cancelled.
//  5. No tool calls: with a response format, the answer is checked first
//     (see Structured output); then on_turn_end decides: finish (completed),
//     continue_with_messages (the messages are appended and the model is
//     asked again, at most Config.MaxTurnEndRetries times, after which the
//     turn fails with code "max_turn_end_retries" naming the hook), or
//     pause.
//
// Cancelling ctx aborts the open blocks (block.abort), cancels and waits
// for running tools, runs the on_abort hooks and returns an aborted Result
// (code "cancelled"). on_abort hooks run for every aborted or failed turn.
// A hook failure (error, panic, timeout) under fail_closed aborts the turn
// with code "hook_failed"; under fail_open the turn goes on.
//
// Run returns an error only when it could not start (invalid messages);
// how the turn ended is Result.Status, with Reason (for a person), Code,
// Hook and Err (a *TurnError matching ErrCancelled, ErrHookAbort,
// ErrMaxSteps, ErrMaxTurnEndRetries, ErrBudgetExceeded, ErrProvider,
// ErrCheckpoint or ErrInvalidOutput).
//
// # Model options
//
// Config.Options (events.ModelOptions: response format, tool choice,
// sampling, stops, reasoning effort, provider options, caching) go into
// every completion request of the turn, but for a tool_choice that forces
// a tool ("required" or a named tool): it goes into the first model call
// of the turn only, unless Config.ToolChoiceEveryStep, since a tool
// forced on every call never lets the model answer. A named tool the turn
// does not offer is refused by New. Settings the provider does not have
// are not sent; when the stream of the call that answers a step reports
// them (llm.Warner), the worker sends one llmw.turn.warning for the step,
// at the call's first block (at its end when it has none): a call that
// fails before its first block, as one a fallback model takes over,
// sends none. A model call that waits for
// provider limits shared by ingest replicas (llm.WithQueued, which the
// worker sets while events are observed) gives llmw.turn.queued while it
// waits.
//
// # Structured output
//
// With Options.ResponseFormat the final answer (the text of the last
// assistant message, when the model stops without tool calls; a Markdown
// code fence around all of it is taken off) must be JSON that fits the
// format's schema (pkg/tool's validator), or any JSON object for type
// json. An answer that does not fit gets Config.OutputRepairs repair
// steps (1 by default): a user message naming the first violation, and
// another model call, counting against MaxSteps. Past them the turn fails
// with code "invalid_output" naming the violation. The parsed answer is
// Result.Output and the output of llmw.turn.completed; OutputFormat[T]
// makes the format of a Go type and RunStructured[T] decodes the answer.
//
// # Tool results with images and files
//
// A tool that is a tool.ContentTool (a typed tool returning tool.Content,
// toolexec's remote tools, MCP tools) may return text, image and file
// parts: the worker checks them (a bad part, or more than
// Config.MaxToolResult, is an error result naming the tool), the tool
// message's tool_result carries them as its content array, and
// after_tool_call hooks and llmw.tool.result see them.
//
// # Pause and resume
//
// A before_tool_call hook answering pause marks its call paused; the other
// calls of the step still go through their hooks, then the turn pauses
// before any tool runs and Result.State (a *Checkpoint, JSON-serialisable)
// lists the calls waiting for a decision (State.Awaiting). Resume(ctx,
// state, decisions, extra...) settles them: approve runs the call, an edit
// runs it with the edited input, deny answers the model with an error
// result. before_tool_call is not asked again for settled calls;
// after_tool_call runs for every call that runs. An on_turn_end pause is
// resumed with extra messages (another model call) or without (the turn
// completes).
//
// # Durability
//
// With Config.Checkpoint set the worker hands out a Checkpoint (transcript,
// step, phase, pending calls with their decisions and known outputs or
// results, hook variables, turn-end retry count, usage) at every step
// boundary: before each model call (that is, after the previous step's tool
// results were appended), before each call that starts while the model
// streams (Checkpoint.Eager lists them), after a step's before_tool_call
// decisions, when pausing, and with Config.CheckpointToolResults after
// every settled tool result. An error from it fails the turn (code "checkpoint"), so a turn
// service that lost its expected revision stops at once. RunFrom(ctx, cp)
// continues a turn from a checkpoint in another process: calls with an
// output or result in the checkpoint are not run again; a model call that
// was under way is made again, and the calls it had started early are
// taken over when its new response asks for them again (run with
// tool.CallInfo.First false, so that a remote executor answers with the
// stored result) or cancelled (tool.CallCanceller). Request ids are "<turn>-<step>", with
// "-a<attempt>" for a retry of the step and "-r<restarts><random>" once the
// turn was continued by RunFrom or Resume, so they never repeat. Tools
// learn the ids of their call from tool.CallFrom(ctx), so a remote
// executor can de-duplicate by turn and call id.
//
// # Worker event API
//
// As in docs/architecture.md#the-turn-loop, events are exposed as thin wrappers of the
// Timeline's handlers plus complete events:
//
//   - per kind: OnTextBlock, OnThinkingBlock, OnToolUseBlock (Timeline
//     handlers with their own scope type; package functions, since Go
//     methods cannot have type parameters), OnUsage, OnStatus, OnError,
//     OnTextComplete, OnToolCallComplete, OnTurnStart and OnTurnEnd
//     (methods);
//   - all in one: Subscribe(w, s) with a Subscriber[TS, US] (the
//     WorkerSubscriber of docs/architecture.md#the-turn-loop with its text and tool_use scope
//     types; embed NopSubscriber);
//   - Observer: every worker event of docs/protocol.md §5, one to one, as the
//     turn service publishes it (type, channel, payload of pkg/events); see
//     Event for the table.
//
// Handlers are called on the goroutine that runs the turn; see Observer for
// the ordering guarantees.
package worker
