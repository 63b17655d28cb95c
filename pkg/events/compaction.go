package events

import "strings"

// Compaction replaces the transcript's positions [0, To) in what the
// model reads; the originals stay in the transcript. The model reads the
// projection Messages ++ originals[To:] (pkg/compact, docs/protocol.md
// "Compaction").
type Compaction struct {
	// ID is "<turn_id>.c<n>": the n-th compaction of the turn that made
	// it, so a turn continued from a checkpoint names it the same way.
	ID string `json:"id"`
	// To is the first transcript position the model reads as it is.
	To int `json:"to"`
	// Messages are what the model reads instead of positions [0, To): a
	// summary, and the offloaded or cleared versions of those messages;
	// a pinned message and the calls that may not be compacted (pending,
	// paused, started, orphaned) as they are.
	Messages []Message `json:"messages"`
	// Policy names the tiers applied, comma-joined ("offload",
	// "offload,clear", "offload,clear,summary"), or "native:<provider>"
	// for a provider's own compaction (NativeCompaction): its Messages
	// are empty and the originals from To on begin with the assistant
	// message whose first part is the provider's compaction block.
	Policy string `json:"policy"`
	// Model is the summarizer's model (provider:model), for a summary.
	Model string `json:"model,omitempty"`
	// TokensBefore and TokensAfter are the estimated input tokens of the
	// model call before and after the compaction.
	TokensBefore int64 `json:"tokens_before"`
	TokensAfter  int64 `json:"tokens_after"`
	// Usage is the summarizer's usage (counted in the turn's usage).
	Usage *UsageEvent `json:"usage,omitempty"`
	Turn  string      `json:"turn_id"`
	// Step is the model call the compaction was made for.
	Step int `json:"step"`
	// Fallback is, on a provider-native compaction, what a model of
	// another origin reads instead: the compaction of pkg/compact's
	// tiers that was active when the provider compacted (nil: the
	// originals). It is never itself native.
	Fallback *Compaction `json:"fallback,omitempty"`
}

// Native reports the provider prefix of a provider-native compaction
// (Policy "native:<provider>"), "" for one of pkg/compact's tiers.
func (c *Compaction) Native() string {
	if c == nil {
		return ""
	}
	p, _ := strings.CutPrefix(c.Policy, "native:")
	if p == c.Policy {
		return ""
	}
	return p
}

// TurnCompacted is the data of llmw.turn.compacted: the turn replaced the
// transcript's positions [0, To) in what the model reads (a UI shows a
// divider, "earlier messages summarized"). It is the Compaction without
// its messages.
type TurnCompacted struct {
	ID           string      `json:"id"`
	To           int         `json:"to"`
	Policy       string      `json:"policy"`
	Model        string      `json:"model,omitempty"`
	TokensBefore int64       `json:"tokens_before"`
	TokensAfter  int64       `json:"tokens_after"`
	Usage        *UsageEvent `json:"usage,omitempty"`
	Step         int         `json:"step"`
}

// CompactionConfig configures the compaction of a turn's context
// (pkg/compact). It is set per service (the worker's default), per
// session and per turn request; a field set later overrides (Merge). A
// zero field takes the default pkg/compact documents.
type CompactionConfig struct {
	// Disabled turns compaction off (true), or on again over a default
	// that turned it off (false); unset keeps the default.
	Disabled *bool `json:"disabled,omitempty"`
	// Threshold is the fraction of the model's room (context window −
	// max output − Reserve) at which the turn compacts before a model
	// call; Target the fraction a compaction brings the context down to.
	// 0 < Target < Threshold ≤ 1.
	Threshold float64 `json:"threshold,omitempty"`
	Target    float64 `json:"target,omitempty"`
	// Reserve is room in tokens kept free of the estimate's errors.
	Reserve int64 `json:"reserve,omitempty"`
	// KeepRecent is how many tokens of the newest messages a compaction
	// leaves as they are (at least the last message and its results).
	KeepRecent int64 `json:"keep_recent,omitempty"`
	// OffloadAbove is the size in bytes above which a tool result is
	// offloaded (a preview of Preview bytes stays in context).
	OffloadAbove int `json:"offload_above,omitempty"`
	Preview      int `json:"preview,omitempty"`
	// SummarizerModel is the model (provider:model) that summarizes; ""
	// is the turn's model in use.
	SummarizerModel string `json:"summarizer_model,omitempty"`
	// SummaryMaxTokens bounds the summary's output tokens.
	SummaryMaxTokens int `json:"summary_max_tokens,omitempty"`
	// NoSummary applies the offload and clear tiers only.
	NoSummary *bool `json:"no_summary,omitempty"`
	// Native lets a model whose provider compacts on its own
	// (llm.CompactsNatively: Anthropic's compaction, OpenAI Responses'
	// compaction) compact its context itself, at Threshold × room,
	// instead of the tiers (which still apply after a context_overflow
	// refusal); the provider's compaction block stays in the transcript
	// and is read only by models of that provider's origin. A model of
	// another provider (a fallback) reads the originals and is compacted
	// by the tiers. Off unless set.
	Native *bool `json:"native,omitempty"`
}

