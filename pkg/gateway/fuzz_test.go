package gateway_test

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/gateway"
)

// The stream reader never panics, and every part it returns is a JSON
// object with the type it reports.
func FuzzStreamReader(f *testing.F) {
	f.Add("data: {\"type\":\"start\"}\n\ndata: [DONE]\n\n")
	f.Add(": keep-alive\n\ndata: {\"type\":\"text-delta\",\"id\":\"a\",\"delta\":\"x\"}\n\n")
	f.Add("data: {\"type\":\n\ndata: [DONE]")
	f.Add("event: x\ndata: {\"type\":\"a\"}\ndata: {}\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		r := gateway.NewStreamReader(io.NopCloser(strings.NewReader(s)))
		for range 1000 {
			typ, raw, err := r.Next()
			if err != nil {
				if errors.Is(err, gateway.ErrStreamEnded) {
					if _, _, err := r.Next(); !errors.Is(err, gateway.ErrStreamEnded) {
						t.Fatalf("after the end: %v", err)
					}
				}
				return
			}
			var head struct{ Type string }
			if json.Unmarshal(raw, &head) != nil || head.Type != typ || typ == "" {
				t.Fatalf("part %q reported as %q", raw, typ)
			}
		}
	})
}

// A part with any strings and any JSON values is written as valid JSON
// with its type.
func FuzzChunkJSON(f *testing.F) {
	f.Add("text-delta", "id", "d\u2028\"x", []byte(`{"a":1}`))
	f.Add("data-x", "", "", []byte(`not json`))
	f.Fuzz(func(t *testing.T, typ, id, delta string, raw []byte) {
		if !json.Valid(raw) {
			raw = nil
		}
		c := gateway.Chunk{Type: typ, ID: id, Delta: delta, ToolCallID: id, ErrorText: delta, Data: raw, Input: raw, Output: raw}
		b := c.AppendJSON(nil)
		var obj map[string]any
		if err := json.Unmarshal(b, &obj); err != nil {
			t.Fatalf("%q gives invalid JSON %s: %v", typ, b, err)
		}
		if obj["type"] != string([]rune(typ)) { // each invalid byte is one U+FFFD, as encoding/json writes it
			t.Fatalf("type %q written as %v", typ, obj["type"])
		}
	})
}
