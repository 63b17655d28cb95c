package ingest

import (
	"errors"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
)

// FuzzParseRequest: whatever arrives, parseRequest returns either a request
// that validates or an *Error with a code and a message, never a panic.
func FuzzParseRequest(f *testing.F) {
	valid := `{"request_id":"r1","model":"openai:gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	f.Add(true, valid)
	f.Add(true, `{"request_id":"r1","model":"openai:gpt-4o"}`)
	f.Add(true, `{"request_id":"a.b","model":"x","messages":[]}`)
	f.Add(true, `{"request_id":"r","model":"anthropic:c","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{}}]}],"tools":[{"name":"f","input_schema":{}}]}`)
	f.Add(true, `[]`)
	f.Add(true, ``)
	f.Add(false, `{"specversion":"1.0","id":"1","source":"/s","type":"llmw.llm.complete","data":`+valid+`}`)
	f.Add(false, `{"specversion":"1.0","id":"1","source":"/s","type":"other","data":{}}`)
	f.Add(false, `{"specversion":"0.3"}`)
	f.Add(false, `not json`)
	f.Fuzz(func(t *testing.T, binary bool, body string) {
		var h map[string][]string
		if binary {
			env := events.Envelope{ID: "1", Source: "/s", Type: events.TypeLLMComplete}
			h = env.BinaryHeader()
		}
		r, e := parseRequest(h, []byte(body), 1<<20)
		switch {
		case e != nil && r != nil:
			t.Fatal("both a request and an error")
		case e != nil:
			if e.Code == 0 || e.Message == "" || e.Kind == "" {
				t.Fatalf("incomplete error %+v", e)
			}
			if !errors.Is(e, ErrInvalidRequest) {
				t.Fatalf("error %v is not ErrInvalidRequest", e)
			}
		case r == nil:
			t.Fatal("neither a request nor an error")
		default:
			if err := r.req.Validate(); err != nil {
				t.Fatalf("accepted an invalid request: %v", err)
			}
			if r.provider == "" || r.model == "" {
				t.Fatalf("accepted model %q", r.req.Model)
			}
		}
	})
}

func TestParseRequestOversize(t *testing.T) {
	_, e := parseRequest(nil, make([]byte, 11), 10)
	if e == nil || e.Code != 413 || !errors.Is(e, ErrPayloadTooLarge) {
		t.Fatalf("%v", e)
	}
}
