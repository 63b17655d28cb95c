package worker

import (
	"context"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/llmworker/llmworker/pkg/compact"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/price"
	"github.com/llmworker/llmworker/pkg/tool"
)

// Defaults for the zero values of Config.
const (
	// DefaultMaxSteps bounds the model calls of a turn when
	// Config.MaxSteps is 0.
	DefaultMaxSteps = 20
	// DefaultMaxTurnEndRetries bounds continue_with_messages answers of
	// on_turn_end hooks when Config.MaxTurnEndRetries is 0.
	DefaultMaxTurnEndRetries = 3
	// NoRetries as Config.MaxTurnEndRetries allows no continue_with_messages
	// at all (0 means the default).
	NoRetries = -1
	// DefaultIdleTimeout fails a model call silent this long when
	// Config.IdleTimeout is 0.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultOutputRepairs bounds the repair steps of a final answer that
	// does not fit Options.ResponseFormat when Config.OutputRepairs is 0.
	DefaultOutputRepairs = 1
	// NoRepairs as Config.OutputRepairs fails a turn whose final answer
	// does not fit at once (0 means the default).
	NoRepairs = -1
)

// ToolSet looks tools up by name; *tool.Registry implements it. A turn
// service can implement it over a remote tool catalog.
type ToolSet interface {
	Get(name string) (tool.Tool, bool)
	List() []tool.Tool
}

var _ ToolSet = (*tool.Registry)(nil)

