package worker

import "errors"

// Errors returned by New, Run, Resume and RunFrom themselves: the call could
// not start a turn, and no worker event was sent.
var (
	// ErrNoProvider is returned by New when Config.Provider is nil.
	ErrNoProvider = errors.New("worker: no provider")

	// ErrInvalidConfig is returned by New (wrapped with the reason) for a
	// negative bound, a tool without a valid name, two tools of the same
	// name, or a malformed ToolNames pattern.
	ErrInvalidConfig = errors.New("worker: invalid config")

	// ErrInvalidMessages is returned by Run (wrapping the events.FieldError
	// that names the field) when the input messages do not validate, and by
	// Resume for invalid extra messages.
	ErrInvalidMessages = errors.New("worker: invalid messages")

	// ErrInvalidCheckpoint is returned by RunFrom and Resume for a nil
	// checkpoint, one of an unknown version, or one whose phase, pending
	// calls or pause do not fit together.
	ErrInvalidCheckpoint = errors.New("worker: invalid checkpoint")

	// ErrNotPaused is returned by Resume when the checkpoint is not paused.
	ErrNotPaused = errors.New("worker: turn is not paused")

	// ErrInvalidDecision is returned by Resume when a decision names no
	// call that waits for one, an edited input is not a JSON object, a
	// decision kind is unknown, or decisions are given for a turn paused at
	// on_turn_end (which has no calls to decide).
	ErrInvalidDecision = errors.New("worker: invalid decision")
)

// Turn outcomes. Result.Err returns a *TurnError that matches (errors.Is)
// exactly one of these for every turn that was aborted or failed.
var (
	// ErrCancelled: the context of Run was cancelled (status aborted, code
	// "cancelled").
	ErrCancelled = errors.New("worker: turn cancelled")

	// ErrHookAbort: a before_tool_call or after_tool_call hook answered
	// abort, an on_message_send hook cancelled the request, or a
	// fail_closed hook failed (status aborted; codes "hook_abort",
	// "hook_cancel", "hook_failed"). The *TurnError unwraps to the
	// *hook.Failure for failures.
	ErrHookAbort = errors.New("worker: aborted by a hook")

	// ErrMaxSteps: the model still wanted another step after MaxSteps model
	// calls (status failed, code "max_steps").
	ErrMaxSteps = errors.New("worker: max_steps reached")

	// ErrMaxTurnEndRetries: on_turn_end hooks asked to continue more than
	// MaxTurnEndRetries times (status failed, code "max_turn_end_retries").
	ErrMaxTurnEndRetries = errors.New("worker: max_turn_end_retries reached")

	// ErrBudgetExceeded: the next model call would pass the turn's
	// MaxTotalTokens or MaxCost (status failed, code "budget_exceeded").
	ErrBudgetExceeded = errors.New("worker: budget exceeded")

	// ErrProvider: the model call failed (the provider returned an error,
	// or the stream ended failed or was cancelled by the provider) on every
	// attempt (status failed, code "provider_error" or the kind its error
	// names, see Config.StepAttempts and docs/protocol.md §10).
	ErrProvider = errors.New("worker: model call failed")

	// ErrCheckpoint: Config.Checkpoint returned an error (status failed,
	// code "checkpoint"); the *TurnError unwraps to it.
	ErrCheckpoint = errors.New("worker: checkpoint failed")

	// ErrInvalidOutput: the final answer did not fit
	// Config.Options.ResponseFormat after the repair steps
	// (Config.OutputRepairs) (status failed, code "invalid_output").
	ErrInvalidOutput = errors.New("worker: output does not fit the response format")

	// ErrContextOverflow: the context of a model call does not fit the
	// model's window: no compaction makes it fit (the *TurnError unwraps
	// to pkg/compact's *OverflowError naming the message, before the
	// provider call), or the provider refused it as too long a second
	// time in a step, after the compaction the first refusal made
	// (status failed, code "context_overflow").
	ErrContextOverflow = errors.New("worker: context does not fit the model's window")

	// ErrNoOutput is returned by RunStructured for a turn that completed
	// without a structured output (the worker has no response format) or
	// paused.
	ErrNoOutput = errors.New("worker: no structured output")

	// ErrDetached is for the caller to use, not returned by itself: cancel
	// the run's context with it as the cause (context.WithCancelCause), or
	// return an error matching it from Config.Checkpoint, when the turn is
	// continued elsewhere (another replica took it over, or this one hands
	// it off while draining). The run then stops quietly: no terminal
	// event for the observers and no on_abort hooks, since the turn is not
	// over (block events already under way may still reach observers). The Result has status aborted and
	// code "detached", and its error matches ErrDetached.
	ErrDetached = errors.New("worker: run detached; the turn continues elsewhere")
)
