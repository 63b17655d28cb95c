package turn

import (
	"context"
	"errors"
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/models"
	"github.com/llmworker/llmworker/pkg/price"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/transcript"
	"github.com/llmworker/llmworker/pkg/worker"
)

// modelOptions are the request's model options for every model call of
// the turn, with OpenAI's prompt cache key defaulting to the session id,
// else the turn id, so that the steps of a turn, and the turns of a
// session, share a cache. They come from the turn request kept in the
// turn's state, so a turn continued on another replica keeps them.
func modelOptions(t *turnRun, req *events.TurnRequest) events.ModelOptions {
	o := req.ModelOptions
	if o.CacheKey == "" && o.CacheEnabled() {
		o.CacheKey = t.session
		if o.CacheKey == "" {
			o.CacheKey = t.id
		}
	}
	return o
}

// outputRepairs is the request's output_repairs as the worker's bound.
func outputRepairs(req *events.TurnRequest) int {
	if n := req.Repairs(); n > 0 {
		return n
	}
	return worker.NoRepairs
}

// workerCode is the code of a turn whose worker could not be built: the
// request's fault when a field of it is wrong (a tool_choice naming a
// tool the turn does not offer, a response_format schema that does not
// compile), else internal.
func workerCode(err error) string {
	var fe *events.FieldError
	if errors.Is(err, worker.ErrInvalidConfig) && errors.As(err, &fe) {
		return CodeInvalidRequest
	}
	return CodeInternal
}

// models is the model table in force (the shipped one without
// Config.Models).
func (s *Service) models() *models.Table {
	if s.cfg.Models == nil {
		return models.Default()
	}
	return s.cfg.Models.Table()
}

// prices is the price table in force (nil without Config.Prices).
func (s *Service) prices() *price.Table {
	if s.cfg.Prices == nil {
		return nil
	}
	return s.cfg.Prices.Table()
}

// maxToolResult bounds a tool result with media by what one NATS message
// holds, less room for the rest of the turn's state: a result above it is
// an error result naming the tool, not a checkpoint too large to store.
func (s *Service) maxToolResult() int {
	n := int(s.nc.MaxPayload())
	if n <= 0 {
		return 0
	}
	return n - min(n/4, 64<<10)
}

// newWorker builds the worker of one turn.
func (s *Service) newWorker(t *turnRun, req *events.TurnRequest, tools []tool.Tool) (*worker.Worker, error) {
	maxSteps := req.MaxSteps
	if maxSteps == 0 {
		maxSteps = s.cfg.DefaultMaxSteps
	}
	retries := 0
	if p := req.MaxTurnEndRetries; p != nil {
		retries = *p
		if retries == 0 {
			retries = worker.NoRetries
		}
	}
	// The run holds the session's positions from its checkpoint's Base
	// on; read_result reads those before from the session's transcript.
	var originals func(ctx context.Context, from, to int) ([]events.Message, error)
	if t.session != "" {
		originals = t.originals
	}
	tools = t.subAgentTools(tools)
	var shared worker.SharedBudget
	if b := t.newTreeBudget(); b != nil {
		shared, t.children.tree = b, b
	}
	return worker.New(worker.Config{
		Provider:    s.provider,
		Model:       req.Model,
		System:      req.System,
		MaxTokens:   req.MaxTokens,
		Temperature: req.Temperature,
		Thinking:    req.Thinking,
		Tools:       tools,
		// nil ToolNames offers every tool of Tools: they were selected
		// by the request's patterns already.
		Hooks:                 s.cfg.Hooks,
		MaxSteps:              maxSteps,
		MaxTurnEndRetries:     retries,
		StepAttempts:          s.cfg.StepRetries + 1,
		RetryStep:             s.retryStep,
		FallbackModels:        req.FallbackModels,
		Fallback:              s.fallback,
		TurnID:                t.id,
		SessionID:             t.session,
		Checkpoint:            t.checkpoint,
		CheckpointToolResults: s.cfg.CheckpointToolResults,
		NoEagerStart:          s.cfg.NoEagerStart,
		Observer:              t,

		Options:             modelOptions(t, req),
		ToolChoiceEveryStep: req.ToolChoiceEveryStep,
		OutputRepairs:       outputRepairs(req),
		MaxToolResult:       s.maxToolResult(),

		MaxTotalTokens: req.MaxTotalTokens,
		MaxCost:        req.MaxCost,
		SharedBudget:   shared,
		Prices:         s.prices(),
		// The service's default, then the request's settings (Merge).
		// The service's default, then the session's, then the request's
		// (Merge).
		Compaction:  s.cfg.Compaction.Merge(t.base.SessionCompaction).Merge(req.Compaction),
		ModelLimits: s.models().Lookup,
		Originals:   originals,
	})
}

// originals reads the session's positions [from, to) (those before the
// run's Base: worker.Config.Originals), from the subject's first message.
// tx.sess is set before the worker runs and not written while it does, so
// a tool's goroutine reads it without w.mu, which a state write holds.
func (t *turnRun) originals(ctx context.Context, from, to int) ([]events.Message, error) {
	ref := t.tx.sess
	if from < 0 || to > ref.Len || from > to {
		return nil, fmt.Errorf("turn: positions [%d, %d) are not in the %d of session %q", from, to, ref.Len, t.session)
	}
	msgs, err := t.s.tx.Read(ctx, transcript.KindSession, kvKey(t.session), transcript.Range{Upto: ref, From: from})
	if err != nil {
		return nil, fmt.Errorf("%w: session %q: %w", ErrTranscriptUnavailable, t.session, err)
	}
	return msgs[:to-from], nil
}
