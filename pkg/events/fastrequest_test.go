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
					{Type: PartThinking, Thinking: "o", Signature: "s", Redacted: true, Origin: "anthropic"},
					{Type: PartText, Text: "t", Signature: "g", Origin: "gemini"},
					{Type: PartToolUse, ID: "call_0", Name: "echo", Input: json.RawMessage(`{}`), Signature: "s", Origin: "openai-responses"},
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
	msgs := fastTranscript(benchSteps)
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

// sessionLike is a payload with a transcript after scalar fields, as
// turn.Session is.
type sessionLike struct {
	SessionID string    `json:"session_id"`
	Messages  []Message `json:"messages"`
	LastTurn  string    `json:"last_turn,omitempty"`
	N         int       `json:"n"`
}

func sessionSeeds(t testing.TB) [][]byte {
	v := sessionLike{SessionID: "s\"1", LastTurn: "t9", N: 3, Messages: fastTranscript(3)}
	b, err := MarshalWithMessages(&sessionLike{SessionID: v.SessionID, LastTurn: v.LastTurn, N: v.N}, v.Messages)
	if err != nil {
		t.Fatal(err)
	}
	return [][]byte{
		b,
		[]byte(`{"session_id":"s","messages":[]}`),
		[]byte(`{"messages":null,"n":1}`),
		[]byte(`{"session_id":"s","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"Messages":null}`),
		[]byte(`{"session_id":"s","messages":[{"role":"user","content":[]}],"MESSAGES":[{"role":"tool","content":null}]}`),
		[]byte(`{"x":{"messages":[]},"messages":[{"role":"user","content":null}]}`),
		[]byte(`{"session_id":"s\"messages\":","messages":[]}`),
		[]byte(`{"session_id":"s","messages":[],}`),
		[]byte(`{"session_id":"s", "messages":[]}`),
		[]byte(`{"n":"not a number","messages":[]}`),
	}
}

func fastTranscript(steps int) []Message {
	msgs := []Message{UserText("go")}
	for n := 0; n < steps*4; n += 4 {
		call, res := Message{Role: RoleAssistant}, Message{Role: RoleTool}
		for i := n; i < n+4; i++ {
			id := "call_" + strconv.Itoa(i)
			call.Content = append(call.Content, ToolUsePart(id, "echo", json.RawMessage(`{"n":`+strconv.Itoa(i)+`}`)))
			res.Content = append(res.Content, ToolResultPart(id, strconv.Itoa(i), false))
		}
		msgs = append(msgs, call, res)
	}
	return msgs
}

// TestUnmarshalWithMessagesIsJSONUnmarshal: the session a turn reads
// decodes to what encoding/json makes of it, whatever its form.
func TestUnmarshalWithMessagesIsJSONUnmarshal(t *testing.T) {
	for i, b := range sessionSeeds(t) {
		var fast, slow sessionLike
		ferr := UnmarshalWithMessages(b, &fast, &fast.Messages)
		serr := json.Unmarshal(b, &slow)
		if (ferr == nil) != (serr == nil) || !reflect.DeepEqual(fast, slow) {
			t.Errorf("seed %d %s:\nfast %+v, %v\nslow %+v, %v", i, b, fast, ferr, slow, serr)
		}
	}
}

func FuzzUnmarshalWithMessages(f *testing.F) {
	for _, b := range sessionSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, slow sessionLike
		ferr := UnmarshalWithMessages(b, &fast, &fast.Messages)
		serr := json.Unmarshal(b, &slow)
		if (ferr == nil) != (serr == nil) {
			t.Fatalf("%q: fast error %v, encoding/json error %v", b, ferr, serr)
		}
		if serr == nil && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\nfast %+v\nslow %+v", b, fast, slow)
		}
	})
}

// BenchmarkUnmarshalSession reads a session of 500 messages (the
// transcript of 25 ten-step four-tool turns), as every turn of the session
// does when it starts: UnmarshalWithMessages against encoding/json.
func BenchmarkUnmarshalSession(b *testing.B) {
	msgs := fastTranscript(250)[:500]
	data, err := MarshalWithMessages(&sessionLike{SessionID: "s", LastTurn: "t"}, msgs)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		f    func(*sessionLike) error
	}{
		{"UnmarshalWithMessages", func(s *sessionLike) error { return UnmarshalWithMessages(data, s, &s.Messages) }},
		{"encoding-json", func(s *sessionLike) error { return json.Unmarshal(data, s) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var s sessionLike
				if err := c.f(&s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
