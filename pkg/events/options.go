package events

import (
	"bytes"
	"encoding/json"
	"maps"
	"strconv"
)

// ModelOptions are the settings of a model call beyond its messages, tools
// and bounds (docs/protocol.md §3 and §5). A completion request carries
// them for its one call; a turn request for every model call of the turn,
// and its state keeps them, so a resumed or recovered turn keeps them.
//
// A setting the provider does not have is not sent and is reported as a
// Warning: in ingest's completion reply, by the stream (llm.Warner), and as
// llmw.turn.warning in a turn's events. A content part the provider cannot take is refused
// before the call (unsupported_content).
type ModelOptions struct {
	// ResponseFormat asks for JSON output, optionally fitting a schema.
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// ToolChoice constrains which tool the model calls (nil: auto).
	ToolChoice *ToolChoice `json:"tool_choice,omitempty"`
	// ParallelToolCalls false asks for at most one tool call per step.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
	// Stop ends the answer at the first of these sequences.
	Stop             []string `json:"stop,omitempty"`
	TopP             *float64 `json:"top_p,omitempty"`
	TopK             *int     `json:"top_k,omitempty"`
	Seed             *int64   `json:"seed,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	// ReasoningEffort maps to OpenAI's reasoning effort, Anthropic's
	// thinking budget or effort, Gemini's thinking level or budget.
	ReasoningEffort ReasoningEffort `json:"reasoning_effort,omitempty" jsonschema:"enum=low,enum=medium,enum=high"`
	// ProviderOptions are merged into the request body of the provider
	// named by the key ("openai", "openai-responses", "anthropic",
	// "gemini", …: the model's provider prefix), for what the contract
	// does not name. Each value is a JSON object.
	ProviderOptions map[string]json.RawMessage `json:"provider_options,omitempty"`
	// Cache false turns prompt caching off (Anthropic cache_control
	// breakpoints, OpenAI prompt_cache_key). Unset means on.
	Cache *bool `json:"cache,omitempty"`
	// CacheKey is OpenAI's prompt_cache_key; a turn sets it to its
	// session id, else its turn id, when the request names none.
	CacheKey string `json:"cache_key,omitempty"`
}

// CacheEnabled reports whether prompt caching is on (the default).
func (o *ModelOptions) CacheEnabled() bool { return o.Cache == nil || *o.Cache }

// IsZero reports whether no option is set.
func (o *ModelOptions) IsZero() bool {
	return o.ResponseFormat == nil && o.ToolChoice == nil && o.ParallelToolCalls == nil && o.Stop == nil &&
		o.TopP == nil && o.TopK == nil && o.Seed == nil && o.PresencePenalty == nil && o.FrequencyPenalty == nil &&
		o.ReasoningEffort == "" && o.ProviderOptions == nil && o.Cache == nil && o.CacheKey == ""
}

// Merge returns o with every option that over sets replaced by over's
// (ProviderOptions key by key).
func (o ModelOptions) Merge(over *ModelOptions) ModelOptions {
	if over == nil {
		return o
	}
	setIf(&o.ResponseFormat, over.ResponseFormat)
	setIf(&o.ToolChoice, over.ToolChoice)
	setIf(&o.ParallelToolCalls, over.ParallelToolCalls)
	if over.Stop != nil {
		o.Stop = over.Stop
	}
	setIf(&o.TopP, over.TopP)
	setIf(&o.TopK, over.TopK)
	setIf(&o.Seed, over.Seed)
	setIf(&o.PresencePenalty, over.PresencePenalty)
	setIf(&o.FrequencyPenalty, over.FrequencyPenalty)
	setIf(&o.ReasoningEffort, over.ReasoningEffort)
	if over.ProviderOptions != nil {
		m := make(map[string]json.RawMessage, len(o.ProviderOptions)+len(over.ProviderOptions))
		maps.Copy(m, o.ProviderOptions)
		maps.Copy(m, over.ProviderOptions)
		o.ProviderOptions = m
	}
	setIf(&o.Cache, over.Cache)
	setIf(&o.CacheKey, over.CacheKey)
	return o
}

// setIf sets *dst to v where v is set (not its type's zero value): one
// field of a Merge.
func setIf[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}

// setCopy sets *dst to a copy of *v where v is set, so that a Merge's
// result shares no pointer with what it took the value from.
func setCopy[T any](dst **T, v *T) {
	if v != nil {
		c := *v
		*dst = &c
	}
}

// Validate checks every option, naming the field.
func (o *ModelOptions) Validate() error {
	if o.ResponseFormat != nil {
		if err := o.ResponseFormat.Validate(); err != nil {
			return prefixField("response_format", err)
		}
	}
	if o.ToolChoice != nil {
		if err := o.ToolChoice.Validate(); err != nil {
			return prefixField("tool_choice", err)
		}
	}
	if len(o.Stop) > 16 {
		return invalidf("stop", "must have at most 16 sequences, got %d", len(o.Stop))
	}
	for i, s := range o.Stop {
		if s == "" {
			return invalidf("stop["+strconv.Itoa(i)+"]", "must not be empty")
		}
	}
	if o.TopP != nil && (*o.TopP < 0 || *o.TopP > 1) {
		return invalidf("top_p", "must be between 0 and 1, got %v", *o.TopP)
	}
	if o.TopK != nil && *o.TopK < 1 {
		return invalidf("top_k", "must be at least 1, got %d", *o.TopK)
	}
	for name, v := range map[string]*float64{"presence_penalty": o.PresencePenalty, "frequency_penalty": o.FrequencyPenalty} {
		if v != nil && (*v < -2 || *v > 2) {
			return invalidf(name, "must be between -2 and 2, got %v", *v)
		}
	}
	switch o.ReasoningEffort {
	case "", EffortLow, EffortMedium, EffortHigh:
	default:
		return invalidf("reasoning_effort", "must be low, medium or high, got %q", o.ReasoningEffort)
	}
	for k, v := range o.ProviderOptions {
		if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' || !json.Valid(t) {
			return invalidf("provider_options."+k, "must be a JSON object")
		}
	}
	return nil
}

// ReasoningEffort is how much a reasoning model thinks.
type ReasoningEffort string

const (
	EffortLow    ReasoningEffort = "low"
	EffortMedium ReasoningEffort = "medium"
	EffortHigh   ReasoningEffort = "high"
)

// ResponseFormatType is the kind of output a ResponseFormat asks for.
type ResponseFormatType string

const (
	// FormatJSONSchema asks for JSON that fits Schema.
	FormatJSONSchema ResponseFormatType = "json_schema"
	// FormatJSON asks for any JSON object.
	FormatJSON ResponseFormatType = "json"
)

// ResponseFormat asks for structured output (docs/protocol.md §3). A turn
// validates its final answer against Schema and repairs it once by
// default (TurnRequest.OutputRepairs) before it fails with invalid_output.
type ResponseFormat struct {
	Type ResponseFormatType `json:"type" jsonschema:"enum=json_schema,enum=json"`
	// Name names the schema to the provider (json_schema; "output" when
	// empty): ^[a-zA-Z0-9_-]{1,64}$.
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	// Schema is a JSON Schema object (json_schema).
	Schema json.RawMessage `json:"schema,omitempty"`
	// Strict asks the provider to enforce the schema exactly where it can
	// (OpenAI strict mode). Unset means true.
	Strict *bool `json:"strict,omitempty"`
}

// SchemaName returns Name, or "output" when it is empty.
func (f *ResponseFormat) SchemaName() string {
	if f.Name == "" {
		return "output"
	}
	return f.Name
}

// IsStrict reports whether Strict is unset or true.
func (f *ResponseFormat) IsStrict() bool { return f.Strict == nil || *f.Strict }

// Validate checks the type, the name and that the schema is an object.
func (f *ResponseFormat) Validate() error {
	switch f.Type {
	case "":
		return missing("type")
	case FormatJSON:
		if len(f.Schema) > 0 {
			return invalidf("schema", "goes with type json_schema, not json")
		}
	case FormatJSONSchema:
		s := bytes.TrimSpace(f.Schema)
		if len(s) == 0 {
			return missing("schema")
		}
		if s[0] != '{' || !json.Valid(s) {
			return invalidf("schema", "must be a JSON Schema object")
		}
	default:
		return invalidf("type", "must be json_schema or json, got %q", f.Type)
	}
	if f.Name != "" && !ValidToolName(f.Name) {
		return invalidf("name", "must match ^[a-zA-Z0-9_-]{1,64}$, got %q", f.Name)
	}
	return nil
}

// ToolChoiceMode is how a model may use its tools.
type ToolChoiceMode string

const (
	// ToolAuto lets the model decide (the default).
	ToolAuto ToolChoiceMode = "auto"
	// ToolNone forbids tool calls.
	ToolNone ToolChoiceMode = "none"
	// ToolRequired makes the model call at least one tool.
	ToolRequired ToolChoiceMode = "required"
	// ToolNamed makes the model call the tool Name.
	ToolNamed ToolChoiceMode = "tool"
)

// ToolChoice is "auto", "none", "required" or {"type":"tool","name":…} on
// the wire. In a turn, a choice that forces a tool (required, or a named
// tool: Forces) applies to the first model call only unless
// TurnRequest.ToolChoiceEveryStep is set: a tool forced on every call
// never lets the model answer. "none" applies to every call.
type ToolChoice struct {
	Mode ToolChoiceMode
	// Name is the tool of ToolNamed.
	Name string
}

// ForceTool returns the choice that makes the model call name.
func ForceTool(name string) *ToolChoice { return &ToolChoice{Mode: ToolNamed, Name: name} }

// MarshalJSON writes the wire form.
func (c ToolChoice) MarshalJSON() ([]byte, error) {
	if c.Mode == ToolNamed {
		return json.Marshal(struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}{"tool", c.Name})
	}
	return json.Marshal(string(c.Mode))
}

// UnmarshalJSON reads the string or the object form.
func (c *ToolChoice) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = ToolChoice{Mode: ToolChoiceMode(s)}
		return nil
	}
	var w struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return &FieldError{Problem: `must be "auto", "none", "required" or {"type":"tool","name":…}`}
	}
	*c = ToolChoice{Mode: ToolChoiceMode(w.Type), Name: w.Name}
	if c.Mode != ToolNamed {
		return &FieldError{Field: "type", Problem: `must be "tool" in the object form, got ` + strconv.Quote(w.Type)}
	}
	return nil
}

// Validate checks the mode and, for a named tool, the name.
func (c *ToolChoice) Validate() error {
	switch c.Mode {
	case ToolAuto, ToolNone, ToolRequired:
	case ToolNamed:
		if c.Name == "" {
			return missing("name")
		}
		if !ValidToolName(c.Name) {
			return invalidf("name", "must match ^[a-zA-Z0-9_-]{1,64}$, got %q", c.Name)
		}
	default:
		return invalidf("", `must be "auto", "none", "required" or {"type":"tool","name":…}, got %q`, c.Mode)
	}
	return nil
}

// Forces reports whether the choice makes the model call a tool.
func (c *ToolChoice) Forces() bool {
	return c != nil && (c.Mode == ToolRequired || c.Mode == ToolNamed)
}

// Warning says that a setting of the request was not sent because the
// provider has no such setting (docs/protocol.md §3): ingest's completion
// reply and an adapter's stream (llm.Warner) carry a call's warnings.
type Warning struct {
	// Setting is the request's field, e.g. "top_k" or "seed".
	Setting string `json:"setting"`
	// Message says what happened, naming the provider.
	Message string `json:"message"`
}
