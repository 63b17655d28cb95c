package events_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
)

// A 1×1 PNG's first bytes (the PNG signature of RFC 2083 §3.1 and the
// IHDR chunk), base64: what a client sends.
const pngB64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

func TestMediaPartValidation(t *testing.T) {
	cases := []struct {
		name, part, field, problem string
	}{
		{"png", `{"type":"image","media_type":"image/png","data":"` + pngB64 + `"}`, "", ""},
		{"url", `{"type":"image","media_type":"image/jpeg","url":"https://example.com/a.jpg"}`, "", ""},
		{"ref", `{"type":"file","media_type":"application/pdf","ref":"sha256:` + strings.Repeat("a", 64) + `","size":5}`, "", ""},
		{"pdf", `{"type":"file","media_type":"application/pdf","filename":"a.pdf","data":"JVBERi0xLjcK"}`, "", ""}, // "%PDF-1.7\n"
		{"text", `{"type":"file","media_type":"text/plain","data":"aGVsbG8="}`, "", ""},
		{"not base64", `{"type":"image","media_type":"image/png","data":"%%%"}`, "messages[0].content[0].data", "base64"},
		{"png claimed jpeg", `{"type":"image","media_type":"image/jpeg","data":"` + pngB64 + `"}`, "messages[0].content[0].data", "holds image/png, not image/jpeg"},
		{"text claimed pdf", `{"type":"file","media_type":"application/pdf","data":"aGVsbG8="}`, "messages[0].content[0].data", "holds text"},
		{"http url", `{"type":"image","media_type":"image/png","url":"http://example.com/a.png"}`, "messages[0].content[0].url", "https"},
		{"file url", `{"type":"file","media_type":"application/pdf","url":"file:///etc/passwd"}`, "messages[0].content[0].url", ""},
		{"two sources", `{"type":"image","media_type":"image/png","data":"` + pngB64 + `","url":"https://x.org/a.png"}`, "messages[0].content[0].data", "exactly one"},
		{"no source", `{"type":"image","media_type":"image/png"}`, "messages[0].content[0].data", "exactly one"},
		{"no media type", `{"type":"image","data":"` + pngB64 + `"}`, "messages[0].content[0].media_type", "required"},
		{"svg", `{"type":"image","media_type":"image/svg+xml","url":"https://x.org/a.svg"}`, "messages[0].content[0].media_type", "image/png"},
		{"bad ref", `{"type":"file","media_type":"application/pdf","ref":"sha256:xyz"}`, "messages[0].content[0].ref", "sha256"},
		{"tool use in result", `{"type":"tool_result","tool_use_id":"c","content":[{"type":"tool_use","id":"x","name":"n","input":{}}]}`, "messages[0].content[0].content[0].type", "text, image or file"},
		{"bad image in result", `{"type":"tool_result","tool_use_id":"c","content":[{"type":"image","media_type":"image/gif","data":"` + pngB64 + `"}]}`, "messages[0].content[0].content[0].data", "not image/gif"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := `{"turn_id":"t","model":"a:b","messages":[{"role":"user","content":[` + c.part + `]}]}`
			_, err := events.Decode[events.TurnRequest]([]byte(body))
			if c.field == "" {
				if err != nil {
					t.Fatalf("valid part refused: %v", err)
				}
				return
			}
			var fe *events.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, events.ErrInvalid) {
				t.Fatalf("error %v, want a FieldError", err)
			}
			if fe.Field != c.field || !strings.Contains(fe.Problem, c.problem) {
				t.Fatalf("field %q problem %q, want %q containing %q", fe.Field, fe.Problem, c.field, c.problem)
			}
		})
	}
}

// A tool result's content in array form survives encoding both ways, and
// its text is readable as Content.
func TestToolResultPartsRoundTrip(t *testing.T) {
	in := `{"role":"tool","content":[{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"a "},{"type":"image","media_type":"image/png","data":"` + pngB64 + `"},{"type":"text","text":"b"}],"is_error":false}]}`
	var m events.Message
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	p := m.Content[0]
	if p.Content != "a b" || len(p.Parts) != 3 || p.Parts[1].MediaType != "image/png" {
		t.Fatalf("decoded %+v", p)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	_ = json.Unmarshal([]byte(in), &want)
	_ = json.Unmarshal(out, &got)
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("re-encoded\n%s\nwant\n%s", out, in)
	}
	r := events.ToolCallResult{CallID: "c1", Name: "shot", Parts: p.Parts, Content: p.Content}
	b, _ := json.Marshal(r)
	var back events.ToolCallResult
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back.Parts, p.Parts) || back.Content != "a b" {
		t.Fatalf("ToolCallResult round trip: %s -> %+v, %v", b, back, err)
	}
	if !strings.Contains(string(b), `"content":[{"type":"text"`) {
		t.Fatalf("ToolCallResult content not written as parts: %s", b)
	}
}

