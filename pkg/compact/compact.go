package compact

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// Defaults of the zero fields of events.CompactionConfig.
const (
	DefaultThreshold        = 0.8
	DefaultTarget           = 0.5
	DefaultOffloadAbove     = 8192
	DefaultPreview          = 1024
	DefaultSummaryMaxTokens = 2048
	// DefaultKeepRecentShare is KeepRecent, as a share of the room, when
	// the config sets none.
	DefaultKeepRecentShare = 0.25
	// ForcedShare is the room a forced compaction (the provider said the
	// context is too long) aims below, as a share of the estimate of the
	// request that was refused: the estimate was too low for that model.
	ForcedShare = 0.75
)

// Summarizer makes the summary tier's model call: system and prompt in,
// the summary's text out, with the call's usage. It must not stream to
// the turn's observers (the summary is not the assistant's answer).
type Summarizer func(ctx context.Context, model, system, prompt string, maxTokens int) (text string, usage events.UsageEvent, err error)

// Policy decides when and how a turn's context is compacted. The zero
// value works: the defaults, llm.EstimateMessages, no summary tier.
type Policy struct {
	Config events.CompactionConfig
	// Estimate estimates tokens; nil is llm.EstimateMessages, the
	// estimate of the model table's checks (docs/protocol.md §5
	// "Model windows").
	Estimate Estimator
	// Summarize makes the summary tier's calls; nil applies the offload
	// and clear tiers only.
	Summarize Summarizer
}

// Input is what Plan decides on: the transcript from Base, the active
// compaction and the model call to be made.
type Input struct {
	// Messages are the originals from position Base on.
	Messages []events.Message
	Base     int
	// Active is the compaction in use, nil for none.
	Active *events.Compaction
	// Overhead is the estimate of what the request carries besides
	// messages: the system prompt and tool definitions.
	Overhead int64
	// Model is the model to be called (provider:model) and Limits its
	// limits (zero when unknown); MaxOutput the output tokens the call
	// asks room for (0: Limits.MaxOutputTokens).
	Model     string
	Limits    llm.ModelLimits
	MaxOutput int64
	// SummarizerLimits are the limits of the summarizer's model (zero:
	// unbounded input).
	SummarizerLimits llm.ModelLimits
	// Keep reports the calls that may not be compacted away: pending,
	// paused for approval, started early or running. nil keeps none but
	// the orphaned calls (a tool_use without its result, a result
	// without its tool_use), which are always kept.
	Keep func(callID string) bool
	// Force compacts whatever the threshold: the provider refused the
	// context as too long. Nothing left to compact is then an overflow.
	Force bool
	// Reported is what the provider counted of an earlier request on
	// Model whose projection is a prefix of this one (zero: none).
	Reported Reported
}

// Reported says that the provider counted Tokens input tokens (cached
// or not) for a request of Overhead and the first Messages messages of
// the projection Plan is given. Plan then counts the request as Tokens
// plus the estimate of the messages added since, both in the
// provider's scale: it scales every estimate it makes by Tokens / the
// estimate of that request (within [MinScale, MaxScale]), so that the
// tiers aim with the provider's count, not the estimator's.
type Reported struct {
	Messages int
	Tokens   int64
}

// The bounds of the scale Reported sets: a count far off the estimate is
// a request the caller knew wrong (hooks that rewrote it), not a
// tokenizer's difference.
const (
	MinScale = 0.25
	MaxScale = 4.0
)

// scaled is est scaled by the provider's count of the prefix in r, and
// overhead with it; est and overhead as they are without r.
func scaled(est Estimator, overhead int64, proj []events.Message, r Reported) (Estimator, int64) {
	if r.Messages <= 0 || r.Messages > len(proj) || r.Tokens <= 0 {
		return est, overhead
	}
	known := overhead + est(proj[:r.Messages])
	if known <= 0 {
		return est, overhead
	}
	k := min(max(float64(r.Tokens)/float64(known), MinScale), MaxScale)
	return func(msgs []events.Message) int64 { return int64(math.Round(k * float64(est(msgs)))) }, int64(math.Round(k * float64(overhead)))
}

// Result is a plan: the compaction to use (nil when none is needed) and
// the estimate of the request's input tokens with the projection.
type Result struct {
	Compaction *events.Compaction
	Tokens     int64
	// Room is the input room the plan aimed below (0 when the model's
	// window is unknown and the plan was not forced).
	Room int64
}

