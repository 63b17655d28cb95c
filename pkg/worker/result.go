package worker

import (
	"encoding/json"

	"github.com/llmworker/llmworker/pkg/events"
)

// Status is how a turn ended (or stopped, for paused).
type Status string

const (
	// StatusCompleted: the model answered without tool calls and the
	// on_turn_end hooks let the turn finish.
	StatusCompleted Status = "completed"
	// StatusPaused: a before_tool_call or on_turn_end hook paused the turn;
	// Result.State continues it with Resume.
	StatusPaused Status = "paused"
	// StatusAborted: the context was cancelled or a hook aborted (or
	// cancelled) the turn; on_abort hooks ran.
	StatusAborted Status = "aborted"
	// StatusFailed: the turn could not go on (a failed model call, a bound
	// exceeded, a checkpoint error); on_abort hooks ran.
	StatusFailed Status = "failed"
)

// Codes of aborted and failed turns (Result.Code, events.TurnEnded.Code).
const (
	CodeCancelled         = "cancelled"
	CodeHookAbort         = "hook_abort"
	CodeHookCancel        = "hook_cancel"
	CodeHookFailed        = "hook_failed"
	CodeMaxSteps          = "max_steps"
	CodeMaxTurnEndRetries = "max_turn_end_retries"
	CodeProviderError     = "provider_error"
	CodeCheckpoint        = "checkpoint"
	// CodeBudgetExceeded: the next model call would pass
	// Config.MaxTotalTokens or Config.MaxCost.
	CodeBudgetExceeded = "budget_exceeded"
	// CodeInvalidOutput: the final answer did not fit
	// Config.Options.ResponseFormat, also after Config.OutputRepairs
	// repair steps; the reason names the first violation.
	CodeInvalidOutput = "invalid_output"
	// CodeContextOverflow: the model call's context (messages, tools
	// and the output it asks room for) does not fit the model's window
	// (llm.KindContextOverflow): compaction could not make it fit (the
	// reason names the message), or the provider refused it as too long
	// again after a compaction. A refused call is not retried as it is
	// and is no fallback trigger.
	CodeContextOverflow = "context_overflow"
	// CodeDetached: the run stopped because the turn continues elsewhere
	// (see ErrDetached); nothing was published for it.
	CodeDetached = "detached"
)

// Result is the outcome of Run, Resume or RunFrom.
type Result struct {
	TurnID    string
	SessionID string
	Status    Status
	// Messages is the whole transcript: the input messages, then every
	// assistant message and tool result message of the turn (and messages
	// added by on_turn_end hooks or a resume).
	Messages []events.Message
	// StopReason is the stop reason of the last model response.
	StopReason events.StopReason
	// Usage is the token usage summed over the steps of the turn
	// (including earlier runs of a resumed turn).
	Usage events.UsageEvent
	// Cost is what the turn's model calls cost, in Config.Prices'
	// currency; nil when the model has no price.
	Cost *float64
	// Steps is the number of model calls made so far in the turn.
	Steps int
	// Compaction is the active compaction at the end of the run (nil for
	// none): the next turn of the conversation continues it
	// (RunCompacted), so it reads the same projection and does not
	// compact the same span again.
	Compaction *events.Compaction
	// Output is the final answer parsed as JSON, for a completed turn
	// with Config.Options.ResponseFormat: it fits the format (see
	// RunStructured for a typed one).
	Output json.RawMessage
	// Reason says, for a person, why the turn was paused, aborted or
	// failed; Code is the machine-readable form (Code* constants) and Hook
	// the hook that decided, if one did.
	Reason string
	Code   string
	Hook   string
	// State is the checkpoint of a paused turn: pass it to Resume (it is
	// JSON-serialisable, so it may be stored and resumed elsewhere).
	State *Checkpoint

	err error
}

// Err returns nil for a completed or paused turn and otherwise a *TurnError
// matching one of ErrCancelled, ErrHookAbort, ErrMaxSteps,
// ErrMaxTurnEndRetries, ErrBudgetExceeded, ErrProvider, ErrCheckpoint and ErrInvalidOutput.
func (r *Result) Err() error {
	if r == nil || r.err == nil {
		return nil
	}
	return r.err
}

// Text returns the text of the last assistant message, "" if none.
func (r *Result) Text() string {
	if r == nil {
		return ""
	}
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == events.RoleAssistant {
			return r.Messages[i].Text()
		}
	}
	return ""
}

// TurnError is the error of an aborted or failed turn.
type TurnError struct {
	Status Status
	Code   string
	Reason string
	Hook   string
	// Cause is the underlying error (a *hook.Failure, the checkpoint
	// error, the provider's error), if any.
	Cause error

	kind error
}

func (e *TurnError) Error() string { return e.Reason }

// Is matches the sentinel of the outcome (ErrMaxSteps, ...).
func (e *TurnError) Is(target error) bool { return target == e.kind }

// Unwrap returns the cause.
func (e *TurnError) Unwrap() error { return e.Cause }
