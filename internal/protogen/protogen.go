// Package protogen generates the JSON Schemas of every wire payload from the
// Go types of pkg/events with invopop/jsonschema, so that docs/protocol.md
// cannot drift from the code: TestProtocolDocUpToDate fails when the
// generated section of the document differs, and `go test
// ./internal/protogen -update` rewrites it.
package protogen

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"strings"

	"github.com/invopop/jsonschema"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/turn"
)

// Entry is one payload: the CloudEvent types that carry it and its schema.
type Entry struct {
	Title string
	Types []string
	Value any
}

// Entries lists every payload of docs/protocol.md §3–§8 in document order.
func Entries() []Entry {
	return []Entry{
		{"Provider stream: ping", []string{events.TypeLLMPing}, events.PingEvent{}},
		{"Provider stream: usage", []string{events.TypeLLMUsage}, events.UsageEvent{}},
		{"Provider stream: status", []string{events.TypeLLMStatus}, events.StatusEvent{}},
		{"Provider stream: error", []string{events.TypeLLMError}, events.ErrorEvent{}},
		{"Provider stream: block start", []string{events.TypeLLMBlockStart}, events.BlockStart{}},
		{"Provider stream: block delta", []string{events.TypeLLMBlockDelta}, events.BlockDelta{}},
		{"Provider stream: block stop", []string{events.TypeLLMBlockStop}, events.BlockStop{}},
		{"Provider stream: block abort", []string{events.TypeLLMBlockAbort}, events.BlockAbort{}},
		{"Completion request", []string{events.TypeLLMComplete}, events.CompletionRequest{}},
		{"Completion reply", []string{"(reply to " + events.TypeLLMComplete + ")"}, events.CompletionReply{}},
		{"Message", []string{"(inside requests, transcripts and hook payloads)"}, events.Message{}},
		{"Tool definition", []string{"(inside requests)"}, events.ToolDefinition{}},
		{"Turn request", []string{events.TypeTurnSubmit}, events.TurnRequest{}},
		{"Resume request", []string{events.TypeTurnResume}, events.ResumeRequest{}},
		{"Turn started", []string{events.TypeTurnStarted}, events.TurnStarted{}},
		{"Turn step", []string{events.TypeTurnStep}, events.TurnStep{}},
		{"Turn paused", []string{events.TypeTurnPaused}, events.TurnPaused{}},
		{"Turn resumed", []string{events.TypeTurnResumed}, events.TurnResumed{}},
		{"Turn completed", []string{events.TypeTurnCompleted}, events.TurnCompleted{}},
		{"Turn failed / aborted", []string{events.TypeTurnFailed, events.TypeTurnAborted}, events.TurnEnded{}},
		{"Turn rejected", []string{events.TypeTurnRejected}, events.TurnRejected{}},
		{"Turn warning", []string{events.TypeTurnWarning}, events.TurnWarning{}},
		{"Turn queued", []string{events.TypeTurnQueued}, events.TurnQueued{}},
		{"Turn compacted", []string{events.TypeTurnCompacted}, events.TurnCompacted{}},
		{"Worker block start", []string{events.TypeBlockStart}, events.WorkerBlockStart{}},
		{"Worker block delta", []string{events.TypeBlockDelta}, events.WorkerBlockDelta{}},
		{"Worker block stop", []string{events.TypeBlockStop}, events.WorkerBlockStop{}},
		{"Worker block abort", []string{events.TypeBlockAbort}, events.WorkerBlockAbort{}},
		{"Text complete", []string{events.TypeTextComplete}, events.TextComplete{}},
		{"Tool call complete", []string{events.TypeToolCallComplete}, events.ToolCallComplete{}},
		{"Tool started", []string{events.TypeToolStarted}, events.ToolStarted{}},
		{"Tool progress", []string{events.TypeToolProgress}, events.ToolProgress{}},
		{"Tool skipped", []string{events.TypeToolSkipped}, events.ToolSkipped{}},
		{"Tool cancelled", []string{events.TypeToolCancelled}, events.ToolCancelled{}},
		{"Tool child", []string{events.TypeToolChild}, events.ToolChild{}},
		{"Hook decision", []string{events.TypeHookDecision}, events.HookDecision{}},
		{"Hook message", []string{events.TypeHookMessage}, events.HookMessage{}},
		{"Usage report", []string{events.TypeUsage}, events.UsageReport{}},
		{"Tool catalog entry (KV LLMW_TOOLS)", []string{"(KV value)"}, events.ToolCatalogEntry{}},
		{"Tool call", []string{events.TypeToolCall}, events.ToolCallRequest{}},
		{"Tool result", []string{events.TypeToolResult}, events.ToolCallResult{}},
		{"Hook registration (KV LLMW_HOOKS)", []string{"(KV value)"}, events.HookRegistration{}},
		{"Agent definition (KV LLMW_AGENTS)", []string{"(KV value)"}, events.AgentDefinition{}},
		{"Hook request", []string{events.TypeHookRequest}, events.HookRequest{}},
		{"Hook response", []string{events.TypeHookResponse}, events.HookResponse{}},
		{"Session transcript (KV LLMW_SESSIONS)", []string{"(KV value)"}, turn.SessionRecord{}},
		{"Turn state and checkpoint (KV LLMW_TURN_STATE)", []string{"(KV value)"}, turn.State{}},
	}
}

