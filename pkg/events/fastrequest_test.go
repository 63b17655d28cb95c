package events

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"testing"
)

// slowCompletion decodes as Decode did before the fast path: encoding/json.
func slowCompletion(t testing.TB, b []byte) (CompletionRequest, error) {
	t.Helper()
	var r CompletionRequest
	err := Unmarshal(b, &r)
	return r, err
}

func fastSeeds() [][]byte {
	temp := 0.25
	reqs := []*CompletionRequest{
		{RequestID: "r1", Model: "openai:gpt", Messages: []Message{UserText("hi")}},
		{RequestID: "r2", Model: "anthropic:c", System: "be \"brief\" <b>\n", StreamGroup: "g1", MaxTokens: 100, Temperature: &temp,
			Thinking: &ThinkingConfig{BudgetTokens: 1024},
			Tools:    []ToolDefinition{{Name: "echo", Description: "d", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}},
			Messages: []Message{
				UserText("caf\u00e9 \U0001F600 \u2028 tab\t"),
				{Role: RoleAssistant, Content: []Part{
					ThinkingPart("hmm", "sig"),
					{Type: PartThinking, Signature: "opaque", Redacted: true},
					{Type: PartText, Text: "t", Signature: "gemini"},
					ToolUsePart("call_1", "echo", json.RawMessage(`{"s":"a \"}\" ]","n":[1,{"x":null}]}`)),
					ToolUsePart("call_2", "noargs", nil),
				}},
				{Role: RoleTool, Content: []Part{ToolResultPart("call_1", "ok", false), ToolResultPart("call_2", "", true)}},
				{Role: RoleUser, Content: []Part{}},
				{Role: RoleUser},
			}},
		{RequestID: "r3", Model: "a:b", Messages: []Message{}},
		{RequestID: "r4", Model: "a:b"},
	}
	var out [][]byte
	for _, r := range reqs {
		b, err := MarshalData(r)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return append(out,
		[]byte(`{"request_id":"r","model":"a:b","messages":[{"role":"user","content":"as a string"}]}`),
		[]byte(`{"request_id":"r","model":"a:b","messages":[{"role":"user","content":[{"type":"image","url":"x"}]}]}`),
		[]byte(`{"request_id":"r","model":"a:b","messages":[],"messages":[{"role":"user","content":[]}]}`),
		[]byte(`{"request_id":"r","model":"a:b","messages":[],"Messages":null}`),
		[]byte(`{"request_id":"r","model":"a:b","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"n","input":{"a":1}]}}]}`),
		[]byte(`{"request_id":"r","model":"a:b","messages":[],"tools":[{"name":"x"}],}`),
		[]byte(`{"request_id":"r\ud800","model":"a:b","messages":[]}`),
	)
}

// TestDecodeCompletionFastAgrees: the requests MarshalData writes take
// the fast path, and decode to what encoding/json makes of them.
func TestDecodeCompletionFastAgrees(t *testing.T) {
	for i, b := range fastSeeds()[:4] {
		fast, ok := decodeCompletionFast(b)
		if !ok {
			t.Fatalf("request %d does not take the fast path: %s", i, b)
		}
		slow, err := slowCompletion(t, b)
		if (err != nil) != (i == 1 || i == 3) { // 1 has a message without content, 3 no messages
			t.Fatalf("request %d: %v", i, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("request %d:\nfast %+v\nslow %+v", i, fast, slow)
		}
		got, gerr := Decode[CompletionRequest](b)
		if fmt.Sprint(gerr) != fmt.Sprint(err) || !reflect.DeepEqual(got, slow) {
			t.Fatalf("request %d: Decode = %+v, %v; encoding/json %+v, %v", i, got, gerr, slow, err)
		}
	}
	// What the fast path does not read goes to encoding/json, errors
	// included.
	if _, ok := decodeCompletionFast([]byte(`{"request_id":"r","model":"a:b","messages":[{"role":"user","content":"s"}]}`)); ok {
		t.Fatal("a content string took the fast path")
	}
	if _, err := Decode[CompletionRequest]([]byte(`{"request_id":"r","model":"a:b","messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`)); err == nil {
		t.Fatal("a number as text: no error")
	}
}

func FuzzDecodeCompletionFast(f *testing.F) {
	for _, b := range fastSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := decodeCompletionFast(b)
		if !ok {
			return
		}
		slow, err := slowCompletion(t, b)
		if err != nil && !reflect.DeepEqual(err, slow.Validate()) {
			// The fast path does not validate: an error of encoding/json
			// other than the request's own validation is a disagreement.
			if fe := fast.Validate(); fe == nil || fe.Error() != err.Error() {
				t.Fatalf("fast path accepted %q (validation: %v), encoding/json: %v", b, fe, err)
			}
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\nfast %+v\nslow %+v", b, fast, slow)
		}
	})
}

// BenchmarkDecodeCompletion decodes the completion request of the tenth
// step of a four-tool turn (21 messages, 80 parts): Decode (the fast
// path) against encoding/json (Unmarshal, the decode before it).
// benchSteps is the step whose request BenchmarkDecodeCompletion decodes.
var benchSteps = 10

func BenchmarkDecodeCompletion(b *testing.B) {
	msgs := []Message{UserText("go")}
	for n := 0; n < benchSteps*4; n += 4 {
		call, res := Message{Role: RoleAssistant}, Message{Role: RoleTool}
		for i := n; i < n+4; i++ {
			id := "call_" + strconv.Itoa(i)
			call.Content = append(call.Content, ToolUsePart(id, "echo", json.RawMessage(`{"n":`+strconv.Itoa(i)+`}`)))
			res.Content = append(res.Content, ToolResultPart(id, strconv.Itoa(i), false))
		}
		msgs = append(msgs, call, res)
	}
	data, err := MarshalData(&CompletionRequest{RequestID: "r1", Model: "test:m", StreamGroup: "g",
		Tools: []ToolDefinition{{Name: "echo", Description: "echoes n", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}}, Messages: msgs})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"Decode", func() error { _, err := Decode[CompletionRequest](data); return err }},
		{"encoding-json", func() error { var r CompletionRequest; return Unmarshal(data, &r) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := c.f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
