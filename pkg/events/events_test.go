package events_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
)

func TestStreamEventRoundTrip(t *testing.T) {
	cases := []events.Event{
		events.PingEvent{Timestamp: 1700000000123},
		events.UsageEvent{InputTokens: events.Int64(10), OutputTokens: events.Int64(0), ReasoningTokens: events.Int64(448)},
		events.StatusEvent{Status: events.StatusStarted},
		events.ErrorEvent{Code: "refusal", Message: "no"},
		events.BlockStart{Index: 2, BlockType: events.BlockToolUse, ID: "call_1", Name: "get_weather", Server: true},
		events.BlockStart{Index: 3, BlockType: events.BlockToolResult, ToolUseID: "srv_1"},
		events.TextDelta(0, "héllo \"world\"\n\u2028\x01"),
		events.ThinkingDelta(1, ""),
		events.InputJSONDelta(2, `{"city":`),
		events.BlockStop{Index: 1, BlockType: events.BlockThinking, Signature: "sig=="},
		events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn},
		events.BlockAbort{Index: 0, BlockType: events.BlockText, Reason: "cancelled"},
	}
	for _, ev := range cases {
		data, err := events.MarshalEvent(ev)
		if err != nil {
			t.Fatalf("%T: %v", ev, err)
		}
		if !json.Valid(data) {
			t.Fatalf("%T: invalid JSON %s", ev, data)
		}
		got, err := events.DecodeStreamEvent(ev.EventType(), data)
		if err != nil {
			t.Fatalf("%T: decode %s: %v", ev, data, err)
		}
		if !reflect.DeepEqual(got, ev) {
			t.Fatalf("round trip of %T:\n got  %#v\n want %#v", ev, got, ev)
		}
	}
}

// The wire shapes are docs/protocol.md §3's, written here by hand.
func TestStreamEventWireShape(t *testing.T) {
	cases := []struct {
		ev   events.Event
		want string
	}{
		{events.TextDelta(0, "Hi"), `{"index":0,"text":"Hi"}`},
		{events.ThinkingDelta(4, "hm"), `{"index":4,"thinking":"hm"}`},
		{events.InputJSONDelta(1, `{"a":1}`), `{"index":1,"input_json":"{\"a\":1}"}`},
		{events.BlockStop{Index: 0, BlockType: events.BlockText}, `{"index":0,"block_type":"text","stop_reason":null}`},
		{events.BlockStop{Index: 0, BlockType: events.BlockToolUse, StopReason: events.StopToolUse}, `{"index":0,"block_type":"tool_use","stop_reason":"tool_use"}`},
		{events.StatusEvent{Status: events.StatusCompleted}, `{"status":"completed"}`},
		{events.StatusEvent{Status: events.StatusCompleted, Model: "claude-haiku-4-5-20251001", ResponseID: "msg_1"}, `{"status":"completed","model":"claude-haiku-4-5-20251001","response_id":"msg_1"}`},
		{events.BlockStart{Index: 1, BlockType: events.BlockToolUse, ID: "c", Name: "n"}, `{"index":1,"block_type":"tool_use","id":"c","name":"n"}`},
	}
	for _, c := range cases {
		got, err := events.MarshalEvent(c.ev)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("%T: got %s, want %s", c.ev, got, c.want)
		}
	}
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\s", "\n\r\t\x00\x1f\x7f", "日本語", "\xff\xfe bad utf8", "\u2028\u2029", "<html>&"} {
		got := events.AppendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q: %s not valid JSON: %v", s, got, err)
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("%q: decodes to %q, encoding/json gives %q", s, back, wantBack)
		}
	}
}