func str(desc string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Description: desc}
}

func obj(required []string, props ...any) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "object", Properties: jsonschema.NewProperties(), Required: required}
	for i := 0; i+1 < len(props); i += 2 {
		s.Properties.Set(props[i].(string), props[i+1].(*jsonschema.Schema))
	}
	return s
}

func integer() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "integer", Minimum: json.Number("0")}
}

func deltaSchema(withStep bool) *jsonschema.Schema {
	var alts []*jsonschema.Schema
	for _, k := range []string{"text", "thinking", "input_json"} {
		props := []any{"index", integer(), k, str("")}
		req := []string{"index", k}
		if withStep {
			props = append(props, "step", integer())
			req = append(req, "step")
		}
		alts = append(alts, obj(req, props...))
	}
	return &jsonschema.Schema{OneOf: alts, Description: "exactly one of text, thinking and input_json"}
}

// origin describes events.Part.Origin.
const origin = "the provider prefix that made the part (anthropic for vertex-anthropic too); sent only to models of that origin"

func partSchema() *jsonschema.Schema {
	constant := func(v string) *jsonschema.Schema { return &jsonschema.Schema{Const: v} }
	anyJSON := &jsonschema.Schema{Description: "any JSON value (an object for tool input)"}
	b := &jsonschema.Schema{Type: "boolean"}
	return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
		obj([]string{"type", "text"}, "type", constant("text"), "text", str(""), "signature", str("opaque provider data that must round-trip"), "origin", str(origin)),
		obj([]string{"type", "thinking"}, "type", constant("thinking"), "thinking", str(""), "signature", str("opaque provider data that must round-trip"), "redacted", b, "origin", str(origin)),
		obj([]string{"type", "id", "name", "input"}, "type", constant("tool_use"), "id", str(""), "name", str(""), "input", anyJSON, "signature", str("opaque provider data that must round-trip"), "origin", str(origin)),
		obj([]string{"type", "tool_use_id", "content"}, "type", constant("tool_result"), "tool_use_id", str(""), "content", resultContentSchema(), "is_error", b),
		{Ref: "#/$defs/ImagePart"},
		{Ref: "#/$defs/FilePart"},
	}}
}

