package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmworker/llmworker/pkg/compact"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/price"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/tool"
)

// The compaction of the turn's context before a model call
// (docs/architecture.md, "Compaction"): the policy is pkg/compact's; the
// run estimates, compacts, records the compaction in its state (so the
// checkpoint written before the model call holds it) and sends the
// projection.

// projection is what the model of the next call reads: the active
// compaction's messages and the originals after it.
func (r *run) projection(model string) []events.Message {
	origin, _ := events.SplitModel(model)
	msgs := r.st.Messages[:len(r.st.Messages):len(r.st.Messages)]
	return compact.Project(r.st.Compaction, msgs, r.st.Base, origin)
}

// estimator is Config.Estimate or the default.
func (r *run) estimator() compact.Estimator {
	if r.cfg.Estimate != nil {
		return r.cfg.Estimate
	}
	return llm.EstimateMessages
}

// overhead estimates the request's tokens besides its messages.
func (r *run) overhead() int64 {
	est := r.estimator()
	n := compact.EstimateText(est, r.cfg.System)
	defs := r.definitions()
	if !r.offerRead() && !r.cfg.Compaction.Off() {
		if _, shadowed := r.cfg.lookupUser(compact.ReadResultTool); !shadowed {
			// Offered once the compaction is: count it now.
			defs = append(defs, tool.Definition(readResult{}))
		}
	}
	if len(defs) > 0 {
		b, _ := json.Marshal(defs)
		n += compact.EstimateText(est, string(b))
	}
	return n
}

// limits are the limits Config.ModelLimits knows of model.
func (r *run) limits(model string) llm.ModelLimits {
	if r.cfg.ModelLimits == nil || model == "" {
		return llm.ModelLimits{}
	}
	l, _ := r.cfg.ModelLimits(model)
	return l
}

// compact runs the policy before model call step on model: force after
// the provider refused the context as too long. A compaction it makes is
// the turn's active one from then on, and its summarizer's usage is
// counted in the turn's usage and budgets, both in the state the caller
// checkpoints next: that checkpoint commits the compaction, and only
// then does announce emit llmw.turn.compacted and the summary's
// llmw.usage. A crash before the commit leaves neither the compaction
// nor its charge: the run continued from the checkpoint before
// compacts (and summarizes) again. An *ending is a context that cannot
// fit (context_overflow, before the provider call).
func (r *run) compact(ctx context.Context, step int, model string, force bool) *ending {
	cfg := r.cfg.Compaction
	if cfg.Off() || !force && r.native(model) {
		// A provider that compacts natively does so inside the call.
		return nil
	}
	if !force && r.madeFor(step) {
		// Committed by the checkpoint this run continues from: the
		// projection is the one the first run would have sent.
		return nil
	}
	// read_result reads the results the model has seen so far.
	r.publishResults()
	limits := r.limits(model)
	if limits.ContextWindow <= 0 && !force {
		return nil // nothing to compact against: no estimate needed
	}
	pol := compact.Policy{Config: cfg, Estimate: r.cfg.Estimate}
	n := r.nextCompaction()
	s := &summaries{r: r, id: r.requestID(step, 1) + "-c" + strconv.Itoa(n), fallbacks: r.summaryFallbacks(model)}
	pol.Summarize = s.summarize
	summarizer := cfg.SummarizerModel
	if summarizer == "" {
		summarizer = model
	}
	in := compact.Input{
		Messages: r.st.Messages, Base: r.st.Base, Active: r.st.Compaction,
		Overhead: r.overhead(), Model: model, Limits: limits, MaxOutput: int64(r.cfg.MaxTokens),
		SummarizerLimits: r.limits(summarizer), Keep: r.unfinished(), Force: force,
		Reported: r.reported(model),
	}
	start := time.Now()
	res, err := pol.Plan(ctx, in)
	if errors.Is(err, compact.ErrSummarizer) && ctx.Err() == nil {
		// Without its summary the cheaper tiers may still make the call fit.
		pol.Summarize = nil
		res, err = pol.Plan(ctx, in)
	}
	if res.Compaction != nil || err != nil {
		r.traceCompaction(ctx, start, step, n, res.Compaction, err)
	}
	switch {
	case ctx.Err() != nil:
		return cancelledEnding(ctx)
	case errors.Is(err, compact.ErrOverflow) && s.over != "":
		return &ending{status: StatusFailed, code: CodeBudgetExceeded, kind: ErrBudgetExceeded,
			reason: fmt.Sprintf("the context of model call %d on %s cannot fit without a summary, and %s", step, model, s.over), cause: err}
	case errors.Is(err, compact.ErrOverflow):
		return &ending{status: StatusFailed, code: CodeContextOverflow, kind: ErrContextOverflow,
			reason: fmt.Sprintf("the context of model call %d on %s cannot fit: %v", step, model, err), cause: err}
	case err != nil:
		return &ending{status: StatusFailed, code: CodeContextOverflow, kind: ErrContextOverflow, reason: err.Error(), cause: err}
	case res.Compaction == nil:
		return nil
	}
	c := res.Compaction
	c.ID, c.Turn, c.Step = r.st.TurnID+".c"+strconv.Itoa(n), r.st.TurnID, step
	if c.Model != "" && s.answered != "" {
		c.Model = s.answered // a fallback model made the summary
	}
	if c.Usage != nil && *c.Usage == (events.UsageEvent{}) {
		c.Usage = nil // the summarizer reported none
	}
	if c.Usage != nil {
		// The summarizer's input is not the next call's: keep the estimate
		// the budget check reads.
		last, lastCost := r.st.LastInput, r.st.LastInputCost
		r.charge(c.Model, *c.Usage)
		r.st.LastInput, r.st.LastInputCost = last, lastCost
		r.st.Usage = r.st.Usage.Add(*c.Usage)
	}
	r.st.Compaction = c
	r.unannounced = true
	r.publishResults()
	return nil
}