func TestDecodeNamesTheField(t *testing.T) {
	cases := []struct {
		typ, data, field string
	}{
		{events.TypeLLMBlockStart, `{"block_type":"text"}`, "index"},
		{events.TypeLLMBlockStart, `{"index":0}`, "block_type"},
		{events.TypeLLMBlockStart, `{"index":0,"block_type":"tool_use","name":"x"}`, "id"},
		{events.TypeLLMBlockStart, `{"index":"0","block_type":"text"}`, "index"},
		{events.TypeLLMBlockStart, `{"index":0,"block_type":"image"}`, "block_type"},
		{events.TypeLLMBlockDelta, `{"text":"x"}`, "index"},
		{events.TypeLLMBlockDelta, `{"index":0,"text":"a","thinking":"b"}`, "text"},
		{events.TypeLLMBlockDelta, `{"index":0,"text":5}`, "text"},
		{events.TypeLLMBlockStop, `{"index":0,"block_type":"text","stop_reason":"bored"}`, "stop_reason"},
		{events.TypeLLMStatus, `{}`, "status"},
		{events.TypeLLMStatus, `{"status":"done"}`, "status"},
		{events.TypeLLMError, `{"code":"x"}`, "message"},
		{events.TypeLLMUsage, `{"input_tokens":"many"}`, "input_tokens"},
	}
	for _, c := range cases {
		_, err := events.DecodeStreamEvent(c.typ, []byte(c.data))
		var fe *events.FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("%s %s: want FieldError, got %v", c.typ, c.data, err)
		}
		if fe.Field != c.field {
			t.Errorf("%s %s: field %q, want %q (%v)", c.typ, c.data, fe.Field, c.field, err)
		}
		if !errors.Is(err, events.ErrInvalid) {
			t.Errorf("%v does not match ErrInvalid", err)
		}
	}
	if _, err := events.DecodeStreamEvent("llmw.llm.nope", []byte(`{}`)); !errors.Is(err, events.ErrUnknownType) {
		t.Fatalf("unknown type: %v", err)
	}
	if _, err := events.DecodeStreamEvent(events.TypeLLMPing, []byte(`{`)); !errors.Is(err, events.ErrInvalid) {
		t.Fatalf("malformed JSON: %v", err)
	}
}

func TestMessageContentString(t *testing.T) {
	m, err := events.Decode[events.Message]([]byte(`{"role":"user","content":"hello","extra":1}`))
	if err != nil {
		t.Fatal(err)
	}
	want := events.UserText("hello")
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %#v want %#v", m, want)
	}
}

func TestMessageRoundTrip(t *testing.T) {
	m := events.Message{Role: events.RoleAssistant, Content: []events.Part{
		events.ThinkingPart("let me think", "sig"),
		{Type: events.PartThinking, Signature: "opaque", Redacted: true},
		events.TextPart("ok"),
		events.ToolUsePart("call_1", "get_weather", json.RawMessage(`{"city":"Paris"}`)),
		events.ToolUsePart("call_2", "noargs", nil),
	}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"role":"assistant","content":[` +
		`{"type":"thinking","thinking":"let me think","signature":"sig"},` +
		`{"type":"thinking","thinking":"","signature":"opaque","redacted":true},` +
		`{"type":"text","text":"ok"},` +
		`{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}},` +
		`{"type":"tool_use","id":"call_2","name":"noargs","input":{}}]}`
	if string(b) != wantJSON {
		t.Fatalf("got  %s\nwant %s", b, wantJSON)
	}
	back, err := events.Decode[events.Message](b)
	if err != nil {
		t.Fatal(err)
	}
	m.Content[4].Input = json.RawMessage(`{}`)
	if !reflect.DeepEqual(back, m) {
		t.Fatalf("got %#v\nwant %#v", back, m)
	}
	tr := events.Message{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("call_1", "", false)}}
	b, _ = json.Marshal(tr)
	if string(b) != `{"role":"tool","content":[{"type":"tool_result","tool_use_id":"call_1","content":"","is_error":false}]}` {
		t.Fatalf("tool result: %s", b)
	}
}

func TestRequestValidationNamesField(t *testing.T) {
	cases := []struct {
		data, field string
	}{
		{`{"model":"openai:gpt","messages":[]}`, "request_id"},
		{`{"request_id":"a.b","model":"openai:gpt","messages":[]}`, "request_id"},
		{`{"request_id":"r1","stream_group":"g.1","model":"openai:gpt","messages":[]}`, "stream_group"},
		{`{"request_id":"r1","messages":[]}`, "model"},
		{`{"request_id":"r1","model":"gpt","messages":[]}`, "model"},
		{`{"request_id":"r1","model":"openai:gpt"}`, "messages"},
		{`{"request_id":"r1","model":"openai:gpt","messages":[{"content":"x"}]}`, "messages[0].role"},
		{`{"request_id":"r1","model":"openai:gpt","messages":[{"role":"user","content":[{"type":"tool_use","name":"x"}]}]}`, "messages[0].content[0].id"},
		{`{"request_id":"r1","model":"openai:gpt","messages":[{"role":"user","content":[{"type":"tool_result"}]}]}`, "messages[0].content[0].tool_use_id"},
		{`{"request_id":"r1","model":"openai:gpt","messages":[],"tools":[{"name":"bad name","input_schema":{}}]}`, "tools[0].name"},
		{`{"request_id":"r1","model":"openai:gpt","messages":[],"tools":[{"name":"ok"}]}`, "tools[0].input_schema"},
		{`{"request_id":"r1","model":"openai:gpt","messages":[],"max_tokens":"10"}`, "max_tokens"},
		{`{"request_id":"r1","model":"openai:gpt","messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`, "messages.content.text"},
	}
	for _, c := range cases {
		_, err := events.Decode[events.CompletionRequest]([]byte(c.data))
		var fe *events.FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("%s: want FieldError, got %v", c.data, err)
		}
		if fe.Field != c.field {
			t.Errorf("%s: field %q, want %q (%v)", c.data, fe.Field, c.field, err)
		}
	}
	_, err := events.Decode[events.TurnRequest]([]byte(`{"turn_id":"t1","model":"anthropic:claude","messages":[{"role":"user","content":"hi"}],"tools":["*","get_weather"]}`))
	if err != nil {
		t.Fatalf("valid turn request rejected: %v", err)
	}
}

