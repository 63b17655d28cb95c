package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"time"
)

// ThinkingConfig asks for extended thinking / reasoning.
type ThinkingConfig struct {
	// BudgetTokens is the thinking budget; providers with effort levels map
	// it to the nearest level.
	BudgetTokens int `json:"budget_tokens"`
}

// CompletionRequest is the data of llmw.llm.complete (docs/protocol.md §3).
type CompletionRequest struct {
	RequestID   string           `json:"request_id"`
	Model       string           `json:"model"`
	System      string           `json:"system,omitempty"`
	Messages    []Message        `json:"messages"`
	Tools       []ToolDefinition `json:"tools,omitempty"`
	MaxTokens   int              `json:"max_tokens,omitempty"`
	Temperature *float64         `json:"temperature,omitempty"`
	Thinking    *ThinkingConfig  `json:"thinking,omitempty"`
	// Compaction asks the provider to compact the context itself
	// (NativeCompaction); the worker sets it when the turn's compaction
	// config asks for provider-native compaction.
	Compaction *NativeCompaction `json:"compaction,omitempty"`
	// ModelOptions are the call's structured output, tool choice,
	// sampling, provider options and caching (options.go).
	ModelOptions
	// StreamGroup, when set, asks ingest to publish the stream on
	// P.llm.stream.<stream_group>.<request_id> instead of
	// P.llm.stream.<request_id>, so that a requester with many calls open
	// reads them all through one subscription to
	// P.llm.stream.<stream_group>.* (docs/protocol.md §3). An ingest that
	// predates the field ignores it; its reply names the subject it uses.
	StreamGroup string `json:"stream_group,omitempty"`
}

// Provider returns the provider prefix of Model ("anthropic" of
// "anthropic:claude-sonnet-4-5") and the model name after it.
func (r CompletionRequest) Provider() (provider, model string) { return SplitModel(r.Model) }

// SplitModel splits "provider:model". Without a colon provider is "".
func SplitModel(s string) (provider, model string) {
	p, m, ok := strings.Cut(s, ":")
	if !ok {
		return "", s
	}
	return p, m
}

// Validate checks the required fields, the messages and the tools.
func (r CompletionRequest) Validate() error {
	if r.RequestID == "" {
		return missing("request_id")
	}
	if !ValidToken(r.RequestID) {
		return invalidf("request_id", "must be a NATS subject token (no '.', '*', '>' or spaces), got %q", r.RequestID)
	}
	if r.StreamGroup != "" && !ValidToken(r.StreamGroup) {
		return invalidf("stream_group", "must be a NATS subject token (no '.', '*', '>' or spaces), got %q", r.StreamGroup)
	}
	if r.Model == "" {
		return missing("model")
	}
	if p, m := SplitModel(r.Model); p == "" || m == "" {
		return invalidf("model", "must be provider:model (e.g. anthropic:claude-sonnet-4-5), got %q", r.Model)
	}
	if r.Messages == nil {
		return missing("messages")
	}
	if err := ValidateMessages("messages", r.Messages); err != nil {
		return err
	}
	if err := validateTools(r.Tools); err != nil {
		return err
	}
	if r.MaxTokens < 0 {
		return invalidf("max_tokens", "must not be negative")
	}
	if r.Thinking != nil && r.Thinking.BudgetTokens < 0 {
		return invalidf("thinking.budget_tokens", "must not be negative")
	}
	if r.Compaction != nil && r.Compaction.Trigger < 0 {
		return invalidf("compaction.trigger", "must not be negative, got %d", r.Compaction.Trigger)
	}
	if err := r.ModelOptions.Validate(); err != nil {
		return err
	}
	if c := r.ToolChoice; c != nil && c.Mode == ToolNamed && !slices.ContainsFunc(r.Tools, func(t ToolDefinition) bool { return t.Name == c.Name }) {
		return invalidf("tool_choice.name", "names tool %q, which is not in tools", c.Name)
	}
	return nil
}