// FuzzDecodeParts: a message that decodes and validates re-encodes to one
// that decodes to the same message.
func FuzzDecodeParts(f *testing.F) {
	f.Add(`{"role":"user","content":[{"type":"image","media_type":"image/png","data":"` + pngB64 + `"}]}`)
	f.Add(`{"role":"user","content":[{"type":"file","media_type":"application/pdf","filename":"a.pdf","url":"https://x.org/a.pdf"}]}`)
	f.Add(`{"role":"tool","content":[{"type":"tool_result","tool_use_id":"c","content":[{"type":"text","text":"x"},{"type":"file","media_type":"text/plain","ref":"sha256:` + strings.Repeat("0", 64) + `","size":3}]}]}`)
	f.Add(`{"role":"tool","content":[{"type":"tool_result","tool_use_id":"c","content":[]}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		var m events.Message
		if json.Unmarshal([]byte(s), &m) != nil || m.Validate() != nil {
			return
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("valid message does not encode: %v", err)
		}
		var back events.Message
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("re-decode %s: %v", b, err)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("re-decoded message invalid: %v", err)
		}
		b2, _ := json.Marshal(back)
		if string(b) != string(b2) {
			t.Fatalf("not stable:\n%s\n%s", b, b2)
		}
	})
}

// A tool result, as hooks and transcripts see it (ToolResult) and as
// llmw.tool.result carries it (ToolCallResult), reads its content alike
// (docs/protocol.md §6, §7: a string or an array of parts), names a wrong
// field by its wire name, and keeps nothing of the value it decodes into.
func TestToolResultsDecodeContentAlike(t *testing.T) {
	decoders := map[string]func(string) (content string, parts []events.Part, isError bool, err error){
		"ToolResult": func(s string) (string, []events.Part, bool, error) {
			r := events.ToolResult{ToolUseID: "old", Content: "old", Parts: []events.Part{events.TextPart("old")}, IsError: true}
			err := json.Unmarshal([]byte(`{"tool_use_id":"c1",`+s+`}`), &r)
			if err == nil && r.ToolUseID != "c1" {
				t.Errorf("ToolResult tool_use_id %q, want c1", r.ToolUseID)
			}
			return r.Content, r.Parts, r.IsError, err
		},
		"ToolCallResult": func(s string) (string, []events.Part, bool, error) {
			r := events.ToolCallResult{CallID: "old", Content: "old", Parts: []events.Part{events.TextPart("old")}, IsError: true, DurationMS: 9}
			err := json.Unmarshal([]byte(`{"call_id":"c1","name":"shot",`+s+`}`), &r)
			if err == nil && (r.CallID != "c1" || r.Name != "shot" || r.DurationMS != 0) {
				t.Errorf("ToolCallResult %+v, want call_id c1, name shot, no duration", r)
			}
			return r.Content, r.Parts, r.IsError, err
		},
	}
	image := `{"type":"image","media_type":"image/png","data":"` + pngB64 + `"}`
	cases := []struct {
		name, fields string
		content      string
		parts        int
		isError      bool
		errField     string // the field a decoding error names
	}{
		{"string", `"content":"ok","is_error":false`, "ok", 0, false, ""},
		{"parts", `"content":[{"type":"text","text":"a "},` + image + `,{"type":"text","text":"b"}],"is_error":true`, "a b", 3, true, ""},
		{"parts before the other fields", `"is_error":true,"content":[{"type":"text","text":"x"}]`, "x", 1, true, ""},
		{"no content", `"is_error":false`, "", 0, false, ""},
		{"null content", `"content":null`, "", 0, false, ""},
		{"number content", `"content":5`, "", 0, false, "content"},
		{"a part of the wrong type", `"content":[{"type":"text","text":5}]`, "", 0, false, "content"},
		{"parts and a wrong field", `"content":[{"type":"text","text":"x"}],"is_error":"yes"`, "", 0, false, "is_error"},
		{"a wrong field and parts", `"is_error":"yes","content":[{"type":"text","text":"x"}]`, "", 0, false, "is_error"},
	}
	for typ, decode := range decoders {
		for _, c := range cases {
			t.Run(typ+"/"+c.name, func(t *testing.T) {
				content, parts, isError, err := decode(c.fields)
				if c.errField != "" {
					if err == nil || !strings.Contains(err.Error(), c.errField) {
						t.Fatalf("error %v, want one naming %q", err, c.errField)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if content != c.content || len(parts) != c.parts || isError != c.isError {
					t.Fatalf("content %q, %d parts, is_error %v; want %q, %d, %v", content, len(parts), isError, c.content, c.parts, c.isError)
				}
			})
		}
	}
}