func TestDecisionWire(t *testing.T) {
	var r events.ResumeRequest
	if err := events.Unmarshal([]byte(`{"turn_id":"t","decisions":{"a":"approve","b":"deny","c":{"input":{"x":1}},"d":{"deny":"too risky"}}}`), &r); err != nil {
		t.Fatal(err)
	}
	want := map[string]events.Decision{
		"a": {Kind: events.DecisionApprove},
		"b": {Kind: events.DecisionDeny},
		"c": {Kind: events.DecisionEdit, Input: json.RawMessage(`{"x":1}`)},
		"d": {Kind: events.DecisionDeny, Reason: "too risky"},
	}
	if !reflect.DeepEqual(r.Decisions, want) {
		t.Fatalf("got %#v", r.Decisions)
	}
	b, _ := json.Marshal(r.Decisions)
	if string(b) != `{"a":"approve","b":"deny","c":{"input":{"x":1}},"d":{"deny":"too risky"}}` {
		t.Fatalf("marshal: %s", b)
	}
	if err := events.Unmarshal([]byte(`{"turn_id":"t","decisions":{"a":"maybe"}}`), &r); !errors.Is(err, events.ErrInvalid) {
		t.Fatalf("bad decision accepted: %v", err)
	}
}

func TestHookResultAllowed(t *testing.T) {
	// docs/protocol.md §7's table.
	allowed := map[events.HookEvent][]events.HookResultKind{
		events.HookOnMessageSend:  {events.HookContinue, events.HookCancel},
		events.HookBeforeToolCall: {events.HookContinue, events.HookSkip, events.HookAbort, events.HookPause},
		events.HookAfterToolCall:  {events.HookContinue, events.HookAbort},
		events.HookOnTurnEnd:      {events.HookFinish, events.HookContinueWithMessages, events.HookPause},
		events.HookOnAbort:        {events.HookContinue},
	}
	all := []events.HookResultKind{events.HookContinue, events.HookCancel, events.HookSkip, events.HookAbort, events.HookPause, events.HookFinish, events.HookContinueWithMessages}
	for ev, ok := range allowed {
		for _, r := range all {
			want := false
			for _, a := range ok {
				want = want || a == r
			}
			if got := r.Allowed(ev); got != want {
				t.Errorf("%s allowed at %s = %v, want %v", r, ev, got, want)
			}
		}
	}
	resp := events.HookResponse{Result: events.HookSkip}
	if err := resp.ValidateFor(events.HookAfterToolCall); !errors.Is(err, events.ErrInvalid) {
		t.Fatalf("skip accepted for after_tool_call: %v", err)
	}
}

