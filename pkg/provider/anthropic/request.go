package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// RedactedSignaturePrefix marks the signature of a thinking block that the
// provider sent as redacted_thinking: the stop signature is this prefix
// followed by the opaque data. The event model has no "redacted" flag on
// block stops, so the mark travels in the signature; a thinking part whose
// signature carries it (or whose Redacted flag is set) is sent back as a
// redacted_thinking block. Anthropic signatures are base64, so the prefix
// cannot occur in a real one.
const RedactedSignaturePrefix = "redacted_thinking:"

// serverToolIDPrefix is the id prefix of Anthropic's server tool calls
// (server_tool_use blocks); tool_use parts with it are sent back as
// server_tool_use, not as client tool calls.
const serverToolIDPrefix = "srvtoolu_"

// RedactedData reports whether a thinking signature marks redacted thinking
// and returns the opaque data.
func RedactedData(signature string) (string, bool) {
	return strings.CutPrefix(signature, RedactedSignaturePrefix)
}

// request is a completion request mapped to the Messages API: the
// parameters, the options that merge provider_options into the body, the
// settings not sent (warnings) and, when structured output rides on a
// forced tool, that tool (the stream turns its call back into text).
type request struct {
	params   sdk.MessageNewParams
	opts     []option.RequestOption
	warnings []events.Warning
	output   outputTool
}

// outputTool is the tool that carries structured output on a model
// without native structured outputs. name is "" when there is none;
// wrapped means its input is {"value": answer} because the schema's root
// is not an object (a tool's input always is).
type outputTool struct {
	name    string
	wrapped bool
}

// invalid returns an invalid-request error of Stream: it matches
// ErrInvalidRequest and classifies as llm.KindInvalidRequest.
func invalid(format string, args ...any) error {
	return &llm.APIError{ErrKind: llm.KindInvalidRequest, Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)}
}

// buildParams maps a completion request to Messages API parameters.
func buildParams(req *llm.Request) (*request, error) {
	r := &request{}
	p := &r.params
	if req == nil {
		return nil, invalid("nil request")
	}
	_, model := events.SplitModel(req.Model)
	p.Model = sdk.Model(model)
	p.MaxTokens = int64(req.MaxTokens)
	budget := int64(0)
	if req.Thinking != nil {
		budget = int64(req.Thinking.BudgetTokens)
	}
	if p.MaxTokens == 0 {
		p.MaxTokens = DefaultMaxTokens
	}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	if req.Temperature != nil {
		p.Temperature = sdk.Float(*req.Temperature)
	}
	thinking := false
	switch {
	case budget > 0:
		p.Thinking = sdk.ThinkingConfigParamOfEnabled(budget)
		thinking = true
		if req.ReasoningEffort != "" {
			r.warn("reasoning_effort", "not sent: thinking.budget_tokens is set and takes precedence")
		}
	case req.ReasoningEffort != "":
		thinking = r.effort(model, req.ReasoningEffort, req.MaxTokens)
		if thinking {
			// Adaptive thinking has no budget; the default max_tokens
			// makes the same room for it as for the budget of the effort.
			budget = effortBudget(req.ReasoningEffort)
			if p.Thinking.OfEnabled != nil {
				budget = p.Thinking.OfEnabled.BudgetTokens
			}
		}
	}
	// budget_tokens must be below max_tokens; only a default we chose
	// ourselves is raised to make room, an explicit one is the caller's.
	if req.MaxTokens == 0 && budget >= p.MaxTokens {
		p.MaxTokens = budget + DefaultMaxTokens
	}
	r.sampling(&req.ModelOptions)
	if thinking {
		r.thinkingSampling()
	}
	for i, t := range req.Tools {
		tp, err := toolParam(t)
		if err != nil {
			return nil, invalid("tools[%d]: %w", i, err)
		}
		p.Tools = append(p.Tools, tp)
	}
	if err := r.toolChoice(req, model, thinking); err != nil {
		return nil, err
	}
	msgs, err := messageParams(req.Messages)
	if err != nil {
		return nil, err
	}
	p.Messages = msgs
	if req.CacheEnabled() {
		placeBreakpoints(p)
	}
	r.compaction(req.Compaction, req.Messages)
	if err := r.providerOptions(req); err != nil {
		return nil, err
	}
	return r, nil
}

