package events

import (
	"bytes"
	"encoding/json"
	"math"
	"net/url"
	"strconv"
	"strings"
)

// Values of AgentDefinition.OnParentCancel.
const (
	// OnParentCancelCancel: the agent's child turn is aborted with its
	// parent (the default).
	OnParentCancelCancel = "cancel"
	// OnParentCancelAbandon: the agent's child turn runs to its end when
	// its parent is cancelled.
	OnParentCancelAbandon = "abandon"
)

// AgentDefinition is a named agent, the value of its key in the KV bucket
// LLMW_AGENTS (docs/protocol.md §5, "Agents"): what a turn request naming
// it ("agent": "NAME" or "NAME@REV") takes for every field it does not set
// itself (TurnRequest.WithAgent). The key's KV revision is the version of
// the definition.
type AgentDefinition struct {
	// Name is the agent's name and KV key: 1 to 64 letters, digits, '_'
	// or '-'.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Model is provider:model; required unless A2AURL names a remote agent.
	Model          string   `json:"model,omitempty"`
	FallbackModels []string `json:"fallback_models,omitzero"`
	System         string   `json:"system,omitempty"`
	// Tools are tool patterns as in a turn request; a pattern no tool
	// matches yet is allowed (the catalog changes as executors come and
	// go), and a turn of the agent fails with unknown_tool as a request
	// naming it would.
	Tools []string `json:"tools,omitzero"`
	// Agents names the agents this one may call as sub-agents, checked
	// when put (each must exist; a cycle through this agent other than a
	// call of itself is reported). A turn of the agent offers each as a
	// tool whose call runs a child turn (docs/protocol.md §5,
	// "Sub-agents"), pinned to the revision it had when the turn started.
	Agents         []string          `json:"agents,omitempty"`
	MaxSteps       int               `json:"max_steps,omitempty"`
	MaxTokens      int               `json:"max_tokens,omitempty"`
	Temperature    *float64          `json:"temperature,omitempty"`
	Thinking       *ThinkingConfig   `json:"thinking,omitempty"`
	OutputRepairs  *int              `json:"output_repairs,omitempty"`
	MaxTotalTokens int64             `json:"max_total_tokens,omitempty"`
	MaxCost        float64           `json:"max_cost,omitempty"`
	Compaction     *CompactionConfig `json:"compaction,omitempty"`
	ModelOptions
	// OnParentCancel is what happens to a turn of this agent run as a
	// sub-agent when its parent is cancelled: "cancel" (the default)
	// aborts it with its parent, "abandon" lets it run to its end.
	OnParentCancel string `json:"on_parent_cancel,omitempty" jsonschema:"enum=cancel,enum=abandon"`
	// InputSchema is a JSON Schema object for the input of a call of
	// this agent as a sub-agent: the tool's input schema instead of
	// {"prompt": string}, the call's input as JSON the child's first
	// message.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// A2AURL is the http(s) URL of a remote agent reached by the A2A
	// protocol (its base URL, or its card's URL ending in .json): a turn
	// of the agent whose request names no model runs the remote agent's
	// task (docs/protocol.md §12, "Remote agents").
	A2AURL string `json:"a2a_url,omitempty"`
}

// ValidAgentName reports whether name can name an agent: 1 to 64 letters,
// digits, '_' or '-' (a subject token and KV key, and a tool name).
func ValidAgentName(name string) bool { return ValidToolName(name) }