// Config configures a Worker. Only Provider is required: the zero values
// of the other fields give a turn with no tools, no hooks and the default
// bounds.
type Config struct {
	// Provider opens model streams (required).
	Provider llm.Provider
	// Model, System, MaxTokens, Temperature and Thinking go into every
	// completion request as they are.
	Model       string
	System      string
	MaxTokens   int
	Temperature *float64
	Thinking    *events.ThinkingConfig

	// Options go into every completion request of the turn (structured
	// output, tool choice, sampling, provider options, caching:
	// events.ModelOptions), with two rules of the turn loop:
	//
	//   - A ToolChoice that forces a tool ("required", or a named tool)
	//     goes into the first model call of the turn only, later calls
	//     leave tool_choice unset (auto), unless ToolChoiceEveryStep: a
	//     model made to call a tool on every call can never answer, so the
	//     turn would only end at MaxSteps. "none" goes into every call. A
	//     named tool must be one the turn offers, and "required" needs one
	//     (New fails otherwise).
	//   - With a ResponseFormat the final answer (the text of the last
	//     assistant message, when the model stops without tool calls) must
	//     be JSON fitting its schema (any JSON object for type json),
	//     checked with pkg/tool's validator before on_turn_end; see
	//     OutputRepairs. The parsed value is Result.Output and the output
	//     of llmw.turn.completed.
	Options events.ModelOptions
	// ToolChoiceEveryStep applies a forcing Options.ToolChoice to every
	// model call of the turn.
	ToolChoiceEveryStep bool
	// OutputRepairs bounds the repair steps of a final answer that does
	// not fit Options.ResponseFormat: a repair step appends a user message
	// naming the first violation and asking for a corrected answer, and
	// makes another model call (it counts against MaxSteps). 0 means
	// DefaultOutputRepairs, NoRepairs (any negative value) none. Past the
	// repairs, or when MaxSteps leaves no model call for one, the turn
	// fails with code "invalid_output" naming the first violation.
	OutputRepairs int

	// Tools are tools the model may call; Registry is looked up after them
	// (a name in Tools shadows the same name in Registry).
	Tools    []tool.Tool
	Registry ToolSet
	// ToolNames selects which of those tools are offered to the model:
	// names, path.Match patterns ("fs_*") or "*". nil offers every tool; an
	// empty non-nil slice offers none. A call of a tool that is not offered
	// is answered as for an unknown tool.
	ToolNames []string

	// NoEagerStart makes every tool call wait for the end of the model's
	// response. Otherwise a call of a tool that may start early
	// (tool.EagerOf: read-only or idempotent tools, or tools that say so)
	// starts as soon as its block of the stream stopped with a complete
	// input: its before_tool_call hooks run then, and the call runs while
	// the model goes on streaming. Its result is still settled after the
	// stream ended, in call order (after_tool_call, llmw.tool.result, the
	// tool message), as for any call. A call started for a response that
	// then fails, or that a model call made again does not ask for again,
	// is stopped and its result dropped (llmw.tool.cancelled).
	NoEagerStart bool

	// MaxToolResult bounds a tool result with parts (images, files):
	// tool.ResultSize of its text and parts, inline media as base64. A
	// result above it is an error result naming the tool, which the model
	// reads, instead of a transcript that no message can carry. 0 means no
	// bound; the turn service sets what one NATS message holds.
	MaxToolResult int

	// Hooks are the turn's hooks; nil means none.
	Hooks *hook.Chain
	// Vars are the initial hook variables of every turn.
	Vars map[string]string

	// MaxSteps bounds the model calls of a turn: 0 means DefaultMaxSteps;
	// negative is invalid.
	MaxSteps int
	// MaxTurnEndRetries bounds the continue_with_messages answers of
	// on_turn_end hooks: 0 means DefaultMaxTurnEndRetries, NoRetries (any
	// negative value) none.
	MaxTurnEndRetries int
	// MaxTotalTokens and MaxCost are the turn's budgets (0 = none;
	// negative is invalid): the turn fails with code "budget_exceeded"
	// instead of making a model call (an attempt included) that would pass
	// one: when the turn's tokens (cost) so far, plus the input of its last
	// call and MaxTokens, are more than the budget (docs/protocol.md §5
	// "Budgets"). MaxCost is in Prices' currency and needs a price of
	// Model.
	MaxTotalTokens int64
	MaxCost        float64
	// SharedBudget, when set, is a budget the turn shares with other
	// turns (a sub-agent tree's, pkg/turn): asked before every model call
	// once the turn's own budgets allow it, and told the turn's totals
	// after every call that reported usage.
	SharedBudget SharedBudget
	// ModelLimits looks up the context window and output ceiling of the
	// turn's models (Model and FallbackModels) and of the summarizer; nil
	// knows none.
	ModelLimits llm.LimitsFunc
	// Compaction configures the compaction of the turn's context before
	// each model call (pkg/compact; docs/architecture.md "Compaction"):
	// a turn service merges its default, the session's and the turn
	// request's (events.CompactionConfig.Merge). The zero value compacts
	// with pkg/compact's defaults before a call whose estimate passes the
	// threshold of a model ModelLimits knows, and, for any model, once
	// after a provider refused a call's context as too long.
	Compaction events.CompactionConfig
	// Estimate estimates the tokens of messages for compaction; nil is
	// llm.EstimateMessages.
	Estimate compact.Estimator
	// Originals reads the transcript's positions [from, to) that precede
	// a checkpoint's Base (the run holds only the messages from Base on):
	// the read_result tool reads an old tool result through it. nil
	// when the run has none (an in-process run holds the whole
	// transcript).
	Originals func(ctx context.Context, from, to int) ([]events.Message, error)
	// Prices prices the model calls: with a price of Model, llmw.usage,
	// llmw.turn.completed and Result carry the cost. nil prices nothing.
	Prices *price.Table

	// StepAttempts is how often a model call is made within a step before
	// its failure fails the turn: 0 or 1 means once. A new attempt starts
	// from nothing: the failed one's open blocks are aborted, its finished
	// blocks are dropped (they are not in the assistant message, its tool
	// calls do not run) and llmw.turn.step announces the attempt number.
	StepAttempts int
	// RetryStep, if set, decides whether a failed model call is made again
	// (while StepAttempts allows) and how long to wait first; the wait is
	// cut short by the turn's context. nil makes every failed call again
	// at once.
	RetryStep func(f StepFailure) (wait time.Duration, retry bool)
	// FallbackModels are the models (provider:model) a step goes on with,
	// in order, when its call on Model fails and StepAttempts or RetryStep
	// make no more calls on it: when the failed call streamed no block
	// (once a block reached the observers, a switch would show a second
	// answer) and Fallback takes the failure. The next model gets its own
	// StepAttempts; llmw.turn.step and llmw.usage name the model. A turn
	// stays on the model that answered a step for its later steps
	// (Checkpoint.Model): a model's reasoning goes on with its own
	// steps, a provider that is overloaded is not asked first at every
	// step, and the transcript a model continues is one it wrote.
	// Each must be provider:model, distinct and not Model; at most
	// events.MaxFallbackModels.
	FallbackModels []string
	// Fallback, if set, decides whether a failed step goes on with the
	// next of FallbackModels; nil is DefaultFallback.
	Fallback func(f StepFailure) bool
	// IdleTimeout fails a model call when the provider sends nothing for
	// that long (0 = DefaultIdleTimeout, negative = no limit). A stream that
	// is llm.WellFormed already keeps its own limit.
	IdleTimeout time.Duration

	// TurnID and SessionID identify the turns of this worker; an empty
	// TurnID gives every Run a new generated id.
	TurnID    string
	SessionID string

	// Checkpoint, if set, receives the turn's state at every step
	// boundary: before each model call, before each call that starts while
	// the model streams (Checkpoint.Eager; see NoEagerStart), after the
	// before_tool_call hooks of a step decided, and when the turn pauses
	// (with CheckpointToolResults also after each settled tool result). An error fails the turn with
	// code "checkpoint". It runs on the Run goroutine; the checkpoint is the
	// callee's to keep.
	Checkpoint func(ctx context.Context, cp *Checkpoint) error
	// CheckpointToolResults also checkpoints after every tool result, so a
	// turn continued by RunFrom never runs a finished call again even when
	// its executor cannot de-duplicate.
	CheckpointToolResults bool

	// Observer receives every worker event (docs/protocol.md §5); see Observer.
	Observer Observer
}