// partDefs adds to defs Part and the media parts it and a tool result's
// content refer to.
func partDefs(defs jsonschema.Definitions) *jsonschema.Schema {
	ref(defs, "ImagePart", func() *jsonschema.Schema { return mediaSchema("image", events.ImageMediaTypes) })
	ref(defs, "FilePart", func() *jsonschema.Schema { return mediaSchema("file", events.FileMediaTypes) })
	return ref(defs, "Part", partSchema)
}

// mediaSchema is an image or file part: a media type and exactly one of
// data, url and ref.
func mediaSchema(typ string, mediaTypes []string) *jsonschema.Schema {
	enum := make([]any, len(mediaTypes))
	for i, m := range mediaTypes {
		enum[i] = m
	}
	s := obj([]string{"type", "media_type"}, "type", &jsonschema.Schema{Const: typ},
		"media_type", &jsonschema.Schema{Type: "string", Enum: enum},
		"data", str("the bytes, standard base64"),
		"url", &jsonschema.Schema{Type: "string", Pattern: "^https://", Description: "fetched by the provider"},
		"ref", &jsonschema.Schema{Type: "string", Pattern: "^sha256:[0-9a-f]{64}$", Description: "the bytes' address in the LLMW_MEDIA object store"},
		"size", &jsonschema.Schema{Type: "integer", Minimum: json.Number("0"), Description: "length of the bytes, with ref"},
		"filename", str(""))
	s.OneOf = []*jsonschema.Schema{{Required: []string{"data"}}, {Required: []string{"url"}}, {Required: []string{"ref"}}}
	return s
}

// resultContentSchema is a tool result's content: a string, or text,
// image and file parts.
func resultContentSchema() *jsonschema.Schema {
	parts := partSchema0()
	return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
		str("the result as text"),
		{Type: "array", Items: &jsonschema.Schema{OneOf: parts}, Description: "text, image and file parts"},
	}}
}

// partSchema0 is the text, image and file parts a tool result may hold.
func partSchema0() []*jsonschema.Schema {
	return []*jsonschema.Schema{
		obj([]string{"type", "text"}, "type", &jsonschema.Schema{Const: "text"}, "text", str("")),
		{Ref: "#/$defs/ImagePart"},
		{Ref: "#/$defs/FilePart"},
	}
}

func toolChoiceSchema() *jsonschema.Schema {
	return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
		{Type: "string", Enum: []any{"auto", "none", "required"}},
		obj([]string{"type", "name"}, "type", &jsonschema.Schema{Const: "tool"}, "name", str("the tool the model must call")),
	}}
}

func messageSchema() *jsonschema.Schema {
	return obj([]string{"role", "content"},
		"role", &jsonschema.Schema{Type: "string", Enum: []any{"user", "assistant", "tool"}},
		"content", &jsonschema.Schema{OneOf: []*jsonschema.Schema{
			str("one text part"),
			{Type: "array", Items: &jsonschema.Schema{Ref: "#/$defs/Part"}},
		}},
		"pinned", &jsonschema.Schema{Type: "boolean", Description: "kept as it is by every compaction"})
}

func decisionSchema() *jsonschema.Schema {
	return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
		{Type: "string", Enum: []any{"approve", "deny"}},
		obj([]string{"input"}, "input", &jsonschema.Schema{Type: "object", Description: "run the call with this input"}),
		obj([]string{"deny"}, "deny", str("deny, telling the model this reason")),
	}}
}

// resultTypes carry a tool result's content, a string or an array of
// parts (events.Part's Parts): reflected as usual, then given that
// content schema.
var resultTypes = map[reflect.Type]bool{
	reflect.TypeOf(events.ToolResult{}):     true,
	reflect.TypeOf(events.ToolCallResult{}): true,
}

// reflector reflects a payload with each nested struct once, in defs
// ("$defs" of the root), referenced from where it is used; the mapped
// schemas of the types the document describes by hand (Message, Part,
// Decision, ToolChoice, StopReason) go there too.
func reflector(defs jsonschema.Definitions) *jsonschema.Reflector {
	return reflectorSkipping(defs, nil)
}