// MinCompactionTrigger is the smallest trigger, in input tokens, the
// Messages API takes for its compaction; a smaller one is raised to it.
const MinCompactionTrigger = 50000

// compaction asks the Messages API to compact the context itself once
// the input passes c.Trigger tokens: the compact_20260112 edit of
// context_management under the compact-2026-01-12 beta, whose types the
// SDK has only on its beta Messages API, sent here through the SDK's
// raw-field options. The compaction block comes back first in the answer
// (stream.go) and goes back as it came (blockParam).
//
// A request that sends a compaction block back names the beta too, with
// or without c: the API reads the block only under it.
func (r *request) compaction(c *events.NativeCompaction, msgs []events.Message) {
	beta := option.WithHeaderAdd("anthropic-beta", string(sdk.AnthropicBetaCompact2026_01_12))
	if c == nil {
		for i := range msgs {
			if msgs[i].Role == events.RoleAssistant && llm.HasNativeCompaction(&msgs[i]) {
				r.opts = append(r.opts, beta)
				return
			}
		}
		return
	}
	edit := &sdk.BetaCompact20260112EditParam{}
	if t := c.Trigger; t > 0 {
		if t < MinCompactionTrigger {
			r.warn("compaction.trigger", fmt.Sprintf("raised from %d to %d input tokens, the smallest the Messages API takes", t, MinCompactionTrigger))
			t = MinCompactionTrigger
		}
		edit.Trigger = sdk.BetaInputTokensTriggerParam{Value: t}
	}
	r.opts = append(r.opts, beta,
		option.WithJSONSet("context_management", sdk.BetaContextManagementConfigParam{
			Edits: []sdk.BetaContextManagementConfigEditUnionParam{{OfCompact20260112: edit}},
		}))
}

func (r *request) warn(setting, why string) {
	r.warnings = append(r.warnings, events.Warning{Setting: setting, Message: "anthropic: " + setting + " " + why})
}

// Thinking budgets of reasoning_effort on models that think with a budget.
const (
	BudgetLow    = 1024
	BudgetMedium = 4096
	BudgetHigh   = 16384
)

// effort maps reasoning_effort: adaptive thinking with output_config.effort
// on the models that have it, a thinking budget on the others. It reports
// whether thinking is on.
func (r *request) effort(model string, e events.ReasoningEffort, maxTokens int) bool {
	p := &r.params
	if adaptiveThinking(model) {
		p.Thinking = sdk.ThinkingConfigParamUnion{OfAdaptive: &sdk.ThinkingConfigAdaptiveParam{}}
		p.OutputConfig.Effort = sdk.OutputConfigEffort(e)
		return true
	}
	budget := effortBudget(e)
	if maxTokens > 0 && budget >= int64(maxTokens) {
		// An explicit max_tokens bounds the budget, which must stay below
		// it and at 1024 or more.
		budget = int64(maxTokens) - 1
		if budget < BudgetLow {
			r.warn("reasoning_effort", fmt.Sprintf("not sent: max_tokens %d leaves no room for the minimum thinking budget of %d tokens", maxTokens, BudgetLow))
			return false
		}
	}
	p.Thinking = sdk.ThinkingConfigParamOfEnabled(budget)
	return true
}

// effortBudget is the thinking budget of a reasoning effort.
func effortBudget(e events.ReasoningEffort) int64 {
	switch e {
	case events.EffortLow:
		return BudgetLow
	case events.EffortHigh:
		return BudgetHigh
	}
	return BudgetMedium
}

// sampling maps stop, top_p and top_k, and warns about the settings the
// Messages API does not have.
func (r *request) sampling(o *events.ModelOptions) {
	p := &r.params
	if len(o.Stop) > 0 {
		p.StopSequences = append([]string(nil), o.Stop...)
	}
	if o.TopP != nil {
		p.TopP = sdk.Float(*o.TopP)
	}
	if o.TopK != nil {
		p.TopK = sdk.Int(int64(*o.TopK))
	}
	if o.Seed != nil {
		r.warn("seed", "not sent: the Messages API has no seed")
	}
	if o.PresencePenalty != nil {
		r.warn("presence_penalty", "not sent: the Messages API has no presence penalty")
	}
	if o.FrequencyPenalty != nil {
		r.warn("frequency_penalty", "not sent: the Messages API has no frequency penalty")
	}
}