// NativeOn reports whether provider-native compaction is asked for.
func (c CompactionConfig) NativeOn() bool { return c.Native != nil && *c.Native }

// NativeCompaction asks the provider of a completion request to compact
// the context itself (Anthropic's context_management compaction, OpenAI
// Responses' context_management compaction) once the request's input
// passes Trigger tokens. The compaction comes back as the first part of
// the answer: a thinking part whose signature is the provider's opaque
// block (llm.NativeCompactionData), which the next request to a provider
// of the same origin sends back. A provider without it ignores the field.
type NativeCompaction struct {
	// Trigger is the input tokens at which the provider compacts; 0 is
	// the provider's default.
	Trigger int64 `json:"trigger,omitempty"`
}

// Merge returns c with every field that over sets replaced by over's.
func (c CompactionConfig) Merge(over *CompactionConfig) CompactionConfig {
	if over == nil {
		return c
	}
	setCopy(&c.Disabled, over.Disabled)
	setIf(&c.Threshold, over.Threshold)
	setIf(&c.Target, over.Target)
	setIf(&c.Reserve, over.Reserve)
	setIf(&c.KeepRecent, over.KeepRecent)
	setIf(&c.OffloadAbove, over.OffloadAbove)
	setIf(&c.Preview, over.Preview)
	setIf(&c.SummarizerModel, over.SummarizerModel)
	setIf(&c.SummaryMaxTokens, over.SummaryMaxTokens)
	setCopy(&c.NoSummary, over.NoSummary)
	setCopy(&c.Native, over.Native)
	return c
}

// Off reports whether compaction is disabled.
func (c CompactionConfig) Off() bool { return c.Disabled != nil && *c.Disabled }

// Validate checks the ranges; field names the config in errors
// ("compaction").
func (c CompactionConfig) Validate(field string) error {
	switch {
	case c.Threshold < 0 || c.Threshold > 1:
		return invalidf(field+".threshold", "must be in (0, 1], got %v", c.Threshold)
	case c.Target < 0 || c.Target >= 1:
		return invalidf(field+".target", "must be in (0, 1), got %v", c.Target)
	case c.Threshold != 0 && c.Target != 0 && c.Target >= c.Threshold:
		return invalidf(field+".target", "must be below threshold (%v), got %v", c.Threshold, c.Target)
	case c.Reserve < 0:
		return invalidf(field+".reserve", "must not be negative, got %d", c.Reserve)
	case c.KeepRecent < 0:
		return invalidf(field+".keep_recent", "must not be negative, got %d", c.KeepRecent)
	case c.OffloadAbove < 0:
		return invalidf(field+".offload_above", "must not be negative, got %d", c.OffloadAbove)
	case c.Preview < 0:
		return invalidf(field+".preview", "must not be negative, got %d", c.Preview)
	case c.OffloadAbove != 0 && c.Preview >= c.OffloadAbove:
		return invalidf(field+".preview", "must be below offload_above (%d), got %d", c.OffloadAbove, c.Preview)
	case c.SummaryMaxTokens < 0:
		return invalidf(field+".summary_max_tokens", "must not be negative, got %d", c.SummaryMaxTokens)
	}
	if c.SummarizerModel != "" {
		if p, m := SplitModel(c.SummarizerModel); p == "" || m == "" {
			return invalidf(field+".summarizer_model", "must be provider:model (e.g. openai:gpt-4.1-mini), got %q", c.SummarizerModel)
		}
	}
	return nil
}