// StepFailure is a failed model call, as Config.RetryStep sees it.
type StepFailure struct {
	// Step numbers the call's step and Attempt the call among the step's
	// calls on the model in use (both from 1).
	Step, Attempt int
	// Model is the model the call asked (provider:model).
	Model string
	// Output is true when the call's stream had started a block before
	// it failed.
	Output bool
	// Code is the code of the stream's error event; "cancelled" when the
	// provider cancelled the stream, llm.CodeProviderFailed when it failed
	// without saying why, "" when the call could not be opened (see Err).
	Code string
	// Err is the error of Provider.Stream when the call could not be
	// opened, nil when its stream failed.
	Err error
}

// ContextOverflow reports whether the call failed because its context
// did not fit the model's window: its error's kind
// (llm.KindContextOverflow, as ingest and the adapters report it) or its
// stream's error code (CodeContextOverflow). Such a failure is neither
// retried as it is nor a fallback trigger, whatever RetryStep and
// Fallback say.
func (f StepFailure) ContextOverflow() bool {
	if f.Err != nil {
		k, ok := llm.KindOf(f.Err)
		return ok && k == llm.KindContextOverflow
	}
	return f.Code == CodeContextOverflow
}

// DefaultFallback is the Fallback of a Config without one: a call that
// could not be opened goes on with the next model when its error names
// a rate limit or an unavailable provider (llm.KindRateLimited,
// llm.KindUnavailable) or no kind (a transport failure); a stream that
// failed does unless its code is a refusal, a content filter or a
// blocked prompt (StreamFailureCodes), names an invalid request or is
// CodeContextOverflow.
func DefaultFallback(f StepFailure) bool {
	if f.Err != nil {
		k, ok := llm.KindOf(f.Err)
		return !ok || k == llm.KindRateLimited || k == llm.KindUnavailable
	}
	return !slices.Contains(StreamFailureCodes, f.Code) && !strings.HasPrefix(f.Code, "invalid_request") && f.Code != CodeContextOverflow
}

// resolved is a validated Config with defaults applied.
type resolved struct {
	Config
	// models are Model and FallbackModels, in order.
	models      []string
	byName      map[string]tool.Tool
	maxSteps    int
	maxRetries  int
	attempts    int
	patternsAll bool
	repairs     int
	// output checks a final answer against Options.ResponseFormat's
	// schema (nil for type json, or no format).
	output *tool.Validator
}

func resolve(cfg Config) (*resolved, error) {
	if cfg.Provider == nil {
		return nil, ErrNoProvider
	}
	r := &resolved{Config: cfg, byName: make(map[string]tool.Tool, len(cfg.Tools))}
	if err := events.ValidateFallbackModels("fallback_models", cfg.Model, cfg.FallbackModels); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	r.models = append([]string{cfg.Model}, cfg.FallbackModels...)
	switch {
	case cfg.MaxSteps < 0:
		return nil, fmt.Errorf("%w: max_steps must not be negative, got %d", ErrInvalidConfig, cfg.MaxSteps)
	case cfg.MaxSteps == 0:
		r.maxSteps = DefaultMaxSteps
	default:
		r.maxSteps = cfg.MaxSteps
	}
	switch {
	case cfg.MaxTurnEndRetries < 0:
		r.maxRetries = 0
	case cfg.MaxTurnEndRetries == 0:
		r.maxRetries = DefaultMaxTurnEndRetries
	default:
		r.maxRetries = cfg.MaxTurnEndRetries
	}
	if err := checkBudgets(cfg); err != nil {
		return nil, err
	}
	r.attempts = max(cfg.StepAttempts, 1)
	switch {
	case cfg.OutputRepairs < 0:
		r.repairs = 0
	case cfg.OutputRepairs == 0:
		r.repairs = DefaultOutputRepairs
	default:
		r.repairs = cfg.OutputRepairs
	}
	if err := cfg.Options.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := cfg.Compaction.Validate("compaction"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if f := cfg.Options.ResponseFormat; f != nil && f.Type == events.FormatJSONSchema {
		v, err := tool.NewValidator(f.Schema)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, &events.FieldError{Field: "response_format.schema", Problem: "does not compile: " + err.Error()})
		}
		r.output = v
	}
	for _, t := range cfg.Tools {
		if t == nil {
			return nil, fmt.Errorf("%w: nil tool", ErrInvalidConfig)
		}
		name := t.Name()
		if !events.ValidToolName(name) {
			return nil, fmt.Errorf("%w: tool name %q must match ^[a-zA-Z0-9_-]{1,64}$", ErrInvalidConfig, name)
		}
		if _, dup := r.byName[name]; dup {
			return nil, fmt.Errorf("%w: two tools named %q", ErrInvalidConfig, name)
		}
		r.byName[name] = t
	}
	r.patternsAll = cfg.ToolNames == nil
	for _, p := range cfg.ToolNames {
		if p == "*" {
			r.patternsAll = true
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("%w: tool pattern %q: %v", ErrInvalidConfig, p, err)
		}
	}
	switch c := cfg.Options.ToolChoice; {
	case c == nil:
	case c.Mode == events.ToolNamed:
		if _, ok := r.lookup(c.Name); !ok {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, &events.FieldError{Field: "tool_choice.name",
				Problem: fmt.Sprintf("names tool %q, which the turn does not offer (%s)", c.Name, offeredList(r.toolNames()))})
		}
	case c.Mode == events.ToolRequired && cfg.Registry == nil && len(r.tools()) == 0:
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, &events.FieldError{Field: "tool_choice",
			Problem: `is "required", but the turn offers no tools`})
	}
	return r, nil
}

