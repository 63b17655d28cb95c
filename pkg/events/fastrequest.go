package events

import (
	"bytes"
	"encoding/json"
)

// decodeCompletionFast reads a llmw.llm.complete request in the form
// MarshalData writes it — request_id, model, system, then the messages in
// the exact form Message.AppendJSON writes, no whitespace — without
// encoding/json for the transcript. The request carries the whole
// conversation at every step, and encoding/json (a validating scan of
// the whole body, then Message.UnmarshalJSON's second and third passes
// over each message) would make ingest's decode of it grow to a quarter
// of a millisecond by the tenth step of a four-tool turn. What follows the
// messages (tools, bounds, thinking, stream group: a size that does not
// grow with the turn) is decoded by encoding/json. Anything
// else — whitespace, another key order, a content string, a part type it
// does not know, a string it would not decode exactly as encoding/json
// does (unquoteJSON) — returns ok == false, and the caller decodes the
// request with encoding/json; FuzzDecodeCompletionFast checks that both
// agree. The request is not validated.
func decodeCompletionFast(b []byte) (req CompletionRequest, ok bool) {
	r := fastReader{b: b}
	if !r.lit(`{"request_id":`) {
		return req, false
	}
	if req.RequestID, ok = r.str(); !ok || !r.lit(`,"model":`) {
		return req, false
	}
	if req.Model, ok = r.str(); !ok {
		return req, false
	}
	if r.lit(`,"system":`) {
		if req.System, ok = r.str(); !ok {
			return req, false
		}
	}
	if !r.lit(`,"messages":`) {
		return req, false
	}
	if !r.lit("null") {
		if req.Messages, ok = r.messages(); !ok {
			return req, false
		}
	}
	rest := b[r.i:]
	switch {
	case len(rest) == 1 && rest[0] == '}':
		return req, true
	case len(rest) < 2 || rest[0] != ',' || rest[1] != '"': // a key must follow
		return req, false
	}
	// The rest of the object, as an object of its own: {"tools":…}.
	tail := make([]byte, len(rest))
	tail[0] = '{'
	copy(tail[1:], rest[1:])
	if json.Unmarshal(tail, &req) != nil {
		return req, false
	}
	return req, true
}

// fastReader reads JSON in one exact form: lit matches the next bytes,
// str decodes the string that starts there.
type fastReader struct {
	b []byte
	i int
}

func (r *fastReader) lit(s string) bool {
	if !hasPrefix(r.b[r.i:], s) {
		return false
	}
	r.i += len(s)
	return true
}

func (r *fastReader) str() (string, bool) {
	if r.i >= len(r.b) || r.b[r.i] != '"' {
		return "", false
	}
	s, end, ok := unquoteJSON(r.b[r.i+1:])
	if !ok {
		return "", false
	}
	r.i += end + 2
	return s, true
}

// messages reads [{"role":…,"content":[…]|null},…].
func (r *fastReader) messages() ([]Message, bool) {
	if !r.lit("[") {
		return nil, false
	}
	msgs := []Message{}
	if r.lit("]") {
		return msgs, true
	}
	for {
		if !r.lit(`{"role":`) {
			return nil, false
		}
		role, ok := r.known(roles[:])
		if !ok || !r.lit(`,"content":`) {
			return nil, false
		}
		m := Message{Role: Role(role)}
		if !r.lit("null") {
			if m.Content, ok = r.parts(); !ok {
				return nil, false
			}
		}
		if !r.lit("}") {
			return nil, false
		}
		msgs = append(msgs, m)
		if r.lit("]") {
			return msgs, true
		}
		if !r.lit(",") {
			return nil, false
		}
	}
}

// parts reads the parts of a message, each in the form Part.AppendJSON
// writes for its type.
func (r *fastReader) parts() ([]Part, bool) {
	if !r.lit("[") {
		return nil, false
	}
	parts := []Part{}
	if r.lit("]") {
		return parts, true
	}
	for {
		if !r.lit(`{"type":`) {
			return nil, false
		}
		typ, ok := r.known(partTypes[:])
		if !ok {
			return nil, false
		}
		p := Part{Type: PartType(typ)}
		switch p.Type {
		case PartText:
			ok = r.field(`,"text":`, &p.Text) && r.optField(`,"signature":`, &p.Signature) && r.optField(`,"origin":`, &p.Origin)
		case PartThinking:
			ok = r.field(`,"thinking":`, &p.Thinking) && r.optField(`,"signature":`, &p.Signature)
			if ok && r.lit(`,"redacted":true`) {
				p.Redacted = true
			}
			ok = ok && r.optField(`,"origin":`, &p.Origin)
		case PartToolUse:
			ok = r.field(`,"id":`, &p.ID) && r.field(`,"name":`, &p.Name) && r.lit(`,"input":`)
			if ok {
				p.Input, ok = r.raw()
			}
			ok = ok && r.optField(`,"signature":`, &p.Signature) && r.optField(`,"origin":`, &p.Origin)
		case PartToolResult:
			ok = r.field(`,"tool_use_id":`, &p.ToolUseID) && r.field(`,"content":`, &p.Content)
			switch {
			case !ok:
			case r.lit(`,"is_error":true`):
				p.IsError = true
			default:
				ok = r.lit(`,"is_error":false`)
			}
		default:
			return nil, false
		}
		if !ok || !r.lit("}") {
			return nil, false
		}
		parts = append(parts, p)
		if r.lit("]") {
			return parts, true
		}
		if !r.lit(",") {
			return nil, false
		}
	}
}