// native reports whether the provider of model compacts the context
// itself on the turn's model calls (events.CompactionConfig.Native).
func (r *run) native(model string) bool {
	prefix, _ := events.SplitModel(model)
	return r.cfg.Compaction.NativeOn() && !r.cfg.Compaction.Off() && llm.CompactsNatively(prefix)
}

// nativeRequest is the provider-native compaction a call on model asks
// for: at the threshold of the tiers (the provider's default when the
// model's window is unknown); nil when the provider does not compact.
func (r *run) nativeRequest(model string) *events.NativeCompaction {
	if !r.native(model) {
		return nil
	}
	pol := compact.Policy{Config: r.cfg.Compaction}
	return &events.NativeCompaction{Trigger: pol.Trigger(r.limits(model), int64(r.cfg.MaxTokens))}
}

// nativeCompacted records the provider-native compaction that msg, the
// answer of model call step, begins with (llm.NativeCompactionData): the
// turn's active compaction from then on covers the positions before msg,
// which a model of the provider's origin does not read (its block
// stands for them); any other model reads the compaction of the tiers
// that was active (Fallback) and the originals. Its usage is in the
// call's. The caller appends msg after.
func (r *run) nativeCompacted(ctx context.Context, step int, msg *events.Message) {
	if !llm.HasNativeCompaction(msg) {
		return
	}
	start := time.Now()
	prefix, _ := events.SplitModel(r.model)
	est, overhead := r.estimator(), r.overhead()
	fallback := r.st.Compaction
	if fallback.Native() != "" {
		fallback = fallback.Fallback
	}
	n := r.nextCompaction()
	c := &events.Compaction{
		ID: r.st.TurnID + ".c" + strconv.Itoa(n), To: r.st.Base + len(r.st.Messages), Messages: []events.Message{},
		Policy: "native:" + prefix, TokensBefore: overhead + est(r.projection(r.model)),
		TokensAfter: overhead + est([]events.Message{*msg}), Turn: r.st.TurnID, Step: step, Fallback: fallback,
	}
	r.traceCompaction(ctx, start, step, n, c, nil)
	r.st.Compaction = c
	// The call's input tokens counted the context the provider compacted
	// (its usage holds the compaction's): the next call's budget estimate
	// starts from the projection after it (overBudget).
	if last := r.st.LastInput; last > c.TokensAfter {
		r.st.LastInputCost *= float64(c.TokensAfter) / float64(last)
		r.st.LastInput = c.TokensAfter
	}
	r.em.emit(events.TurnCompacted{ID: c.ID, To: c.To, Policy: c.Policy, TokensBefore: c.TokensBefore, TokensAfter: c.TokensAfter, Step: step})
}

