package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Role is who wrote a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// PartType is the type of one content part of a message.
type PartType string

const (
	PartText       PartType = "text"
	PartThinking   PartType = "thinking"
	PartToolUse    PartType = "tool_use"
	PartToolResult PartType = "tool_result"
)

// Message is one conversation message (docs/protocol.md §4). On input, "content"
// may be a plain string, read as one text part.
type Message struct {
	Role    Role   `json:"role" jsonschema:"enum=user,enum=assistant,enum=tool"`
	Content []Part `json:"content"`
	// Pinned keeps the message as it is in every compaction of the
	// context (pkg/compact): a summary never replaces it.
	Pinned bool `json:"pinned,omitempty"`
}

// Part is one content part. Which fields are meaningful depends on Type:
//
//	text:        Text (Signature: opaque provider data, e.g. a Gemini thought signature), Origin
//	thinking:    Thinking, Signature, Redacted, Origin
//	tool_use:    ID, Name, Input (Signature as for text), Origin
//	tool_result: ToolUseID, Content or Parts, IsError
//	image, file: MediaType, one of Data, URL and Ref (with Size), Filename (file)
//
// A tool_result's "content" is a string (Content) or an array of text,
// image and file parts (Parts; Content then holds the text of its text
// parts, for readers that want text only). MarshalJSON writes only the
// fields of the part's type.
type Part struct {
	Type      PartType `json:"type" jsonschema:"enum=text,enum=thinking,enum=tool_use,enum=tool_result,enum=image,enum=file"`
	Text      string   `json:"text,omitempty"`
	Thinking  string   `json:"thinking,omitempty"`
	Signature string   `json:"signature,omitempty"`
	Redacted  bool     `json:"redacted,omitempty"`
	// Origin is the provider prefix of the model that made the part
	// ("anthropic" of "anthropic:claude-sonnet-4-5"), on a part that
	// carries data only that provider reads: a thinking part, a part with
	// a Signature. A prefix that reads another's data alike shares its
	// Origin (llm.Origin: "anthropic" for "vertex-anthropic"). Requests to
	// a provider of another Origin leave that data out (llm.ForProvider);
	// "" sends the part to every provider.
	Origin    string          `json:"origin,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	// Parts is a tool_result's content in array form.
	Parts   []Part `json:"-"`
	IsError bool   `json:"is_error,omitempty"`
	// MediaType is the IANA media type of an image or file part.
	MediaType string `json:"media_type,omitempty"`
	// Data is the media's bytes, standard base64.
	Data string `json:"data,omitempty"`
	// URL is an https URL the provider fetches the media from.
	URL string `json:"url,omitempty"`
	// Ref is the content address ("sha256:<hex>") of the media's bytes in
	// the LLMW_MEDIA object store, and Size their length.
	Ref  string `json:"ref,omitempty"`
	Size int64  `json:"size,omitempty"`
	// Filename is a file part's name, shown to the model where the
	// provider takes one.
	Filename string `json:"filename,omitempty"`
}

// UserText returns a user message with one text part.
func UserText(text string) Message {
	return Message{Role: RoleUser, Content: []Part{{Type: PartText, Text: text}}}
}

// AssistantText returns an assistant message with one text part.
func AssistantText(text string) Message {
	return Message{Role: RoleAssistant, Content: []Part{{Type: PartText, Text: text}}}
}

// TextPart, ThinkingPart, ToolUsePart and ToolResultPart build parts.
func TextPart(text string) Part { return Part{Type: PartText, Text: text} }
func ThinkingPart(thinking, signature string) Part {
	return Part{Type: PartThinking, Thinking: thinking, Signature: signature}
}
func ToolUsePart(id, name string, input json.RawMessage) Part {
	return Part{Type: PartToolUse, ID: id, Name: name, Input: input}
}
func ToolResultPart(toolUseID, content string, isError bool) Part {
	return Part{Type: PartToolResult, ToolUseID: toolUseID, Content: content, IsError: isError}
}

// ToolResultParts returns a tool_result part whose content is parts (text,
// image and file parts).
func ToolResultParts(toolUseID string, parts []Part, isError bool) Part {
	return Part{Type: PartToolResult, ToolUseID: toolUseID, Content: PartsText(parts), Parts: parts, IsError: isError}
}

// PartsText returns the concatenated text of the text parts of parts.
func PartsText(parts []Part) string {
	if len(parts) == 1 && parts[0].Type == PartText {
		return parts[0].Text
	}
	var b bytes.Buffer
	for i := range parts {
		if parts[i].Type == PartText {
			b.WriteString(parts[i].Text)
		}
	}
	return b.String()
}

// UnmarshalJSON reads a part; a tool_result's content may be a string or
// an array of parts.
func (p *Part) UnmarshalJSON(b []byte) error {
	type plain Part
	var w struct {
		plain
		Content json.RawMessage `json:"content,omitempty"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return unwrapPlain(err)
	}
	*p = Part(w.plain)
	p.Content, p.Parts = "", nil
	c := bytes.TrimSpace(w.Content)
	switch {
	case len(c) == 0 || string(c) == "null":
	case c[0] == '"':
		return json.Unmarshal(c, &p.Content)
	case c[0] == '[' && p.Type == PartToolResult:
		if err := json.Unmarshal(c, &p.Parts); err != nil {
			return prefixJSONField("content", err)
		}
		if p.Parts == nil {
			p.Parts = []Part{}
		}
		p.Content = PartsText(p.Parts)
	default:
		return &FieldError{Field: "content", Problem: "must be a string, or for a tool_result an array of parts"}
	}
	return nil
}

