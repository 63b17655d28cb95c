package ingest

import (
	"errors"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/cenats"
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

// FuzzJoinedDelta: whatever the pieces (escapes, control characters,
// invalid UTF-8, a multi-byte character split between two of them), the
// delta the publisher joins them into decodes to what a receiver
// assembles from the pieces sent one message each, and stays within
// MaxJoinedDelta unless it is a single piece.
func FuzzJoinedDelta(f *testing.F) {
	f.Add("The capital ", "is \"London\"\n", "\xe2\x82", "\xac", 0)
	f.Add("", "\\", "\u2028\t<b>&", "\xff", 1)
	f.Add("{\"a\":", "1}", "", "x", 2)
	f.Fuzz(func(t *testing.T, a, b, c, d string, kind int) {
		k := events.DeltaKind(uint(kind) % 3)
		p := &publisher{w: cenats.NewWriter(events.Envelope{Source: "/s"}, cenats.Options{})}
		var want strings.Builder
		joined := 0
		for i, piece := range []string{a, b, c, d} {
			d := events.BlockDelta{Index: 2, Kind: k, Content: piece}
			// What a receiver gets from this piece in a message of its own.
			own, err := events.DecodeStreamEvent(events.TypeLLMBlockDelta, d.AppendJSON(nil))
			if err != nil {
				t.Fatalf("piece %q alone: %v", piece, err)
			}
			if i == 0 {
				p.hold(d)
			} else if !p.join(d) {
				break // over MaxJoinedDelta: the rest would go in another message
			}
			joined++
			want.WriteString(own.(events.BlockDelta).Content)
		}
		data := append(p.held, '"', '}')
		ev, err := events.DecodeStreamEvent(events.TypeLLMBlockDelta, data)
		if err != nil {
			t.Fatalf("joined delta %q: %v", data, err)
		}
		got := ev.(events.BlockDelta)
		if got.Index != 2 || got.Kind != k || got.Content != want.String() {
			t.Fatalf("joined %d pieces into %+v, want content %q", joined, got, want.String())
		}
		if joined > 1 && len(data) > MaxJoinedDelta {
			t.Fatalf("joined delta of %d bytes, over MaxJoinedDelta", len(data))
		}
	})
}