// ref returns a reference to the definition name in defs, built on first
// use.
func ref(defs jsonschema.Definitions, name string, build func() *jsonschema.Schema) *jsonschema.Schema {
	if _, ok := defs[name]; !ok {
		defs[name] = build()
	}
	return &jsonschema.Schema{Ref: "#/$defs/" + name}
}

// reflectorSkipping is reflector with the content mapping of resultTypes
// off for skip, so that mapping it can reflect the type itself.
func reflectorSkipping(defs jsonschema.Definitions, skip reflect.Type) *jsonschema.Reflector {
	return &jsonschema.Reflector{
		ExpandedStruct:            true, // the payload itself inline, what it holds in $defs
		Anonymous:                 true,
		AllowAdditionalProperties: true, // unknown fields are ignored (docs/protocol.md §1)
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			if resultTypes[t] && t != skip {
				rs := reflectorSkipping(defs, t).ReflectFromType(t)
				maps.Copy(defs, rs.Definitions)
				rs.Version, rs.Definitions = "", nil
				partDefs(defs)
				rs.Properties.Set("content", resultContentSchema())
				return rs
			}
			switch t {
			case reflect.TypeOf(events.BlockDelta{}):
				return deltaSchema(false)
			case reflect.TypeOf(events.WorkerBlockDelta{}):
				return deltaSchema(true)
			case reflect.TypeOf(events.Message{}):
				partDefs(defs)
				return ref(defs, "Message", messageSchema)
			case reflect.TypeOf(events.Part{}):
				return partDefs(defs)
			case reflect.TypeOf(events.Decision{}):
				return ref(defs, "Decision", decisionSchema)
			case reflect.TypeOf(events.ToolChoice{}):
				return ref(defs, "ToolChoice", toolChoiceSchema)
			case reflect.TypeOf(events.StopReason("")):
				return ref(defs, "StopReason", func() *jsonschema.Schema {
					return &jsonschema.Schema{Type: "", OneOf: []*jsonschema.Schema{
						{Type: "string", Enum: []any{"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal", "content_filter"}},
						{Type: "null"},
					}}
				})
			case reflect.TypeOf(json.RawMessage(nil)):
				return &jsonschema.Schema{Description: "any JSON value"}
			}
			return nil
		},
	}
}

// Schema returns the JSON Schema of v as indented JSON.
func Schema(v any) ([]byte, error) {
	defs := jsonschema.Definitions{}
	s := reflector(defs).Reflect(v)
	s.Version = ""
	if len(defs) > 0 && s.Definitions == nil {
		s.Definitions = jsonschema.Definitions{}
	}
	maps.Copy(s.Definitions, defs)
	if len(s.Definitions) == 0 {
		s.Definitions = nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}

// Begin and End mark the generated section of docs/protocol.md.
const (
	Begin = "<!-- BEGIN GENERATED SCHEMAS (go test ./internal/protogen -update) -->"
	End   = "<!-- END GENERATED SCHEMAS -->"
)

// Render returns the generated section, markers included.
func Render() (string, error) {
	var b strings.Builder
	b.WriteString(Begin + "\n")
	for _, e := range Entries() {
		s, err := Schema(e.Value)
		if err != nil {
			return "", err
		}
		b.WriteString("\n### " + e.Title + "\n\n")
		b.WriteString("`" + strings.Join(e.Types, "`, `") + "`\n\n")
		b.WriteString("```json\n")
		b.Write(s)
		b.WriteString("\n```\n")
	}
	b.WriteString("\n" + End)
	return b.String(), nil
}

// Splice replaces the generated section of doc with gen.
func Splice(doc, gen string) (string, bool) {
	i := strings.Index(doc, Begin)
	j := strings.Index(doc, End)
	if i < 0 || j < i {
		return doc, false
	}
	return doc[:i] + gen + doc[j+len(End):], true
}