// thinkingSampling leaves out the sampling settings the Messages API
// refuses while thinking is on: a temperature other than 1, top_k, and a
// top_p below 0.95. Sent, they fail the whole call with a 400.
func (r *request) thinkingSampling() {
	p := &r.params
	if p.Temperature.Valid() && p.Temperature.Value != 1 {
		r.warn("temperature", fmt.Sprintf("not sent: %g is refused while thinking is on (only 1 is accepted)", p.Temperature.Value))
		p.Temperature = param.Opt[float64]{}
	}
	if p.TopK.Valid() {
		r.warn("top_k", "not sent: refused while thinking is on")
		p.TopK = param.Opt[int64]{}
	}
	if p.TopP.Valid() && p.TopP.Value < 0.95 {
		r.warn("top_p", fmt.Sprintf("not sent: %g is refused while thinking is on (0.95 to 1 is accepted)", p.TopP.Value))
		p.TopP = param.Opt[float64]{}
	}
}

// toolChoice maps tool_choice, parallel_tool_calls and response_format,
// which share the tool list and tool_choice when structured output rides
// on a forced tool.
func (r *request) toolChoice(req *llm.Request, model string, thinking bool) error {
	p := &r.params
	serial := req.ParallelToolCalls != nil && !*req.ParallelToolCalls
	if f := req.ResponseFormat; f != nil {
		if f.Type == events.FormatJSONSchema && f.IsStrict() && nativeStructuredOutput(model) {
			var schema map[string]any
			if err := json.Unmarshal(f.Schema, &schema); err != nil {
				return invalid("response_format.schema: %w", err)
			}
			schema = inlineRootRef(schema)
			// The SDK's transform makes the schema one structured outputs
			// take (objects closed with additionalProperties false,
			// keywords they lack moved into descriptions); the turn still
			// validates the answer against the schema as given.
			if t, ok := sdk.BetaJSONSchemaOutputFormat(schema).Schema.(map[string]any); ok && t != nil {
				schema = t
			}
			p.OutputConfig.Format = sdk.JSONOutputFormatParam{Schema: schema}
		} else if err := r.outputTool(req, f, thinking); err != nil {
			return err
		}
	}
	c := req.ToolChoice
	if r.output.name != "" {
		return nil
	}
	switch {
	case c == nil || c.Mode == events.ToolAuto:
		// The API takes tool_choice only with tools; auto is what it
		// does without one.
		if (c != nil || serial) && len(p.Tools) > 0 {
			p.ToolChoice = sdk.ToolChoiceUnionParam{OfAuto: &sdk.ToolChoiceAutoParam{}}
		}
	case c.Mode == events.ToolNone && len(p.Tools) == 0:
	case c.Mode == events.ToolNone:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfNone: &sdk.ToolChoiceNoneParam{}}
	case c.Mode == events.ToolRequired:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{}}
	case c.Mode == events.ToolNamed:
		p.ToolChoice = sdk.ToolChoiceParamOfTool(c.Name)
	}
	setSerial(&p.ToolChoice, serial)
	return nil
}

func setSerial(c *sdk.ToolChoiceUnionParam, serial bool) {
	if !serial {
		return
	}
	switch {
	case c.OfAuto != nil:
		c.OfAuto.DisableParallelToolUse = sdk.Bool(true)
	case c.OfAny != nil:
		c.OfAny.DisableParallelToolUse = sdk.Bool(true)
	case c.OfTool != nil:
		c.OfTool.DisableParallelToolUse = sdk.Bool(true)
	}
}