// Project returns what the model reads: c.Messages ++ originals[c.To:],
// where msgs are the originals from position base on. A provider-native
// compaction (c.Native()) is used only for a model of that origin
// (llm.Origin of origin); another reads the projection of c.Fallback
// instead (the originals when nil: the re-expansion of a fallback). A
// provider-native compaction block (llm.NativeCompactionData) is read
// only as the start of the active provider-native compaction, by a
// model of its origin: anywhere else it is left out (the provider would
// drop what comes before it), and a message it leaves empty with it.
func Project(c *events.Compaction, msgs []events.Message, base int, origin string) []events.Message {
	o := llm.Origin(origin)
	native := c.Native() != "" && llm.Origin(c.Native()) == o
	if c.Native() != "" && !native {
		c = c.Fallback
	}
	if c != nil && c.To >= base && c.To-base <= len(msgs) {
		out := make([]events.Message, 0, len(c.Messages)+len(msgs)-(c.To-base))
		msgs = append(append(out, c.Messages...), msgs[c.To-base:]...)
	}
	if native {
		return withoutNative(msgs, func(p *events.Part) bool { return llm.Origin(p.Origin) != o })
	}
	return withoutNative(msgs, func(*events.Part) bool { return true })
}

// withoutNative is msgs without the provider-native compaction blocks
// drop reports, and without the messages that leaves empty; msgs itself
// when there is none.
func withoutNative(msgs []events.Message, drop func(*events.Part) bool) []events.Message {
	native := func(p *events.Part) bool {
		_, ok := llm.NativeCompactionData(p)
		return ok && drop(p)
	}
	first := -1
	for i := range msgs {
		for j := range msgs[i].Content {
			if native(&msgs[i].Content[j]) {
				first = i
				break
			}
		}
		if first >= 0 {
			break
		}
	}
	if first < 0 {
		return msgs
	}
	out := make([]events.Message, first, len(msgs))
	copy(out, msgs[:first])
	for _, m := range msgs[first:] {
		if !slices.ContainsFunc(m.Content, func(p events.Part) bool { return native(&p) }) {
			out = append(out, m)
			continue
		}
		content := make([]events.Part, 0, len(m.Content))
		for j := range m.Content {
			if !native(&m.Content[j]) {
				content = append(content, m.Content[j])
			}
		}
		if len(content) > 0 {
			m.Content = content
			out = append(out, m)
		}
	}
	return out
}

func (p *Policy) estimator() Estimator {
	if p.Estimate != nil {
		return p.Estimate
	}
	return llm.EstimateMessages
}

// room is the input room of the call: window − max output − reserve.
func (p *Policy) room(in *Input) int64 {
	if in.Limits.ContextWindow <= 0 {
		return 0
	}
	out := in.MaxOutput
	if out <= 0 {
		out = in.Limits.MaxOutputTokens
	}
	reserve := p.Config.Reserve
	if reserve == 0 {
		reserve = llm.DefaultReserve(in.Limits)
	}
	return max(in.Limits.ContextWindow-out-reserve, 1)
}

// Trigger is the input tokens above which a model call with limits and
// maxOutput (0: limits.MaxOutputTokens) compacts: Threshold × room, the
// trigger of a provider-native compaction (events.NativeCompaction); 0
// when the model's window is unknown.
func (p *Policy) Trigger(limits llm.ModelLimits, maxOutput int64) int64 {
	room := p.room(&Input{Limits: limits, MaxOutput: maxOutput})
	return int64(or(p.Config.Threshold, DefaultThreshold) * float64(room))
}