func checkBudgets(cfg Config) error {
	bad := func(field, problem string) error {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, &events.FieldError{Field: field, Problem: problem})
	}
	if cfg.MaxTotalTokens < 0 {
		return bad("max_total_tokens", fmt.Sprintf("must not be negative, got %d", cfg.MaxTotalTokens))
	}
	if !(cfg.MaxCost >= 0) || math.IsInf(cfg.MaxCost, 1) {
		return bad("max_cost", fmt.Sprintf("must be a finite number not below 0, got %v", cfg.MaxCost))
	}
	if cfg.MaxCost > 0 {
		// Every model the turn may call, its fallbacks too, is priced.
		for _, m := range append([]string{cfg.Model}, cfg.FallbackModels...) {
			if _, ok := cfg.Prices.Lookup(m); ok {
				continue
			}
			if cfg.Prices.Len() == 0 {
				return bad("max_cost", fmt.Sprintf("needs a price of model %q, and the turn service has no price table (--prices)", m))
			}
			return bad("max_cost", fmt.Sprintf("needs a price of model %q, which the price table (%d models) does not have", m, cfg.Prices.Len()))
		}
	}
	return nil
}

// offered reports whether the tool called name is offered to the model.
func (r *resolved) offered(name string) bool {
	if r.patternsAll {
		return true
	}
	for _, p := range r.ToolNames {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// lookup returns the offered tool called name, or the built-in
// read_result (readresult.go) while compaction is on.
func (r *resolved) lookup(name string) (tool.Tool, bool) {
	if t, ok := r.lookupUser(name); ok {
		return t, true
	}
	if name == compact.ReadResultTool && !r.Compaction.Off() {
		return readResult{}, true
	}
	return nil, false
}

// lookupUser returns the offered tool called name of Tools or Registry.
func (r *resolved) lookupUser(name string) (tool.Tool, bool) {
	if !r.offered(name) {
		return nil, false
	}
	if t, ok := r.byName[name]; ok {
		return t, true
	}
	if r.Registry != nil {
		if t, ok := r.Registry.Get(name); ok && t != nil {
			return t, true
		}
	}
	return nil, false
}

// tools returns the offered tools, sorted by name.
func (r *resolved) tools() []tool.Tool {
	var out []tool.Tool
	for name, t := range r.byName {
		if r.offered(name) {
			out = append(out, t)
		}
	}
	if r.Registry != nil {
		for _, t := range r.Registry.List() {
			if t == nil {
				continue
			}
			name := t.Name()
			if _, shadowed := r.byName[name]; !shadowed && r.offered(name) {
				out = append(out, t)
			}
		}
	}
	slices.SortFunc(out, func(a, b tool.Tool) int {
		switch an, bn := a.Name(), b.Name(); {
		case an < bn:
			return -1
		case an > bn:
			return 1
		}
		return 0
	})
	return out
}

// definitions returns the definitions sent to the model.
func (r *resolved) definitions() []events.ToolDefinition {
	ts := r.tools()
	if len(ts) == 0 {
		return nil
	}
	defs := make([]events.ToolDefinition, len(ts))
	for i, t := range ts {
		defs[i] = tool.Definition(t)
	}
	return defs
}

func (r *resolved) toolNames() []string {
	ts := r.tools()
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name()
	}
	return out
}

func offeredList(names []string) string {
	if len(names) == 0 {
		return "it offers no tools"
	}
	return "offered: " + strings.Join(names, ", ")
}