// inlineRootRef replaces a root "$ref" into the schema's own definitions
// (invopop/jsonschema's form for a Go type: {"$ref":"#/$defs/T","$defs":…})
// with the definition it names, keeping the definitions beside it: both
// the SDK's schema transform (which keeps nothing beside a $ref) and a
// tool's input_schema (an object at the root) need the root spelled out.
func inlineRootRef(schema map[string]any) map[string]any {
	ref, _ := schema["$ref"].(string)
	for _, k := range []string{"$defs", "definitions"} {
		name, ok := strings.CutPrefix(ref, "#/"+k+"/")
		if !ok {
			continue
		}
		defs, _ := schema[k].(map[string]any)
		def, ok := defs[name].(map[string]any)
		if !ok {
			return schema
		}
		out := make(map[string]any, len(def)+len(schema))
		for key, v := range schema {
			if key != "$ref" {
				out[key] = v
			}
		}
		for key, v := range def {
			out[key] = v
		}
		return out
	}
	return schema
}

// DefaultOutputDescription is the description of the tool that carries
// structured output when response_format has none.
const DefaultOutputDescription = "Give your final answer as this tool's input."

// outputTool adds the tool that carries structured output where native
// structured outputs are not used, and the tool_choice that makes the model
// call it: that tool alone when the request has no other tool (or forbids
// them), any tool when it has others (the model still calls them on the
// way), the request's named tool when it names one. Forced tool use is not
// allowed with thinking, so the choice is then auto.
func (r *request) outputTool(req *llm.Request, f *events.ResponseFormat, thinking bool) error {
	p := &r.params
	name := f.SchemaName()
	for _, t := range req.Tools {
		if t.Name == name {
			return invalid("response_format.name: %q is also the name of a tool; name the format differently", name)
		}
	}
	var schema map[string]any
	if f.Type == events.FormatJSONSchema {
		if err := json.Unmarshal(f.Schema, &schema); err != nil {
			return invalid("response_format.schema: %w", err)
		}
		schema = inlineRootRef(schema)
	} else {
		schema = map[string]any{"type": "object"}
	}
	wrapped := false
	if t, _ := schema["type"].(string); t != "object" {
		if _, props := schema["properties"]; t != "" || !props {
			outer := map[string]any{"type": "object", "required": []any{"value"}}
			// References such as "#/$defs/X" (invopop/jsonschema's root
			// $ref) resolve against the root: the definitions move there.
			for _, k := range []string{"$defs", "definitions"} {
				if v, ok := schema[k]; ok {
					outer[k] = v
					delete(schema, k)
				}
			}
			outer["properties"] = map[string]any{"value": schema}
			schema, wrapped = outer, true
		}
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return invalid("response_format.schema: %w", err)
	}
	desc := f.Description
	if desc == "" {
		desc = DefaultOutputDescription
	}
	tp, err := toolParam(events.ToolDefinition{Name: name, Description: desc, InputSchema: raw})
	if err != nil {
		return invalid("response_format.schema: %w", err)
	}
	p.Tools = append(p.Tools, tp)
	r.output = outputTool{name: name, wrapped: wrapped}
	c := req.ToolChoice
	switch {
	case thinking:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfAuto: &sdk.ToolChoiceAutoParam{}}
	case c != nil && c.Mode == events.ToolNamed:
		p.ToolChoice = sdk.ToolChoiceParamOfTool(c.Name)
	case len(req.Tools) == 0 || (c != nil && c.Mode == events.ToolNone):
		p.ToolChoice = sdk.ToolChoiceParamOfTool(name)
	default:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{}}
	}
	setSerial(&p.ToolChoice, req.ParallelToolCalls != nil && !*req.ParallelToolCalls)
	return nil
}

// providerOptions applies provider_options["anthropic"] (or the model's
// provider prefix's) to the body as a JSON Merge Patch (RFC 7396) through
// the SDK's raw-field options: an object merges key by key into what the
// adapter built, null removes a field, anything else replaces it.
func (r *request) providerOptions(req *llm.Request) error {
	prefix, _ := events.SplitModel(req.Model)
	key := "anthropic"
	if _, ok := req.ProviderOptions[key]; !ok && prefix != "" {
		key = prefix
	}
	raw, ok := req.ProviderOptions[key]
	if !ok {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return invalid("provider_options.%s: must be a JSON object: %w", key, err)
	}
	return r.mergePatch("", m, "provider_options."+key)
}