func or[T int | int64 | float64](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Plan decides whether the model call of in needs a compaction and makes
// it, cheapest tier first (doc.go). The compaction's ID, Turn and Step
// are the caller's to set. Errors: ErrOverflow (an *OverflowError naming
// the message) when nothing makes the context fit, ErrSummarizer when
// the summary's model call failed.
func (p *Policy) Plan(ctx context.Context, in Input) (Result, error) {
	est := p.estimator()
	origin, _ := events.SplitModel(in.Model)
	proj := Project(in.Active, in.Messages, in.Base, origin)
	if n := in.Active.Native(); n != "" && llm.Origin(n) != llm.Origin(origin) {
		// The reported count is of a request that read the provider's
		// compaction; this one reads its fallback's projection.
		in.Reported = Reported{}
	}
	est, in.Overhead = scaled(est, in.Overhead, proj, in.Reported)
	before := in.Overhead + est(proj)
	room := p.room(&in)
	if in.Force {
		room = min(or(room, before), int64(float64(before)*ForcedShare))
	}
	res := Result{Tokens: before, Room: room}
	if p.Config.Off() || room == 0 {
		return res, nil
	}
	if !in.Force && float64(before) <= or(p.Config.Threshold, DefaultThreshold)*float64(room) {
		return res, nil
	}

	// The tiers compact what every model reads: the originals and their
	// own compactions, never a provider's (Compaction.Fallback).
	active := in.Active
	if active.Native() != "" {
		active = active.Fallback
	}
	if active != nil && (active.To < in.Base || active.To-in.Base > len(in.Messages)) {
		active = nil
	}
	var head []events.Message
	from := in.Base
	if active != nil {
		head, from = active.Messages, active.To
	}
	v := newView(head, in.Messages[from-in.Base:], from, in.Keep, est)
	target := int64(or(p.Config.Target, DefaultTarget) * float64(room))
	keepRecent := p.Config.KeepRecent
	if keepRecent == 0 {
		keepRecent = int64(DefaultKeepRecentShare * float64(room))
	}
	if err := v.tooLarge(in.Overhead, room, in.Limits); err != nil {
		return res, err
	}
	cuts := v.cuts(keepRecent)
	if len(cuts) == 0 {
		if in.Force || before > room {
			return res, v.overflow(in.Overhead, room, in.Limits, "nothing is left to compact")
		}
		return res, nil
	}
	var (
		c     *events.Compaction
		after int64
	)
	for _, cut := range cuts {
		var err error
		c, after, err = p.tiers(ctx, v, cut, in, target)
		if err != nil {
			return res, err
		}
		if after+in.Overhead <= room {
			break
		}
	}
	after += in.Overhead
	if after > room {
		return res, v.overflowAfter(c, in.Overhead, room, in.Limits)
	}
	if after >= before {
		if in.Force {
			return res, v.overflow(in.Overhead, room, in.Limits, "compaction frees nothing more")
		}
		return res, nil
	}
	c.TokensBefore, c.TokensAfter = before, after
	res.Compaction, res.Tokens = c, after
	return res, nil
}

// tiers compacts the view's span [0, cut) cheapest tier first, until
// the projection's messages are at most target tokens; it returns the
// compaction and the estimate of its projection's messages.
func (p *Policy) tiers(ctx context.Context, v *view, cut int, in Input, target int64) (*events.Compaction, int64, error) {
	tail := v.msgs[cut:]
	tailTokens := v.est(tail)
	to := v.position(cut)
	offloadAbove := or(p.Config.OffloadAbove, DefaultOffloadAbove)
	preview := min(or(p.Config.Preview, DefaultPreview), offloadAbove/2)

	var applied []string
	span := v.offload(cut, offloadAbove, preview)
	applied = append(applied, "offload")
	c := &events.Compaction{To: to, Messages: span}
	if after := v.est(span) + tailTokens; after+in.Overhead <= target {
		c.Policy = strings.Join(applied, ",")
		return c, after, nil
	}
	cleared := v.clear(span, cut)
	applied = append(applied, "clear")
	c.Messages = cleared
	after := v.est(cleared) + tailTokens
	if after+in.Overhead <= target || p.Summarize == nil || p.Config.NoSummary != nil && *p.Config.NoSummary {
		c.Policy = strings.Join(applied, ",")
		return c, after, nil
	}
	model := p.Config.SummarizerModel
	if model == "" {
		model = in.Model
	}
	summary, usage, err := p.summarize(ctx, v, span, cut, to, model, in.SummarizerLimits)
	if err != nil {
		return nil, 0, err
	}
	if summary == nil { // nothing but kept units in the span
		c.Policy = strings.Join(applied, ",")
		return c, after, nil
	}
	applied = append(applied, "summary")
	msgs := append([]events.Message{*summary}, v.keptOf(cut)...)
	c = &events.Compaction{To: to, Messages: msgs, Policy: strings.Join(applied, ","), Model: model, Usage: &usage}
	return c, v.est(msgs) + tailTokens, nil
}

// roomText describes the room for errors.
func roomText(room int64, l llm.ModelLimits) string {
	if l.ContextWindow <= 0 {
		return fmt.Sprintf("the room of %d tokens left by the refused request", room)
	}
	return fmt.Sprintf("the model's room of %d tokens (context window %d − max output − reserve)", room, l.ContextWindow)
}