// counted is what the provider counted of a model call: the input
// tokens it reported (cached or not) for the call's request, which sent
// n messages of the projection under the compaction of id compaction on
// model.
type counted struct {
	model, compaction string
	n                 int
	tokens            int64
}

// noteCounted records the input tokens of a model call that sent n
// messages of the projection (ok: the call answered). A call whose
// messages on_message_send hooks may have rewritten, or whose usage
// says nothing of its input, leaves nothing: the next estimate is the
// estimator's alone.
func (r *run) noteCounted(model string, n int, u events.UsageEvent, ok bool) {
	r.counted = counted{}
	if !ok || r.chain.HasMessageSend() {
		return
	}
	if in := r.cfg.Prices.Split(model, u).AllInput(); in > 0 {
		r.counted = counted{model: model, compaction: compactionID(r.st.Compaction), n: n, tokens: in}
	}
}

// reported is the provider's count of the last model call's request
// when the next call on model sends it again and adds to it: the same
// model and compaction (the projection's first n messages unchanged,
// the turn's messages being appended only).
func (r *run) reported(model string) compact.Reported {
	c := r.counted
	if c.tokens == 0 || c.model != model || c.compaction != compactionID(r.st.Compaction) {
		return compact.Reported{}
	}
	return compact.Reported{Messages: c.n, Tokens: c.tokens}
}

func compactionID(c *events.Compaction) string {
	if c == nil {
		return ""
	}
	return c.ID
}

// madeFor reports whether the active compaction was made by this turn
// for model call step.
func (r *run) madeFor(step int) bool {
	c := r.st.Compaction
	return c != nil && c.Turn == r.st.TurnID && c.Step == step && strings.HasPrefix(c.ID, r.st.TurnID+".c")
}

// announce emits, once the checkpoint that commits the active compaction
// was written, its llmw.turn.compacted and the llmw.usage of its
// summary (marked with the compaction's id). A run continued from that
// checkpoint before its model call announces it again, with the same
// id: it cannot know whether the first run did; the turn service
// publishes each event only if the turn's events do not hold it
// (pkg/turn, scanEvents).
func (r *run) announce() {
	if !r.unannounced {
		return
	}
	r.unannounced = false
	c := r.st.Compaction
	if c == nil {
		return
	}
	r.em.emit(events.TurnCompacted{ID: c.ID, To: c.To, Policy: c.Policy, Model: c.Model,
		TokensBefore: c.TokensBefore, TokensAfter: c.TokensAfter, Usage: clonePtr(c.Usage), Step: c.Step})
	if c.Usage != nil {
		r.em.emit(events.UsageReport{Step: c.Step, Model: c.Model, Usage: cloneUsage(*c.Usage), Total: cloneUsage(r.st.Usage),
			Cost: r.cost(c.Model, *c.Usage), TotalCost: clonePtr(r.st.Cost), Compaction: c.ID})
	}
}

// Attributes of the compact span.
const (
	attrCompactionID     = attribute.Key("llmw.compaction.id")
	attrCompactionPolicy = attribute.Key("llmw.compaction.policy")
	attrCompactionTo     = attribute.Key("llmw.compaction.to")
	attrTokensBefore     = attribute.Key("llmw.compaction.tokens_before")
	attrTokensAfter      = attribute.Key("llmw.compaction.tokens_after")
)

