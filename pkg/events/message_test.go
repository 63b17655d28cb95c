package events_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
)

// reflected is a message as encoding/json writes it without
// Message.MarshalJSON: the encoding messages had before it, which the
// one-pass encoding must reproduce byte for byte.
type reflected struct {
	Role    events.Role   `json:"role"`
	Content []events.Part `json:"content"`
}

func reflectedJSON(t testing.TB, m events.Message) []byte {
	t.Helper()
	b, err := json.Marshal(reflected{m.Role, m.Content})
	if err != nil {
		t.Fatalf("reflected encoding: %v", err)
	}
	return b
}

func TestMessageJSONIsTheReflectedEncoding(t *testing.T) {
	msgs := []events.Message{
		events.UserText("hi <b>&</b> \u2028 \"quoted\" \\ \n\t"),
		{Role: events.RoleUser},                                // content null
		{Role: events.RoleAssistant, Content: []events.Part{}}, // content []
		{Role: "r\xffole", Content: []events.Part{events.TextPart("bad \xfe utf-8")}},
		{Role: events.RoleAssistant, Content: []events.Part{
			events.ThinkingPart("hmm", "sig"),
			{Type: events.PartThinking, Signature: "opaque", Redacted: true},
			{Type: events.PartText, Text: "t", Signature: "gemini-sig"},
			events.ToolUsePart("call_1", "get_weather", json.RawMessage(` {"city": "Paris <&>"} `)),
			events.ToolUsePart("call_2", "noargs", nil),
		}},
		{Role: events.RoleTool, Content: []events.Part{
			events.ToolResultPart("call_1", "18°C", false),
			events.ToolResultPart("call_2", "", true),
		}},
		{Role: events.RoleUser, Content: []events.Part{{Type: "image", Text: "x", ID: "i"}}}, // an unknown type keeps its fields
	}
	for i, m := range msgs {
		got, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if want := reflectedJSON(t, m); !bytes.Equal(got, want) {
			t.Errorf("message %d:\ngot  %s\nwant %s", i, got, want)
		}
		// Inside a transcript, as a checkpoint or request carries it.
		got, _ = json.Marshal([]events.Message{m, m})
		want, _ := json.Marshal([]reflected{{m.Role, m.Content}, {m.Role, m.Content}})
		if !bytes.Equal(got, want) {
			t.Errorf("message %d in a list:\ngot  %s\nwant %s", i, got, want)
		}
	}
}

func TestMessageJSONRefusesInvalidToolInput(t *testing.T) {
	m := events.Message{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("call_9", "n", json.RawMessage(`{"a":`))}}
	if _, err := json.Marshal(m); err == nil || !bytes.Contains([]byte(err.Error()), []byte("call_9")) {
		t.Fatalf("err = %v, want one naming the call", err)
	}
}

// FuzzMessageJSON: a message that decodes encodes as encoding/json's
// reflection would, and decodes back to itself.
func FuzzMessageJSON(f *testing.F) {
	f.Add([]byte(`{"role":"user","content":"hi"}`))
	f.Add([]byte(`{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"n","input":{"a":[1,"<"]}},{"type":"text","text":"\u00e9\ud83d\ude00"}]}`))
	f.Add([]byte(`{"role":"tool","content":[{"type":"tool_result","tool_use_id":"c","content":"x","is_error":true}]}`))
	f.Add([]byte(`{"role":"user","content":[{"type":"thinking","thinking":"a","signature":"s","redacted":true,"text":"ignored"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m events.Message
		if json.Unmarshal(data, &m) != nil {
			return
		}
		got, err := json.Marshal(m)
		want, werr := json.Marshal(reflected{m.Role, m.Content})
		if (err == nil) != (werr == nil) {
			t.Fatalf("one-pass error %v, reflected error %v", err, werr)
		}
		if err != nil {
			return
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		var back events.Message
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("re-decode %s: %v", got, err)
		}
		again, _ := json.Marshal(back)
		if !bytes.Equal(again, got) {
			t.Fatalf("not stable: %s became %s", got, again)
		}
	})
}

// transcript is the conversation of a turn after steps four-tool steps.
var transcript = events.FastTranscript

// BenchmarkMarshalTranscript encodes the transcript of a ten-step
// four-tool turn (21 messages, 80 parts), as every checkpoint and
// completion request carries it: encoding/json's reflection over the
// messages (the encoding before Message.MarshalJSON), json.Marshal with
// Message.MarshalJSON (encoding/json still validates and re-escapes what
// it returns), and AppendMessages, which checkpoints and completion
// requests use (MarshalWithMessages).
func BenchmarkMarshalTranscript(b *testing.B) {
	msgs := transcript(10)
	plain := make([]reflected, len(msgs))
	for i, m := range msgs {
		plain[i] = reflected{m.Role, m.Content}
	}
	if !bytes.Equal(must(json.Marshal(msgs)), must(json.Marshal(plain))) ||
		!bytes.Equal(must(events.AppendMessages(nil, msgs)), must(json.Marshal(plain))) {
		b.Fatal("the encodings differ")
	}
	marshal := func(v any) func() error { return func() error { _, err := json.Marshal(v); return err } }
	var buf []byte
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"reflected", marshal(plain)},
		{"json.Marshal", marshal(msgs)},
		{"AppendMessages", func() (err error) { buf, err = events.AppendMessages(buf[:0], msgs); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// decodeAny decodes JSON into a generic value, so that two encodings that
// differ only in key order or escaping compare equal.
func decodeAny(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func TestCompletionRequestDataCarriesTheTranscript(t *testing.T) {
	temp := 0.5
	req := &events.CompletionRequest{
		RequestID: "r1", Model: "anthropic:m", System: `say "messages":null <now>`,
		Messages:  append(transcript(2), events.UserText(`"messages":null`)),
		Tools:     []events.ToolDefinition{{Name: "echo", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		MaxTokens: 9, Temperature: &temp, StreamGroup: "g",
	}
	got, err := events.MarshalData(req)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(req) // encoding/json over the whole request
	if !reflect.DeepEqual(decodeAny(t, got), decodeAny(t, want)) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	back, err := events.Decode[events.CompletionRequest](got)
	if err != nil || !reflect.DeepEqual(back.Messages, req.Messages) {
		t.Fatalf("decoded %+v, %v", back.Messages, err)
	}
	// No messages at all stays "messages":null (the request is invalid,
	// and ingest says so).
	got, _ = events.MarshalData(&events.CompletionRequest{RequestID: "r2", Model: "a:b"})
	if !bytes.Contains(got, []byte(`"messages":null`)) {
		t.Fatalf("nil messages: %s", got)
	}
	if _, err := events.MarshalWithMessages(struct{ A int }{1}, nil); err == nil {
		t.Fatal("a payload without a messages field: no error")
	}
}