func (r *request) mergePatch(path string, m map[string]json.RawMessage, field string) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k == "" {
			return invalid("%s: a key must not be empty", field)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := sjsonKey(k)
		if path != "" {
			p = path + "." + p
		}
		v := bytes.TrimSpace(m[k])
		switch {
		case string(v) == "null":
			r.opts = append(r.opts, option.WithJSONDel(p))
		case len(v) > 0 && v[0] == '{':
			var sub map[string]json.RawMessage
			if err := json.Unmarshal(v, &sub); err != nil {
				return invalid("%s.%s: %w", field, k, err)
			}
			if err := r.mergePatch(p, sub, field+"."+k); err != nil {
				return err
			}
		default:
			r.opts = append(r.opts, option.WithJSONSet(p, json.RawMessage(v)))
		}
	}
	return nil
}

// sjsonKey escapes a body key for the path syntax of the SDK's raw-field
// options, so that a key with a dot or a wildcard names one field.
func sjsonKey(k string) string {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// MaxBreakpoints is the number of cache_control breakpoints the Messages
// API allows in one request.
const MaxBreakpoints = 4

// placeBreakpoints marks the prompt cache breakpoints: the last tool
// definition, the system prompt, the newest message (so the next request
// of the turn, which repeats this one and adds to it, reads it from the
// cache) and the message that was newest in the previous request (so this
// one reads what that one wrote, however many blocks were added since).
// Each goes on the last block of its part that can carry one; at most
// MaxBreakpoints in all.
func placeBreakpoints(p *sdk.MessageNewParams) {
	cc := sdk.NewCacheControlEphemeralParam()
	n := 0
	if k := len(p.Tools); k > 0 {
		if c := p.Tools[k-1].GetCacheControl(); c != nil {
			*c = cc
			n++
		}
	}
	if k := len(p.System); k > 0 {
		p.System[k-1].CacheControl = cc
		n++
	}
	last := len(p.Messages) - 1
	if last < 0 {
		return
	}
	marked := -1
	for i := last; i >= 0 && n < MaxBreakpoints; i-- {
		if markLast(p.Messages[i].Content, cc) {
			n++
			marked = i
			break
		}
	}
	// The previous request ended before the newest assistant message.
	for i := marked - 1; i >= 0 && n < MaxBreakpoints; i-- {
		if p.Messages[i].Role != sdk.MessageParamRoleAssistant {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			if markLast(p.Messages[j].Content, cc) {
				return
			}
		}
		return
	}
}

// markLast puts cc on the last block of blocks that can carry one
// (thinking blocks cannot).
func markLast(blocks []sdk.ContentBlockParamUnion, cc sdk.CacheControlEphemeralParam) bool {
	for i := len(blocks) - 1; i >= 0; i-- {
		if c := blocks[i].GetCacheControl(); c != nil {
			*c = cc
			return true
		}
	}
	return false
}

func toolParam(t events.ToolDefinition) (sdk.ToolUnionParam, error) {
	var schema sdk.ToolInputSchemaParam
	raw := bytes.TrimSpace(t.InputSchema)
	if len(raw) > 0 {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return sdk.ToolUnionParam{}, fmt.Errorf("input_schema: %w", err)
		}
		// properties and required have their own fields; every other key
		// ($defs, additionalProperties, ...) is kept verbatim.
		if v, ok := m["properties"]; ok {
			schema.Properties = v
			delete(m, "properties")
		}
		if v, ok := m["required"].([]any); ok {
			for _, r := range v {
				if s, ok := r.(string); ok {
					schema.Required = append(schema.Required, s)
				}
			}
			delete(m, "required")
		}
		delete(m, "type")
		if len(m) > 0 {
			schema.ExtraFields = m
		}
	}
	if schema.Properties == nil {
		// input_schema is required; a zero one would be left out.
		schema.Properties = map[string]any{}
	}
	u := sdk.ToolUnionParamOfTool(schema, t.Name)
	if t.Description != "" {
		u.OfTool.Description = sdk.String(t.Description)
	}
	return u, nil
}