// Text returns the concatenated text parts of m.
func (m Message) Text() string {
	var b bytes.Buffer
	for _, p := range m.Content {
		if p.Type == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// ToolUses returns the tool_use parts of m.
func (m Message) ToolUses() []Part {
	var out []Part
	for _, p := range m.Content {
		if p.Type == PartToolUse {
			out = append(out, p)
		}
	}
	return out
}

// UnmarshalJSON accepts "content" as a string or an array of parts.
func (m *Message) UnmarshalJSON(b []byte) error {
	var w struct {
		Role    Role            `json:"role"`
		Content json.RawMessage `json:"content"`
		Pinned  bool            `json:"pinned"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	m.Role, m.Pinned = w.Role, w.Pinned
	m.Content = nil
	c := bytes.TrimSpace(w.Content)
	switch {
	case len(c) == 0 || string(c) == "null":
	case c[0] == '"':
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return err
		}
		m.Content = []Part{{Type: PartText, Text: s}}
	case c[0] == '[':
		if err := json.Unmarshal(c, &m.Content); err != nil {
			return prefixJSONField("content", err)
		}
	default:
		return &FieldError{Field: "content", Problem: "must be a string or an array of parts"}
	}
	return nil
}

func prefixJSONField(parent string, err error) error {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		cp := *te
		if cp.Field == "" {
			cp.Field = parent
		} else {
			cp.Field = parent + "." + cp.Field
		}
		return &cp
	}
	return err
}

// MarshalJSON writes the message in one pass (AppendJSON): a transcript
// is encoded at every step (the checkpoint, the completion request), so
// its messages skip encoding/json's reflection.
func (m Message) MarshalJSON() ([]byte, error) {
	n := 32
	for i := range m.Content {
		n += m.Content[i].size()
	}
	return m.AppendJSON(make([]byte, 0, n))
}

// AppendJSON appends the JSON of m to b: {"role":…,"content":[…]} with
// each part as Part.AppendJSON writes it (content null for nil), and
// "pinned":true for a pinned message.
func (m Message) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"role":`...)
	b = AppendJSONString(b, string(m.Role))
	b = append(b, `,"content":`...)
	if m.Content == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range m.Content {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = m.Content[i].AppendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if m.Pinned {
		b = append(b, `,"pinned":true`...)
	}
	return append(b, '}'), nil
}

// AppendMessages appends msgs as a JSON array (null for nil) to b, each
// message as Message.AppendJSON writes it. Unlike json.Marshal it does not
// validate and re-escape its own output, which for a transcript (encoded
// at every step, growing with the turn) is most of the cost.
func AppendMessages(b []byte, msgs []Message) ([]byte, error) {
	if msgs == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = msgs[i].AppendJSON(b); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// MarshalWithMessages is json.Marshal(v) for a payload that carries a
// transcript: v is a struct (or a pointer to one) whose "messages" field
// is nil and comes after scalar fields only (as in CompletionRequest, or
// worker.Checkpoint), and msgs takes that field's place, written by
// AppendMessages. Since a JSON string cannot hold an unescaped quote, the
// first `"messages":null` of v's encoding is that field.
func MarshalWithMessages(v any, msgs []Message) ([]byte, error) {
	return AppendWithMessages(nil, v, msgs)
}

// AppendWithMessages appends what MarshalWithMessages returns to b.
func AppendWithMessages(b []byte, v any, msgs []Message) ([]byte, error) {
	head, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	const field = `"messages":null`
	i := bytes.Index(head, []byte(field))
	if i < 0 {
		return nil, fmt.Errorf("events: %T has no nil messages field to write the transcript into", v)
	}
	size := len(head) + 2
	for j := range msgs {
		size += 24
		for k := range msgs[j].Content {
			size += msgs[j].Content[k].size()
		}
	}
	b = append(slices.Grow(b, size), head[:i+len(field)-len("null")]...)
	if b, err = AppendMessages(b, msgs); err != nil {
		return nil, err
	}
	return append(b, head[i+len(field):]...), nil
}

// size is about the length of the part's JSON.
func (p *Part) size() int {
	n := 48 + len(p.Text) + len(p.Thinking) + len(p.Content) + len(p.Input) + len(p.Signature) + len(p.Origin) + len(p.ID) + len(p.Name) + len(p.ToolUseID) +
		len(p.Data) + len(p.URL) + len(p.Ref) + len(p.MediaType) + len(p.Filename)
	for i := range p.Parts {
		n += p.Parts[i].size()
	}
	return n
}

// MarshalJSON writes only the fields that belong to the part's type, and
// always writes the fields that type requires.
func (p Part) MarshalJSON() ([]byte, error) {
	return p.AppendJSON(make([]byte, 0, p.size()))
}

// AppendJSON appends the JSON of p (as MarshalJSON writes it) to b.
func (p Part) AppendJSON(b []byte) ([]byte, error) {
	start := len(b)
	b = append(b, `{"type":`...)
	b = AppendJSONString(b, string(p.Type))
	switch p.Type {
	case PartText:
		b = append(b, `,"text":`...)
		b = AppendJSONString(b, p.Text)
		b = appendOptString(b, "signature", p.Signature)
		b = appendOptString(b, "origin", p.Origin)
	case PartThinking:
		b = append(b, `,"thinking":`...)
		b = AppendJSONString(b, p.Thinking)
		b = appendOptString(b, "signature", p.Signature)
		if p.Redacted {
			b = append(b, `,"redacted":true`...)
		}
		b = appendOptString(b, "origin", p.Origin)
	case PartToolUse:
		b = append(b, `,"id":`...)
		b = AppendJSONString(b, p.ID)
		b = append(b, `,"name":`...)
		b = AppendJSONString(b, p.Name)
		b = append(b, `,"input":`...)
		in := bytes.TrimSpace(p.Input)
		if len(in) == 0 {
			in = []byte("{}")
		} else if !json.Valid(in) {
			return nil, fmt.Errorf("events: tool_use %q input is not valid JSON", p.ID)
		}
		b = append(b, in...)
		b = appendOptString(b, "signature", p.Signature)
		b = appendOptString(b, "origin", p.Origin)
	case PartToolResult:
		b = append(b, `,"tool_use_id":`...)
		b = AppendJSONString(b, p.ToolUseID)
		b = append(b, `,"content":`...)
		if p.Parts != nil {
			b = append(b, '[')
			for i := range p.Parts {
				if i > 0 {
					b = append(b, ',')
				}
				var err error
				if b, err = p.Parts[i].AppendJSON(b); err != nil {
					return nil, err
				}
			}
			b = append(b, ']')
		} else {
			b = AppendJSONString(b, p.Content)
		}
		b = append(b, `,"is_error":`...)
		b = strconv.AppendBool(b, p.IsError)
	case PartImage, PartFile:
		b = append(b, `,"media_type":`...)
		b = AppendJSONString(b, p.MediaType)
		b = appendOptString(b, "data", p.Data)
		b = appendOptString(b, "url", p.URL)
		b = appendOptString(b, "ref", p.Ref)
		if p.Size > 0 {
			b = append(b, `,"size":`...)
			b = strconv.AppendInt(b, p.Size, 10)
		}
		b = appendOptString(b, "filename", p.Filename)
	default:
		type plain Part
		pb, err := json.Marshal(plain(p))
		if err != nil {
			return nil, err
		}
		return append(b[:start], pb...), nil
	}
	return append(b, '}'), nil
}

func appendOptString(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return AppendJSONString(b, v)
}

// Validate checks the role and every part.
func (m Message) Validate() error {
	switch m.Role {
	case "":
		return missing("role")
	case RoleUser, RoleAssistant, RoleTool:
	default:
		return invalidf("role", "must be user, assistant or tool, got %q", m.Role)
	}
	if m.Content == nil {
		return missing("content")
	}
	for i, p := range m.Content {
		if err := p.Validate(); err != nil {
			return prefixField("content["+strconv.Itoa(i)+"]", err)
		}
	}
	return nil
}

// Validate checks that the part has the fields its type requires.
func (p Part) Validate() error {
	switch p.Type {
	case "":
		return missing("type")
	case PartText, PartThinking:
	case PartToolUse:
		if p.ID == "" {
			return missing("id")
		}
		if p.Name == "" {
			return missing("name")
		}
		if len(p.Input) > 0 && !json.Valid(p.Input) {
			return invalidf("input", "must be valid JSON")
		}
	case PartToolResult:
		if p.ToolUseID == "" {
			return missing("tool_use_id")
		}
		if err := ValidateResultParts("content", p.Parts); err != nil {
			return err
		}
	case PartImage, PartFile:
		return p.validateMedia()
	default:
		return invalidf("type", "must be text, thinking, tool_use, tool_result, image or file, got %q", p.Type)
	}
	return nil
}

// ValidateResultParts checks the parts of a tool result's content: text,
// image and file parts only, each valid; field names the content.
func ValidateResultParts(field string, parts []Part) error {
	for i := range parts {
		f := field + "[" + strconv.Itoa(i) + "]"
		switch parts[i].Type {
		case PartText, PartImage, PartFile:
		default:
			return invalidf(f+".type", "must be text, image or file inside a tool result, got %q", parts[i].Type)
		}
		if err := parts[i].Validate(); err != nil {
			return prefixField(f, err)
		}
	}
	return nil
}

// ValidateMessages validates a list of messages, naming the field as
// "<field>[i]...".
func ValidateMessages(field string, msgs []Message) error {
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			return prefixField(field+"["+strconv.Itoa(i)+"]", err)
		}
	}
	return nil
}

// ToolDefinition describes a tool to the model (docs/protocol.md §4).
type ToolDefinition struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidToolName reports whether name matches ^[a-zA-Z0-9_-]{1,64}$.
func ValidToolName(name string) bool { return toolNameRE.MatchString(name) }

// Validate checks the name and that the schema is a JSON object.
func (t ToolDefinition) Validate() error {
	if t.Name == "" {
		return missing("name")
	}
	if !ValidToolName(t.Name) {
		return invalidf("name", "must match ^[a-zA-Z0-9_-]{1,64}$, got %q", t.Name)
	}
	s := bytes.TrimSpace(t.InputSchema)
	if len(s) == 0 {
		return missing("input_schema")
	}
	if s[0] != '{' || !json.Valid(s) {
		return invalidf("input_schema", "must be a JSON Schema object")
	}
	return nil
}

// ToolCall is a model's request to run a tool, as hooks see it
// (docs/protocol.md §7: {"id", "name", "input"}).
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// Validate checks id and name.
func (c ToolCall) Validate() error {
	if c.ID == "" {
		return missing("id")
	}
	if c.Name == "" {
		return missing("name")
	}
	if len(c.Input) > 0 && !json.Valid(c.Input) {
		return invalidf("input", "must be valid JSON")
	}
	return nil
}

// ToolResult is the result of a tool call as hooks and the transcript see it
// (docs/protocol.md §7: {"tool_use_id", "content", "is_error"}). Content
// is a string, or on the wire an array of text, image and file parts
// (Parts; Content then holds their text), as in a tool_result part.
type ToolResult struct {
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
	Parts     []Part `json:"-"`
	IsError   bool   `json:"is_error"`
}

// MarshalJSON writes content as Parts when they are set.
func (r ToolResult) MarshalJSON() ([]byte, error) {
	type plain ToolResult
	return marshalWithContent(plain(r), r.Parts)
}

// UnmarshalJSON reads content as a string or an array of parts.
func (r *ToolResult) UnmarshalJSON(b []byte) error {
	type plain ToolResult
	*r = ToolResult{}
	return unmarshalWithContent(b, (*plain)(r), &r.Content, &r.Parts)
}

// Validate checks tool_use_id and the content's parts.
func (r ToolResult) Validate() error {
	if r.ToolUseID == "" {
		return missing("tool_use_id")
	}
	return ValidateResultParts("content", r.Parts)
}

// Part returns r as a tool_result part.
func (r ToolResult) Part() Part {
	if r.Parts != nil {
		return ToolResultParts(r.ToolUseID, r.Parts, r.IsError)
	}
	return ToolResultPart(r.ToolUseID, r.Content, r.IsError)
}

// marshalWithContent and unmarshalWithContent are the JSON codec of the
// results whose content is a string or, on the wire, an array of parts
// (ToolResult, ToolCallResult), each called with the result's twin
// without methods ("plain").
//
// marshalWithContent marshals v (a struct with a "content" string field)
// with that field replaced by parts when parts is not nil.
func marshalWithContent(v any, parts []Part) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || parts == nil {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m["content"], err = json.Marshal(parts); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// unmarshalWithContent decodes b into v, a pointer to a struct with a
// "content" string field, and a content that is an array of parts into
// *parts, their text into *content. A string content, the common case,
// is decoded in one pass; any other content fails it with a type error
// on "content", and the rest of b is decoded again without it.
func unmarshalWithContent(b []byte, v any, content *string, parts *[]Part) error {
	err := json.Unmarshal(b, v)
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Field != "content" {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	var raw json.RawMessage
	for k, c := range m {
		if strings.EqualFold(k, "content") { // as encoding/json matches keys
			raw = c
			delete(m, k)
		}
	}
	rest, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(rest, v); err != nil {
		return err
	}
	*content, *parts, err = decodeContent(raw)
	return err
}

// unwrapPlain drops the embedded "plain" struct of the UnmarshalJSON
// methods above from the field path of a type error, so that it names the
// wire field.
func unwrapPlain(err error) error {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		cp := *te
		cp.Field = strings.TrimPrefix(strings.ReplaceAll(cp.Field, ".plain.", "."), "plain.")
		return &cp
	}
	return err
}

// decodeContent reads a "content" that is a string or an array of parts.
func decodeContent(raw json.RawMessage) (string, []Part, error) {
	c := bytes.TrimSpace(raw)
	switch {
	case len(c) == 0 || string(c) == "null":
		return "", nil, nil
	case c[0] == '"':
		var s string
		err := json.Unmarshal(c, &s)
		return s, nil, err
	case c[0] == '[':
		parts := []Part{}
		if err := json.Unmarshal(c, &parts); err != nil {
			return "", nil, prefixJSONField("content", err)
		}
		return PartsText(parts), parts, nil
	}
	return "", nil, &FieldError{Field: "content", Problem: "must be a string or an array of parts"}
}