// Validate checks the definition, naming the field that is wrong. It
// cannot know the other agents: AgentDefinition.Agents are checked by the
// registry (pkg/agents).
func (d AgentDefinition) Validate() error {
	if d.Name == "" {
		return missing("name")
	}
	if !ValidAgentName(d.Name) {
		return invalidf("name", "must be 1 to 64 letters, digits, '_' or '-', got %q", d.Name)
	}
	if d.Model == "" && d.A2AURL == "" {
		return invalidf("model", "is required (provider:model) unless a2a_url names a remote agent")
	}
	if d.Model != "" {
		if p, m := SplitModel(d.Model); p == "" || m == "" {
			return invalidf("model", "must be provider:model (e.g. openai:gpt-4.1-mini), got %q", d.Model)
		}
	}
	if err := ValidateFallbackModels("fallback_models", d.Model, d.FallbackModels); err != nil {
		return err
	}
	for i, t := range d.Tools {
		if t != "*" && !ValidToolName(t) {
			return invalidf("tools["+itoa(i)+"]", "must be a tool name or \"*\", got %q", t)
		}
	}
	for i, a := range d.Agents {
		f := "agents[" + itoa(i) + "]"
		if !ValidAgentName(a) {
			return invalidf(f, "must be an agent name (1 to 64 letters, digits, '_' or '-'), got %q", a)
		}
		for _, b := range d.Agents[:i] {
			if a == b {
				return invalidf(f, "repeats agent %q", a)
			}
		}
	}
	switch {
	case d.MaxSteps < 0:
		return invalidf("max_steps", "must not be negative")
	case d.MaxTokens < 0:
		return invalidf("max_tokens", "must not be negative")
	case d.Thinking != nil && d.Thinking.BudgetTokens < 0:
		return invalidf("thinking.budget_tokens", "must not be negative")
	case d.OutputRepairs != nil && *d.OutputRepairs < 0:
		return invalidf("output_repairs", "must not be negative")
	case d.MaxTotalTokens < 0:
		return invalidf("max_total_tokens", "must not be negative, got %d", d.MaxTotalTokens)
	case !(d.MaxCost >= 0) || math.IsInf(d.MaxCost, 1):
		return invalidf("max_cost", "must be a finite number not below 0, got %v", d.MaxCost)
	}
	if d.Compaction != nil {
		if err := d.Compaction.Validate("compaction"); err != nil {
			return err
		}
	}
	switch d.OnParentCancel {
	case "", OnParentCancelCancel, OnParentCancelAbandon:
	default:
		return invalidf("on_parent_cancel", "must be %q or %q, got %q", OnParentCancelCancel, OnParentCancelAbandon, d.OnParentCancel)
	}
	if len(d.InputSchema) > 0 {
		var schema map[string]any
		if err := json.Unmarshal(d.InputSchema, &schema); err != nil || schema == nil {
			return invalidf("input_schema", "must be a JSON Schema object")
		}
		if t, ok := schema["type"]; ok && t != "object" {
			return invalidf("input_schema", "must describe an object (\"type\": \"object\"), got type %v", t)
		}
	}
	if d.A2AURL != "" {
		u, err := url.Parse(d.A2AURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return invalidf("a2a_url", "must be an absolute http or https URL, got %q", d.A2AURL)
		}
	}
	return d.ModelOptions.Validate()
}

// DecodeAgentDefinition reads a definition from JSON, refusing fields it
// does not know (a misspelt "sytem" would otherwise be dropped without a
// word), and validates it.
func DecodeAgentDefinition(data []byte) (AgentDefinition, error) {
	var d AgentDefinition
	data, err := checkBody(data)
	if err != nil {
		return d, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return d, &FieldError{Field: strings.Trim(f, `"`), Problem: "is not a field of an agent definition"}
		}
		return d, jsonError(err)
	}
	if dec.More() {
		return d, &FieldError{Problem: "more than one JSON value"}
	}
	return d, d.Validate()
}

// ParseAgentRef splits a turn request's agent reference, "NAME" or
// "NAME@REV": rev is 0 for NAME (the latest revision).
func ParseAgentRef(ref string) (name string, rev uint64, err error) {
	name, r, pinned := strings.Cut(ref, "@")
	if !ValidAgentName(name) {
		return "", 0, invalidf("agent", "must be NAME or NAME@REV with an agent name of 1 to 64 letters, digits, '_' or '-', got %q", ref)
	}
	if pinned {
		rev, perr := strconv.ParseUint(r, 10, 64)
		if perr != nil || rev == 0 {
			return "", 0, invalidf("agent", "revision after '@' must be a positive integer, got %q", ref)
		}
		return name, rev, nil
	}
	return name, 0, nil
}

// AgentRef is the reference "NAME@REV" of one revision of an agent.
func AgentRef(name string, rev uint64) string {
	return name + "@" + strconv.FormatUint(rev, 10)
}

// WithAgent returns the request a turn of agent d at revision rev runs:
// every field the request sets is kept, every other one the definition
// sets is taken from it (model options and compaction field by field),
// and Agent pins the revision ("NAME@REV"), so that a turn continued
// from its state uses the same definition whatever the registry holds
// then.
func (r TurnRequest) WithAgent(d *AgentDefinition, rev uint64) TurnRequest {
	r.Agent = AgentRef(d.Name, rev)
	if r.Model == "" {
		r.Model = d.Model
		if r.FallbackModels == nil && d.FallbackModels != nil {
			r.FallbackModels = append([]string{}, d.FallbackModels...)
		}
	}
	if r.System == "" {
		r.System = d.System
	}
	if r.Tools == nil && d.Tools != nil {
		r.Tools = append([]string{}, d.Tools...)
	}
	if r.MaxSteps == 0 {
		r.MaxSteps = d.MaxSteps
	}
	if r.MaxTokens == 0 {
		r.MaxTokens = d.MaxTokens
	}
	if r.Temperature == nil {
		r.Temperature = d.Temperature
	}
	if r.Thinking == nil {
		r.Thinking = d.Thinking
	}
	if r.OutputRepairs == nil {
		r.OutputRepairs = d.OutputRepairs
	}
	if r.MaxTotalTokens == 0 {
		r.MaxTotalTokens = d.MaxTotalTokens
	}
	if r.MaxCost == 0 {
		r.MaxCost = d.MaxCost
	}
	if d.Compaction != nil {
		c := d.Compaction.Merge(r.Compaction)
		r.Compaction = &c
	}
	r.ModelOptions = d.ModelOptions.Merge(&r.ModelOptions)
	return r
}