func TestSubjects(t *testing.T) {
	s := events.Subjects{}
	got := []string{
		s.LLMComplete(), s.LLMStream("r1"), s.LLMCancel("r1"), s.TurnSubmit(), s.TurnResume(), s.TurnCancel("t1"),
		s.Events("", "t1", events.ChannelText), s.Events("s1", "t1", events.ChannelTool),
		s.ToolCall("get_weather"), s.ToolResult("t1", "c1"), s.ToolCancel("t1", "c1"),
	}
	want := []string{
		"llmw.llm.complete", "llmw.llm.stream.r1", "llmw.llm.cancel.r1", "llmw.turn.submit", "llmw.turn.resume", "llmw.turn.cancel.t1",
		"llmw.events._.t1.text", "llmw.events.s1.t1.tool",
		"llmw.tool.call.get_weather", "llmw.tool.result.t1.c1", "llmw.tool.cancel.t1.c1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if p := (events.Subjects{Prefix: "acme"}).TurnSubmit(); p != "acme.turn.submit" {
		t.Fatal(p)
	}
	for _, bad := range []string{"", "a.b", "a*", "a>", "a b", "a\tb"} {
		if events.ValidToken(bad) {
			t.Errorf("ValidToken(%q) = true", bad)
		}
	}
}

func testEnvelope() *events.Envelope {
	return &events.Envelope{
		ID: "id-1", Source: "/llmw/ingest/i1", Type: events.TypeLLMBlockDelta, Subject: "t1",
		Time:   time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC),
		TurnID: "t1", SessionID: "s1", Seq: 7, TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		TraceState: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
		Data:       []byte(`{"index":0,"text":"hi"}`),
	}
}

func TestEnvelopeBinaryRoundTrip(t *testing.T) {
	e := testEnvelope()
	h := e.BinaryHeader()
	got, err := events.DecodeEnvelope(h, e.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Time.Equal(e.Time) {
		t.Fatalf("time %v != %v", got.Time, e.Time)
	}
	got.Time = e.Time
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("got %#v\nwant %#v", got, e)
	}
}

func TestEnvelopeStructuredRoundTrip(t *testing.T) {
	e := testEnvelope()
	body, err := e.StructuredBody()
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(body, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"specversion", "id", "source", "type", "subject", "time", "datacontenttype", "turnid", "sessionid", "seq", "traceparent", "tracestate", "data"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("structured body lacks %q: %s", k, body)
		}
	}
	got, err := events.DecodeEnvelope(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	got.Time = e.Time
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("got %#v\nwant %#v", got, e)
	}
}

func TestDecodeEnvelopeErrors(t *testing.T) {
	if _, err := events.DecodeEnvelope(nil, []byte(`{"index":0}`)); !errors.Is(err, events.ErrNotCloudEvent) {
		t.Fatalf("plain JSON: %v", err)
	}
	h := testEnvelope().BinaryHeader()
	delete(h, events.HeaderSource)
	_, err := events.DecodeEnvelope(h, nil)
	var fe *events.FieldError
	if !errors.As(err, &fe) || fe.Field != "source" {
		t.Fatalf("missing source: %v", err)
	}
	h = testEnvelope().BinaryHeader()
	h[events.HeaderSeq] = []string{"x"}
	if _, err := events.DecodeEnvelope(h, nil); !errors.As(err, &fe) || fe.Field != "seq" {
		t.Fatalf("bad seq: %v", err)
	}
	h = testEnvelope().BinaryHeader()
	h[events.HeaderSpecVersion] = []string{"0.3"}
	if _, err := events.DecodeEnvelope(h, nil); !errors.As(err, &fe) || fe.Field != "specversion" {
		t.Fatalf("bad specversion: %v", err)
	}
	if _, err := events.DecodeEnvelope(nil, []byte(`{"specversion":"1.0","id":"x"}`)); !errors.Is(err, events.ErrInvalid) {
		t.Fatalf("structured without source: %v", err)
	}
}

func TestUsageAddMerge(t *testing.T) {
	a := events.UsageEvent{InputTokens: events.Int64(10), OutputTokens: events.Int64(1)}
	b := events.UsageEvent{OutputTokens: events.Int64(5), ReasoningTokens: events.Int64(2)}
	sum := a.Add(b)
	if *sum.InputTokens != 10 || *sum.OutputTokens != 6 || *sum.ReasoningTokens != 2 || sum.TotalTokens != nil {
		t.Fatalf("add: %+v", sum)
	}
	m := a.Merge(b)
	if *m.InputTokens != 10 || *m.OutputTokens != 5 || *m.ReasoningTokens != 2 {
		t.Fatalf("merge: %+v", m)
	}
}
