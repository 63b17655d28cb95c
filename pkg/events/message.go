package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
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
}

// Part is one content part. Which fields are meaningful depends on Type:
//
//	text:        Text (Signature: opaque provider data, e.g. a Gemini thought signature)
//	thinking:    Thinking, Signature, Redacted
//	tool_use:    ID, Name, Input (Signature as for text)
//	tool_result: ToolUseID, Content, IsError
//
// MarshalJSON writes only the fields of the part's type.
type Part struct {
	Type      PartType        `json:"type" jsonschema:"enum=text,enum=thinking,enum=tool_use,enum=tool_result"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	Redacted  bool            `json:"redacted,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
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
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	m.Role = w.Role
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
// each part as Part.AppendJSON writes it (content null for nil).
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
	return 48 + len(p.Text) + len(p.Thinking) + len(p.Content) + len(p.Input) + len(p.Signature) + len(p.ID) + len(p.Name) + len(p.ToolUseID)
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
	case PartThinking:
		b = append(b, `,"thinking":`...)
		b = AppendJSONString(b, p.Thinking)
		b = appendOptString(b, "signature", p.Signature)
		if p.Redacted {
			b = append(b, `,"redacted":true`...)
		}
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
	case PartToolResult:
		b = append(b, `,"tool_use_id":`...)
		b = AppendJSONString(b, p.ToolUseID)
		b = append(b, `,"content":`...)
		b = AppendJSONString(b, p.Content)
		b = append(b, `,"is_error":`...)
		b = strconv.AppendBool(b, p.IsError)
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
	default:
		return invalidf("type", "must be text, thinking, tool_use or tool_result, got %q", p.Type)
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
// (docs/protocol.md §7: {"tool_use_id", "content", "is_error"}).
type ToolResult struct {
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error"`
}

// Validate checks tool_use_id.
func (r ToolResult) Validate() error {
	if r.ToolUseID == "" {
		return missing("tool_use_id")
	}
	return nil
}

// Part returns r as a tool_result part.
func (r ToolResult) Part() Part { return ToolResultPart(r.ToolUseID, r.Content, r.IsError) }