// traceCompaction records a compaction (or a context that cannot fit) as
// a compact span under invoke_agent, from start: a plan that compacts
// nothing makes no span, so a turn has one per compaction.
func (r *run) traceCompaction(ctx context.Context, start time.Time, step, n int, c *events.Compaction, err error) {
	if !telemetry.Tracing() {
		return
	}
	_, span := telemetry.Tracer().Start(ctx, "compact", trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(start),
		trace.WithAttributes(telemetry.TurnID.String(r.st.TurnID), telemetry.Step.Int(step),
			attrCompactionID.String(r.st.TurnID+".c"+strconv.Itoa(n))))
	defer span.End()
	if err != nil {
		telemetry.Fail(span, CodeContextOverflow, err)
		return
	}
	span.SetAttributes(attrCompactionPolicy.String(c.Policy), attrCompactionTo.Int(c.To),
		attrTokensBefore.Int64(c.TokensBefore), attrTokensAfter.Int64(c.TokensAfter))
	if c.Model != "" {
		span.SetAttributes(telemetry.GenAIRequestModel.String(c.Model))
	}
	if c.Usage != nil {
		span.SetAttributes(usageAttrs(*c.Usage)...)
	}
}

// nextCompaction numbers the turn's next compaction: one more than the
// active one's when the turn made it ("<turn>.c<n>"), else 1.
func (r *run) nextCompaction() int {
	if c := r.st.Compaction; c != nil {
		if s, ok := strings.CutPrefix(c.ID, r.st.TurnID+".c"); ok {
			if n, err := strconv.Atoi(s); err == nil {
				return n + 1
			}
		}
	}
	return 1
}

// unfinished reports the calls a compaction must leave as they are: the
// step's pending calls and the calls started early.
func (r *run) unfinished() func(string) bool {
	if len(r.st.Pending) == 0 && len(r.st.Eager) == 0 {
		return nil
	}
	ids := map[string]bool{}
	for _, p := range r.st.Pending {
		ids[p.Call.ID] = true
	}
	for _, e := range r.st.Eager {
		ids[e.Call.ID] = true
	}
	return func(id string) bool { return ids[id] }
}

// summaryFallbacks are the models a summary is asked of, in order, when
// the summarizer failed: none for the setting's summarizer_model, else
// the turn's fallback models after model, the one in use
// (Config.FallbackModels), as the turn's own calls fall back.
func (r *run) summaryFallbacks(model string) []string {
	i := slices.Index(r.cfg.models, model)
	if r.cfg.Compaction.SummarizerModel != "" || i < 0 {
		return nil
	}
	return r.cfg.models[i+1:]
}

// summaries makes the summarizer calls of one compaction: each within
// the turn's budgets, counting the calls made before it (their usage is
// charged with the compaction's commit), and on the next of models when
// one fails.
type summaries struct {
	r         *run
	id        string
	fallbacks []string
	calls     int
	// answered is the model of the last summary made.
	answered string
	// tokens and cost are what the compaction's calls so far count
	// against the budgets.
	tokens int64
	cost   float64
	// over says why a summary was not asked for: it would pass a budget.
	over string
}

