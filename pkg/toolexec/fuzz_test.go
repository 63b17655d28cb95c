package toolexec_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

// FuzzDecodeToolResult: whatever arrives on a result subject, decoding
// returns a result or an error, never panics, and a decoded result has
// the required fields.
func FuzzDecodeToolResult(f *testing.F) {
	f.Add("llmw.tool.result", []byte(`{"call_id":"c1","name":"x","content":"ok","is_error":false}`))
	f.Add("llmw.tool.result", []byte(`{"call_id":"","name":"x"}`))
	f.Add("llmw.tool.call", []byte(`{}`))
	f.Add("", []byte(`{"specversion":"1.0","id":"1","source":"s","type":"llmw.tool.result","data":{"call_id":"c","name":"n"}}`))
	f.Add("llmw.tool.result", []byte(`nope`))
	f.Fuzz(func(t *testing.T, typ string, body []byte) {
		h := nats.Header{}
		if typ != "" {
			env := events.Envelope{ID: "1", Source: "/s", Type: typ}
			env.WriteBinaryHeader(h)
		}
		r, err := toolexec.DecodeResult(h, body)
		if err == nil && (r.CallID == "" || r.Name == "") {
			t.Fatalf("decoded %+v without required fields", r)
		}
	})
}