func validateTools(tools []ToolDefinition) error {
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		if err := t.Validate(); err != nil {
			return prefixField("tools["+itoa(i)+"]", err)
		}
		if seen[t.Name] {
			return invalidf("tools["+itoa(i)+"].name", "duplicates tool %q", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// CompletionReply is the reply to a completion request, sent before the
// first stream event.
type CompletionReply struct {
	RequestID     string `json:"request_id"`
	StreamSubject string `json:"stream_subject"`
	// Warnings are the request's settings that the provider does not
	// have, which were not sent (ModelOptions).
	Warnings []Warning `json:"warnings,omitempty"`
}

// Validate checks both fields.
func (r CompletionReply) Validate() error {
	if r.RequestID == "" {
		return missing("request_id")
	}
	if r.StreamSubject == "" {
		return missing("stream_subject")
	}
	return nil
}

// TurnRequest is the data of llmw.turn.submit (docs/protocol.md §5).
type TurnRequest struct {
	TurnID    string `json:"turn_id"`
	SessionID string `json:"session_id,omitempty"`
	// Agent names a definition of the KV bucket LLMW_AGENTS, "NAME" (its
	// latest revision) or "NAME@REV", whose fields the turn takes for the
	// ones this request does not set (WithAgent). The turn service pins
	// the revision it resolved by writing "NAME@REV" here in the turn's
	// state.
	Agent string `json:"agent,omitempty"`
	// Parent is set by the turn service on the submit of a sub-agent's
	// child turn (docs/protocol.md §5, "Sub-agents"): the turn and call
	// that started it, its tree and the tree's budget.
	Parent *ParentTurn `json:"parent,omitempty"`
	// Model is provider:model; required unless Agent is set.
	Model string `json:"model,omitempty"`
	// FallbackModels are tried in order when a step's model call fails
	// with a retryable failure before its first delta (docs/protocol.md
	// §5, "Fallbacks"); nil (omitted) takes the turn service's default
	// list, an empty list (written as []) none.
	FallbackModels []string  `json:"fallback_models,omitzero"`
	System         string    `json:"system,omitempty"`
	Messages       []Message `json:"messages"`
	// Tools are tool patterns (docs/protocol.md §5): nil (omitted) takes
	// the turn service's default patterns, an empty list (written as [])
	// offers no tools.
	Tools             []string        `json:"tools,omitzero"`
	MaxSteps          int             `json:"max_steps,omitempty"`
	MaxTurnEndRetries *int            `json:"max_turn_end_retries,omitempty"`
	MaxTokens         int             `json:"max_tokens,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	Thinking          *ThinkingConfig `json:"thinking,omitempty"`
	// ModelOptions apply to every model call of the turn (options.go),
	// but for ToolChoice, below.
	ModelOptions
	// ToolChoiceEveryStep applies a ToolChoice that forces a tool to every
	// model call of the turn; unset, it applies to the first call only and
	// later calls are auto, so the model can answer after the tool ran.
	ToolChoiceEveryStep bool `json:"tool_choice_every_step,omitempty"`
	// OutputRepairs is how many times a final answer that does not fit
	// ResponseFormat is sent back to the model with the violation before
	// the turn fails with invalid_output. Unset means 1; 0 means none.
	OutputRepairs *int `json:"output_repairs,omitempty"`
	// MaxTotalTokens and MaxCost are the turn's budgets (0: none): the
	// turn fails with budget_exceeded instead of making a model call that
	// would pass one (docs/protocol.md §5 "Budgets"). MaxCost is in the
	// price table's currency and needs a price of Model.
	MaxTotalTokens int64   `json:"max_total_tokens,omitempty"`
	MaxCost        float64 `json:"max_cost,omitempty"`
	// Compaction overrides the compaction settings of the turn service
	// and the session, field by field (CompactionConfig.Merge).
	Compaction *CompactionConfig `json:"compaction,omitempty"`
	Metadata   map[string]any    `json:"metadata,omitempty"`
}

// Repairs returns OutputRepairs, or 1 when it is unset.
func (r *TurnRequest) Repairs() int {
	if r.OutputRepairs == nil {
		return 1
	}
	return *r.OutputRepairs
}

// Validate checks ids, model, messages and tool patterns.
func (r TurnRequest) Validate() error {
	if r.TurnID == "" {
		return missing("turn_id")
	}
	if !ValidToken(r.TurnID) {
		return invalidf("turn_id", "must be a NATS subject token (no '.', '*', '>' or spaces), got %q", r.TurnID)
	}
	if r.SessionID != "" && !ValidToken(r.SessionID) {
		return invalidf("session_id", "must be a NATS subject token (no '.', '*', '>' or spaces), got %q", r.SessionID)
	}
	if r.Agent != "" {
		if _, _, err := ParseAgentRef(r.Agent); err != nil {
			return err
		}
	}
	if r.Parent != nil {
		if err := r.Parent.Validate(); err != nil {
			return err
		}
	}
	if r.Model == "" && r.Agent == "" {
		return missing("model")
	}
	if p, m := SplitModel(r.Model); r.Model != "" && (p == "" || m == "") {
		return invalidf("model", "must be provider:model (e.g. openai:gpt-4.1-mini), got %q", r.Model)
	}
	if err := ValidateFallbackModels("fallback_models", r.Model, r.FallbackModels); err != nil {
		return err
	}
	if r.Messages == nil {
		return missing("messages")
	}
	if len(r.Messages) == 0 && r.SessionID == "" {
		// Nothing for the model to answer: only a session's transcript
		// can stand in for this turn's messages.
		return invalidf("messages", "is empty: a turn without a session_id needs at least one message")
	}
	if err := ValidateMessages("messages", r.Messages); err != nil {
		return err
	}
	for i, t := range r.Tools {
		if t != "*" && !ValidToolName(t) {
			return invalidf("tools["+itoa(i)+"]", "must be a tool name or \"*\", got %q", t)
		}
	}
	if r.MaxSteps < 0 {
		return invalidf("max_steps", "must not be negative")
	}
	if r.MaxTurnEndRetries != nil && *r.MaxTurnEndRetries < 0 {
		return invalidf("max_turn_end_retries", "must not be negative")
	}
	if r.MaxTokens < 0 {
		return invalidf("max_tokens", "must not be negative")
	}
	if r.Thinking != nil && r.Thinking.BudgetTokens < 0 {
		return invalidf("thinking.budget_tokens", "must not be negative")
	}
	if r.OutputRepairs != nil && *r.OutputRepairs < 0 {
		return invalidf("output_repairs", "must not be negative")
	}
	if r.MaxTotalTokens < 0 {
		return invalidf("max_total_tokens", "must not be negative, got %d", r.MaxTotalTokens)
	}
	if !(r.MaxCost >= 0) || math.IsInf(r.MaxCost, 1) {
		return invalidf("max_cost", "must be a finite number not below 0, got %v", r.MaxCost)
	}
	if r.Compaction != nil {
		if err := r.Compaction.Validate("compaction"); err != nil {
			return err
		}
	}
	return r.ModelOptions.Validate()
}

// MaxFallbackModels bounds a fallback list: each model on it may cost a
// step its retries before the next is tried.
const MaxFallbackModels = 8

// ValidateFallbackModels checks a fallback list (field names it in the
// error): at most MaxFallbackModels entries, each provider:model, none
// the primary model or an earlier entry.
func ValidateFallbackModels(field, primary string, models []string) error {
	if len(models) > MaxFallbackModels {
		return invalidf(field, "names %d models, at most %d are allowed", len(models), MaxFallbackModels)
	}
	for i, m := range models {
		f := field + "[" + itoa(i) + "]"
		if p, name := SplitModel(m); p == "" || name == "" {
			return invalidf(f, "must be provider:model (e.g. openai:gpt-4.1-mini), got %q", m)
		}
		if m == primary || slices.Contains(models[:i], m) {
			return invalidf(f, "repeats model %q", m)
		}
	}
	return nil
}

// DecisionKind is what a person decided about a paused tool call.
type DecisionKind string

const (
	DecisionApprove DecisionKind = "approve"
	DecisionDeny    DecisionKind = "deny"
	// DecisionEdit runs the call with Input instead of the model's input.
	DecisionEdit DecisionKind = "edit"
)

// Decision settles one paused tool call. On the wire it is "approve",
// "deny", or {"input": {...}} (an edited input); {"deny": "reason"} is also
// accepted and gives the model the reason.
type Decision struct {
	Kind   DecisionKind
	Input  json.RawMessage
	Reason string
}

// MarshalJSON writes the wire form.
func (d Decision) MarshalJSON() ([]byte, error) {
	switch d.Kind {
	case DecisionEdit:
		return json.Marshal(struct {
			Input json.RawMessage `json:"input"`
		}{d.Input})
	case DecisionDeny:
		if d.Reason != "" {
			return json.Marshal(struct {
				Deny string `json:"deny"`
			}{d.Reason})
		}
	}
	return json.Marshal(string(d.Kind))
}

// UnmarshalJSON reads "approve", "deny", {"input": ...} or {"deny": "why"}.
func (d *Decision) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch DecisionKind(s) {
		case DecisionApprove, DecisionDeny:
			*d = Decision{Kind: DecisionKind(s)}
			return nil
		}
		return &FieldError{Problem: `must be a decision: "approve", "deny" or {"input": {...}}, got "` + s + `"`}
	}
	var w struct {
		Input json.RawMessage `json:"input"`
		Deny  *string         `json:"deny"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return &FieldError{Problem: `must be a decision: "approve", "deny" or {"input": {...}}`}
	}
	switch {
	case w.Deny != nil:
		*d = Decision{Kind: DecisionDeny, Reason: *w.Deny}
	case len(w.Input) > 0 && string(w.Input) != "null":
		*d = Decision{Kind: DecisionEdit, Input: w.Input}
	default:
		return &FieldError{Problem: `must be a decision: an object needs "input" (or "deny")`}
	}
	return nil
}

// ResumeRequest is the data of llmw.turn.resume.
type ResumeRequest struct {
	TurnID    string              `json:"turn_id"`
	Decisions map[string]Decision `json:"decisions,omitempty"`
	Messages  []Message           `json:"messages,omitempty"`
}

// UnmarshalJSON reads the wire form like encoding/json does, but names the
// decision that does not decode ("decisions.<call_id>"), which a plain map
// of Decisions cannot do.
func (r *ResumeRequest) UnmarshalJSON(b []byte) error {
	type plain ResumeRequest // no methods: no recursion
	var w struct {
		plain
		Decisions map[string]json.RawMessage `json:"decisions,omitempty"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = ResumeRequest(w.plain)
	r.Decisions = nil
	if w.Decisions != nil {
		r.Decisions = make(map[string]Decision, len(w.Decisions))
	}
	for id, raw := range w.Decisions {
		var d Decision
		if err := json.Unmarshal(raw, &d); err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				err = &FieldError{Problem: err.Error()}
			}
			return prefixField("decisions."+id, err)
		}
		r.Decisions[id] = d
	}
	return nil
}

// Validate checks the turn id and the messages.
func (r ResumeRequest) Validate() error {
	if r.TurnID == "" {
		return missing("turn_id")
	}
	if !ValidToken(r.TurnID) {
		return invalidf("turn_id", "must be a NATS subject token, got %q", r.TurnID)
	}
	return ValidateMessages("messages", r.Messages)
}

// ToolCatalogEntry is the value of a tool in KV LLMW_TOOLS (docs/protocol.md §6).
type ToolCatalogEntry struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
	TimeoutMS   int64           `json:"timeout_ms,omitempty"`
	Version     string          `json:"version,omitempty"`
	// Eager says that a call of the tool may start while the model still
	// streams its response, as soon as the call's input is complete: the
	// tool only reads, or calling it again with the same input changes
	// nothing more (docs/protocol.md §6).
	Eager bool `json:"eager,omitempty"`
}

// Definition returns the tool definition sent to models.
func (e ToolCatalogEntry) Definition() ToolDefinition {
	return ToolDefinition{Name: e.Name, Description: e.Description, InputSchema: e.InputSchema}
}

// Validate checks name and schema.
func (e ToolCatalogEntry) Validate() error { return e.Definition().Validate() }

// ToolCallRequest is the data of llmw.tool.call (docs/protocol.md §6).
type ToolCallRequest struct {
	CallID    string          `json:"call_id"`
	TurnID    string          `json:"turn_id"`
	SessionID string          `json:"session_id,omitempty"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Deadline  time.Time       `json:"deadline,omitzero"`
	// FirstPublish says that the turn publishes the call for the first
	// time: the model asked for it in the run of the turn that publishes
	// it, not in a run this one continues, so no result of it can be
	// stored yet, and a host needs no lookup before it runs the call's
	// first delivery (docs/protocol.md §6).
	FirstPublish bool `json:"first_publish,omitempty"`
}

// Validate checks the ids and the name.
func (r ToolCallRequest) Validate() error {
	if r.CallID == "" {
		return missing("call_id")
	}
	if !ValidToken(r.CallID) {
		return invalidf("call_id", "must be a NATS subject token, got %q", r.CallID)
	}
	if r.TurnID == "" {
		return missing("turn_id")
	}
	if !ValidToken(r.TurnID) {
		return invalidf("turn_id", "must be a NATS subject token, got %q", r.TurnID)
	}
	if r.Name == "" {
		return missing("name")
	}
	if len(r.Input) > 0 && !json.Valid(r.Input) {
		return invalidf("input", "must be valid JSON")
	}
	return nil
}

// ToolCallResult is the data of llmw.tool.result, both on
// P.tool.result.<turn>.<call> (docs/protocol.md §6) and on the tool channel of the
// worker events (§5).
//
// Content is a string, or on the wire an array of text, image and file
// parts (Parts; Content then holds their text), as in a tool_result part.
type ToolCallResult struct {
	CallID     string `json:"call_id"`
	TurnID     string `json:"turn_id,omitempty"`
	Name       string `json:"name"`
	Content    string `json:"content"`
	Parts      []Part `json:"-"`
	IsError    bool   `json:"is_error"`
	DurationMS int64  `json:"duration_ms"`
}

// MarshalJSON writes content as Parts when they are set.
func (r ToolCallResult) MarshalJSON() ([]byte, error) {
	type plain ToolCallResult
	return marshalWithContent(plain(r), r.Parts)
}

// UnmarshalJSON reads content as a string or an array of parts.
func (r *ToolCallResult) UnmarshalJSON(b []byte) error {
	type plain ToolCallResult
	*r = ToolCallResult{}
	return unmarshalWithContent(b, (*plain)(r), &r.Content, &r.Parts)
}

// Validate checks call id, name and the content's parts.
func (r ToolCallResult) Validate() error {
	if r.CallID == "" {
		return missing("call_id")
	}
	if r.Name == "" {
		return missing("name")
	}
	return ValidateResultParts("content", r.Parts)
}

// ToolResult returns the transcript form of r.
func (r ToolCallResult) ToolResult() ToolResult {
	return ToolResult{ToolUseID: r.CallID, Content: r.Content, Parts: r.Parts, IsError: r.IsError}
}

func itoa(i int) string {
	if i >= 0 && i < 10 {
		return string(rune('0' + i))
	}
	var b [20]byte
	n := len(b)
	neg := i < 0
	if neg {
		i = -i
	}
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		n--
		b[n] = '-'
	}
	return string(b[n:])
}