func (s *summaries) summarize(ctx context.Context, model, system, prompt string, maxTokens int) (string, events.UsageEvent, error) {
	r := s.r
	var usage events.UsageEvent
	var errs []error
	for _, m := range append([]string{model}, s.fallbacks...) {
		if why := s.overBudget(m, system, prompt, maxTokens); why != "" {
			s.over = why
			return "", usage, fmt.Errorf("%w: %s", ErrBudgetExceeded, why)
		}
		s.calls++
		text, u, err := r.summarize(ctx, s.id+"-"+strconv.Itoa(s.calls), m, system, prompt, maxTokens)
		usage = usage.Add(u)
		tk := r.cfg.Prices.Split(m, u)
		s.tokens += tk.Total()
		if p, ok := r.cfg.Prices.Lookup(m); ok {
			s.cost += p.Cost(tk)
		}
		if err == nil {
			s.answered = m
			return text, usage, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", m, err))
		if ctx.Err() != nil {
			break
		}
	}
	return "", usage, errors.Join(errs...)
}

// overBudget says why a summarizer call of model would pass the turn's
// max_total_tokens or max_cost, "" when it would not: the turn's count
// so far, the compaction's calls before it, and the call counted at its
// prompt's estimate and maxTokens of output (the rule of the turn's own
// calls, docs/protocol.md §5 "Budgets"). A summarizer model without a
// price is not held to max_cost.
func (s *summaries) overBudget(model, system, prompt string, maxTokens int) string {
	r := s.r
	in := compact.EstimateText(r.estimator(), system) + compact.EstimateText(r.estimator(), prompt)
	if b := r.cfg.MaxTotalTokens; b > 0 {
		if next := in + int64(maxTokens); r.st.Tokens+s.tokens+next > b {
			return fmt.Sprintf("a summary on %s would pass max_total_tokens (%d): the turn used %d tokens, the compaction's summaries %d, and the summary is counted at %d more (~%d input tokens and max %d output)",
				model, b, r.st.Tokens, s.tokens, next, in, maxTokens)
		}
	}
	if b := r.cfg.MaxCost; b > 0 {
		p, ok := r.cfg.Prices.Lookup(model)
		if !ok {
			return ""
		}
		var used float64
		if r.st.Cost != nil {
			used = *r.st.Cost
		}
		if next := p.Cost(price.Tokens{Input: in, Output: int64(maxTokens)}); used+s.cost+next > b*(1+costSlack) {
			return fmt.Sprintf("a summary on %s would pass max_cost (%s): the turn's model calls cost %s, the compaction's summaries %s, and the summary is counted at %s more",
				model, money(b), money(used), money(s.cost), money(next))
		}
	}
	return ""
}

// summarize makes one summarizer call: its stream is read here, never
// dispatched to the turn's timeline, so no observer sees its tokens as
// the assistant's.
func (r *run) summarize(ctx context.Context, id, model, system, prompt string, maxTokens int) (string, events.UsageEvent, error) {
	return summarizeOn(ctx, r.cfg.Provider, llm.Limit(r.cfg.IdleTimeout, DefaultIdleTimeout), id, model, system, prompt, maxTokens)
}

// Summarizer is a compact.Summarizer that makes its calls on p as a
// turn's compactions make them (request ids id-1, id-2, …): the summary's
// text is read from the stream, which no observer sees. A compaction made
// outside a turn (a session compacted on demand) uses it.
func Summarizer(p llm.Provider, id string) compact.Summarizer {
	var calls atomic.Int64
	return func(ctx context.Context, model, system, prompt string, maxTokens int) (string, events.UsageEvent, error) {
		n := calls.Add(1)
		return summarizeOn(ctx, p, DefaultIdleTimeout, id+"-"+strconv.FormatInt(n, 10), model, system, prompt, maxTokens)
	}
}

func summarizeOn(ctx context.Context, p llm.Provider, idle time.Duration, id, model, system, prompt string, maxTokens int) (string, events.UsageEvent, error) {
	var usage events.UsageEvent
	req := &llm.Request{RequestID: id, Model: model, System: system, Messages: []events.Message{events.UserText(prompt)}, MaxTokens: maxTokens}
	src, err := p.Stream(ctx, req)
	if err != nil {
		return "", usage, err
	}
	s := llm.Normalize(ctx, src, llm.NormalizeOptions{IdleTimeout: idle})
	defer s.Close()
	var (
		b      strings.Builder
		status events.StreamStatus
		failed *events.ErrorEvent
	)
	for s.Next() {
		switch e := s.Current().(type) {
		case events.BlockDelta:
			if e.Kind == events.DeltaText {
				b.WriteString(e.Content)
			}
		case events.UsageEvent:
			usage = usage.Merge(e)
		case events.StatusEvent:
			status = e.Status
		case events.ErrorEvent:
			failed = &e
		}
	}
	switch {
	case failed != nil:
		return "", usage, fmt.Errorf("%s: %s", failed.Code, failed.Message)
	case status != events.StatusCompleted:
		return "", usage, fmt.Errorf("the summarizer's stream ended %q", status)
	}
	return b.String(), usage, nil
}

// overflowed reports a model call the provider refused as too long for
// the model's window.
func (f *streamFailure) overflowed() bool {
	if f == nil {
		return false
	}
	if !f.opened {
		k, ok := llm.KindOf(f.cause)
		return ok && k == llm.KindContextOverflow
	}
	return f.code == string(llm.KindContextOverflow)
}