// The roles and part types, quoted: known reads them without allocating.
var (
	roles     = [...]string{`"user"`, `"assistant"`, `"tool"`}
	partTypes = [...]string{`"text"`, `"tool_use"`, `"tool_result"`, `"thinking"`}
)

// known reads a string that is one of the quoted values, and returns it
// unquoted (a constant's bytes: no allocation per message or part).
func (r *fastReader) known(quoted []string) (string, bool) {
	for _, q := range quoted {
		if r.lit(q) {
			return q[1 : len(q)-1], true
		}
	}
	return "", false
}

func (r *fastReader) field(key string, v *string) bool {
	if !r.lit(key) {
		return false
	}
	s, ok := r.str()
	*v = s
	return ok
}

func (r *fastReader) optField(key string, v *string) bool {
	if !hasPrefix(r.b[r.i:], key) {
		return true
	}
	return r.field(key, v)
}

// raw reads a JSON object (a tool call's input) and returns a copy of its
// bytes, as json.RawMessage's decoding would. Strings are skipped by
// their quotes and escapes; the span is then checked with json.Valid.
func (r *fastReader) raw() (json.RawMessage, bool) {
	start := r.i
	if r.i >= len(r.b) || r.b[r.i] != '{' {
		return nil, false
	}
	depth := 0
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case '"':
			r.i++
			for r.i < len(r.b) && r.b[r.i] != '"' {
				if r.b[r.i] == '\\' {
					r.i++
				}
				r.i++
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				r.i++
				span := r.b[start:r.i]
				if !json.Valid(span) {
					return nil, false
				}
				return append(json.RawMessage(nil), span...), true
			}
		}
		r.i++
	}
	return nil, false
}

// UnmarshalWithMessages is json.Unmarshal(data, v) for a payload whose
// "messages" field follows scalar fields only, as MarshalWithMessages
// writes it (a session's transcript, which a turn of the session reads
// whole when it starts): msgs is the address of v's messages field. The
// transcript is read in one pass (the completion request's fast reader)
// when it is in the form Message.AppendJSON writes, and the rest of the
// object by encoding/json, with the "messages" member replaced by one no
// field can match; anything else, and a payload that sets the messages
// again under another spelling of the key, is decoded by encoding/json
// alone.
func UnmarshalWithMessages(data []byte, v any, msgs *[]Message) error {
	if key, value, ok := messagesKey(data); ok {
		r := fastReader{b: data, i: value}
		var m []Message
		if !r.lit("null") {
			m, ok = r.messages()
		}
		if ok {
			const placeholder = `"\u0000":null`
			rest := make([]byte, 0, key+len(placeholder)+len(data)-r.i)
			rest = append(append(append(rest, data[:key]...), placeholder...), data[r.i:]...)
			sentinel := make([]Message, 0, 1)
			*msgs = sentinel
			err := json.Unmarshal(rest, v)
			if err == nil && cap(*msgs) == 1 && len(*msgs) == 0 && &(*msgs)[:1][0] == &sentinel[:1][0] {
				*msgs = m
				return nil
			}
			*msgs = nil
		}
	}
	return json.Unmarshal(data, v)
}

// messagesKey returns where data's "messages" key and its value start,
// when data is an object whose members before that key have scalar values
// only (no object or array can hide another "messages" before it).
func messagesKey(data []byte) (key, value int, ok bool) {
	const name = `"messages":`
	i := bytes.Index(data, []byte(name))
	if i < 1 || data[0] != '{' || (data[i-1] != '{' && data[i-1] != ',') {
		return 0, 0, false
	}
	inString := false
	for j := 1; j < i; j++ {
		switch c := data[j]; {
		case inString && c == '\\':
			j++
		case c == '"':
			inString = !inString
		case !inString && (c == '{' || c == '['):
			return 0, 0, false
		}
	}
	if inString {
		return 0, 0, false
	}
	return i, i + len(name), true
}
