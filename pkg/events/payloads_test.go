package events_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/llmworker/llmworker/pkg/events"
)

// roundTrip encodes v, decodes it with events.Decode and reports a
// difference: encoding a Go value and decoding it gives the same value.
func roundTrip[T any](t *testing.T, name string, v T) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: marshal: %v", name, err)
	}
	got, err := events.Decode[T](b)
	if err != nil {
		t.Fatalf("%s: decode %s: %v", name, b, err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("%s: round trip\n got %#v\nwant %#v\njson %s", name, got, v, b)
	}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func TestPayloadRoundTrips(t *testing.T) {
	temp := 0.2
	retries := 3
	msgs := []events.Message{
		events.UserText("hi"),
		{Role: events.RoleAssistant, Content: []events.Part{
			events.ThinkingPart("hmm", "sig"),
			events.TextPart("calling"),
			events.ToolUsePart("c1", "get_weather", raw(`{"city":"Oslo"}`)),
		}},
		{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("c1", "sunny", true)}},
	}
	def := events.ToolDefinition{Name: "get_weather", Description: "weather", InputSchema: raw(`{"type":"object"}`)}
	call := &events.ToolCall{ID: "c1", Name: "get_weather", Input: raw(`{"city":"Oslo"}`)}
	result := &events.ToolResult{ToolUseID: "c1", Content: "sunny", IsError: true}
	deadline := time.Date(2025, 1, 2, 3, 4, 5, 600_000_000, time.UTC)

	// requests.go
	roundTrip(t, "CompletionRequest", events.CompletionRequest{RequestID: "r1", Model: "anthropic:claude", System: "sys",
		Messages: msgs, Tools: []events.ToolDefinition{def}, MaxTokens: 10, Temperature: &temp,
		Thinking: &events.ThinkingConfig{BudgetTokens: 2048}})
	roundTrip(t, "CompletionReply", events.CompletionReply{RequestID: "r1", StreamSubject: "llmw.llm.stream.r1"})
	roundTrip(t, "TurnRequest", events.TurnRequest{TurnID: "t1", SessionID: "s1", Model: "openai:gpt", System: "sys",
		Messages: msgs, Tools: []string{"get_weather", "*"}, MaxSteps: 20, MaxTurnEndRetries: &retries, MaxTokens: 5,
		Temperature: &temp, Thinking: &events.ThinkingConfig{BudgetTokens: 1}, Metadata: map[string]any{"k": "v"}})
	roundTrip(t, "ResumeRequest", events.ResumeRequest{TurnID: "t1", Messages: msgs[:1], Decisions: map[string]events.Decision{
		"a": {Kind: events.DecisionApprove},
		"b": {Kind: events.DecisionDeny},
		"c": {Kind: events.DecisionDeny, Reason: "not now"},
		"d": {Kind: events.DecisionEdit, Input: raw(`{"city":"Rome"}`)},
	}})
	roundTrip(t, "ResumeRequest without decisions", events.ResumeRequest{TurnID: "t1"})
	roundTrip(t, "ToolCatalogEntry", events.ToolCatalogEntry{Name: "get_weather", Description: "d",
		InputSchema: raw(`{"type":"object"}`), TimeoutMS: 1500, Version: "v2"})
	roundTrip(t, "ToolCallRequest", events.ToolCallRequest{CallID: "c1", TurnID: "t1", SessionID: "s1", Name: "get_weather",
		Input: raw(`{"city":"Oslo"}`), Deadline: deadline})
	roundTrip(t, "ToolCallResult", events.ToolCallResult{CallID: "c1", TurnID: "t1", Name: "get_weather", Content: "x",
		IsError: true, DurationMS: 12})

	// hooks.go
	roundTrip(t, "HookRegistration", events.HookRegistration{Name: "h1", Event: events.HookBeforeToolCall, Matcher: "^fs_",
		Subject: "llmw.hook.h1", Priority: -2, TimeoutMS: 500, Failure: events.FailOpen})
	roundTrip(t, "HookRequest", events.HookRequest{Event: events.HookAfterToolCall, Hook: "h1", TurnID: "t1", SessionID: "s1",
		Step: 2, Variables: map[string]string{"k": "v"}, Messages: msgs, ToolCall: call, ToolResult: result, Tool: &def,
		Reason: "why"})
	roundTrip(t, "HookResponse", events.HookResponse{Result: events.HookContinueWithMessages, Reason: "r", Messages: msgs,
		ToolCall: call, ToolResult: result, Variables: map[string]string{"a": "b"}, Emit: msgs[:1]})

	// worker.go
	roundTrip(t, "TurnStarted", events.TurnStarted{TurnID: "t1", SessionID: "s1", Model: "a:b", Resumed: true})
	roundTrip(t, "TurnStep", events.TurnStep{Step: 3, Attempt: 2})
	roundTrip(t, "TurnPaused", events.TurnPaused{Reason: "r", Hook: "h", Pending: []events.ToolCall{*call}})
	roundTrip(t, "TurnResumed", events.TurnResumed{Decisions: map[string]events.Decision{
		"a": {Kind: events.DecisionApprove}, "d": {Kind: events.DecisionEdit, Input: raw(`{}`)}}})
	roundTrip(t, "TurnCompleted", events.TurnCompleted{Messages: msgs, StopReason: events.StopEndTurn,
		Usage: events.UsageEvent{InputTokens: events.Int64(1), ReasoningTokens: events.Int64(0)}})
	roundTrip(t, "TurnEnded", events.TurnEnded{Reason: "max_steps (2) reached", Code: "max_steps"})
	roundTrip(t, "WorkerBlockStart", events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 1,
		BlockType: events.BlockToolUse, ID: "c1", Name: "n", Server: true}, Step: 2})
	roundTrip(t, "WorkerBlockStop", events.WorkerBlockStop{BlockStop: events.BlockStop{Index: 1,
		BlockType: events.BlockThinking, StopReason: events.StopMaxTokens, Signature: "s"}, Step: 2})
	roundTrip(t, "WorkerBlockAbort", events.WorkerBlockAbort{BlockAbort: events.BlockAbort{Index: 1,
		BlockType: events.BlockText, Reason: "cancelled"}, Step: 2})
	for _, d := range []events.BlockDelta{events.TextDelta(0, "a\"b"), events.ThinkingDelta(12, "t"), events.InputJSONDelta(3, `{"x`)} {
		roundTrip(t, "WorkerBlockDelta "+d.Kind.String(), events.WorkerBlockDelta{BlockDelta: d, Step: 11})
	}
	roundTrip(t, "TextComplete", events.TextComplete{Step: 1, Index: 2, Text: "hello"})
	roundTrip(t, "ToolCallComplete", events.ToolCallComplete{Step: 1, ID: "c1", Name: "n", Input: raw(`{"a":1}`), Error: "bad"})
	roundTrip(t, "ToolStarted", events.ToolStarted{CallID: "c1", Name: "n", Input: raw(`{"a":1}`)})
	roundTrip(t, "ToolProgress", events.ToolProgress{CallID: "c1", Name: "n", Progress: 0.5, Total: 1, Message: "half way"})
	roundTrip(t, "ToolSkipped", events.ToolSkipped{CallID: "c1", Name: "n", Hook: "h", Reason: "r"})
	roundTrip(t, "HookDecision", events.HookDecision{Hook: "h", Event: events.HookOnTurnEnd, Result: events.HookPause,
		Reason: "r", MS: 1.5, CallID: "c1", Failed: true})
	roundTrip(t, "HookMessage", events.HookMessage{Hook: "h", Event: events.HookOnMessageSend, Messages: msgs[:1]})
	roundTrip(t, "UsageReport", events.UsageReport{Step: 2, Usage: events.UsageEvent{OutputTokens: events.Int64(3)},
		Total: events.UsageEvent{OutputTokens: events.Int64(7), CacheReadInputTokens: events.Int64(1)}})
}

// The wire shapes docs/protocol.md spells out, written by hand from the spec.
func TestPayloadWireShapes(t *testing.T) {
	cases := []struct {
		name string
		v    any
		want string
	}{
		{"§5 text.complete", events.TextComplete{Step: 1, Index: 0, Text: "Hi"}, `{"step":1,"index":0,"text":"Hi"}`},
		{"§5 toolcall.complete", events.ToolCallComplete{Step: 2, ID: "c1", Name: "f", Input: raw(`{}`)},
			`{"step":2,"id":"c1","name":"f","input":{}}`},
		{"§5/§6 tool.result", events.ToolCallResult{CallID: "c1", Name: "f", Content: "ok", DurationMS: 3},
			`{"call_id":"c1","name":"f","content":"ok","is_error":false,"duration_ms":3}`},
		{"§5 turn.failed", events.TurnEnded{Reason: "why"}, `{"reason":"why"}`},
		{"§5 turn.paused", events.TurnPaused{Reason: "r", Pending: []events.ToolCall{{ID: "c1", Name: "f", Input: raw(`{}`)}}},
			`{"reason":"r","pending":[{"id":"c1","name":"f","input":{}}]}`},
		{"§5 block.delta", events.WorkerBlockDelta{BlockDelta: events.InputJSONDelta(1, `{"a"`), Step: 3},
			`{"index":1,"input_json":"{\"a\"","step":3}`},
		{"§7 decision", events.HookDecision{Hook: "h", Event: events.HookOnAbort, Result: events.HookContinue, MS: 2},
			`{"hook":"h","event":"on_abort","result":"continue","ms":2}`},
		{"§7 registration", events.HookRegistration{Name: "h", Event: events.HookOnTurnEnd, Subject: "s", Failure: events.FailClosed},
			`{"name":"h","event":"on_turn_end","subject":"s","failure":"fail_closed"}`},
		{"§5 resume", events.ResumeRequest{TurnID: "t", Decisions: map[string]events.Decision{
			"a": {Kind: events.DecisionApprove}, "d": {Kind: events.DecisionDeny}, "e": {Kind: events.DecisionEdit, Input: raw(`{"x":1}`)}}},
			`{"turn_id":"t","decisions":{"a":"approve","d":"deny","e":{"input":{"x":1}}}}`},
		{"§6 tool.call", events.ToolCallRequest{CallID: "c", TurnID: "t", Name: "f", Input: raw(`{}`),
			Deadline: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)},
			`{"call_id":"c","turn_id":"t","name":"f","input":{},"deadline":"2025-01-02T03:04:05Z"}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(b) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, b, c.want)
		}
	}
}

// fieldOf returns the field a decoding error names; it fails the test when
// the error is not a FieldError matching ErrInvalid.
func fieldOf(t *testing.T, name string, err error) string {
	t.Helper()
	var fe *events.FieldError
	if !errors.As(err, &fe) || !errors.Is(err, events.ErrInvalid) {
		t.Fatalf("%s: error %v (%T) is not a FieldError matching ErrInvalid", name, err, err)
	}
	return fe.Field
}

func TestDecodeNamesTheFieldOfEveryPayload(t *testing.T) {
	type check struct {
		name, json, field, problem string
		decode                     func([]byte) error
	}
	dec := func(f func([]byte) error) func([]byte) error { return f }
	completion := dec(func(b []byte) error { _, err := events.Decode[events.CompletionRequest](b); return err })
	reply := dec(func(b []byte) error { _, err := events.Decode[events.CompletionReply](b); return err })
	turn := dec(func(b []byte) error { _, err := events.Decode[events.TurnRequest](b); return err })
	resume := dec(func(b []byte) error { _, err := events.Decode[events.ResumeRequest](b); return err })
	catalog := dec(func(b []byte) error { _, err := events.Decode[events.ToolCatalogEntry](b); return err })
	toolCall := dec(func(b []byte) error { _, err := events.Decode[events.ToolCallRequest](b); return err })
	toolResult := dec(func(b []byte) error { _, err := events.Decode[events.ToolCallResult](b); return err })
	reg := dec(func(b []byte) error { _, err := events.Decode[events.HookRegistration](b); return err })
	hreq := dec(func(b []byte) error { _, err := events.Decode[events.HookRequest](b); return err })
	hresp := dec(func(b []byte) error { _, err := events.Decode[events.HookResponse](b); return err })

	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	cases := []check{
		{"completion request_id", `{"model":"a:b",` + msgs + `}`, "request_id", "is required", completion},
		{"completion request_id token", `{"request_id":"a.b","model":"a:b",` + msgs + `}`, "request_id", "NATS subject token", completion},
		{"completion model", `{"request_id":"r",` + msgs + `}`, "model", "is required", completion},
		{"completion model form", `{"request_id":"r","model":"gpt",` + msgs + `}`, "model", "provider:model", completion},
		{"completion messages", `{"request_id":"r","model":"a:b"}`, "messages", "is required", completion},
		{"completion message part", `{"request_id":"r","model":"a:b","messages":[{"role":"user","content":[{"type":"tool_use","name":"f"}]}]}`,
			"messages[0].content[0].id", "is required", completion},
		{"completion tool name", `{"request_id":"r","model":"a:b",` + msgs + `,"tools":[{"name":"a b","input_schema":{}}]}`,
			"tools[0].name", "must match", completion},
		{"completion tool schema", `{"request_id":"r","model":"a:b",` + msgs + `,"tools":[{"name":"f","input_schema":[]}]}`,
			"tools[0].input_schema", "JSON Schema object", completion},
		{"completion duplicate tool", `{"request_id":"r","model":"a:b",` + msgs + `,"tools":[{"name":"f","input_schema":{}},{"name":"f","input_schema":{}}]}`,
			"tools[1].name", "duplicates", completion},
		{"completion max_tokens", `{"request_id":"r","model":"a:b",` + msgs + `,"max_tokens":-1}`, "max_tokens", "negative", completion},
		{"completion thinking", `{"request_id":"r","model":"a:b",` + msgs + `,"thinking":{"budget_tokens":-5}}`,
			"thinking.budget_tokens", "negative", completion},
		{"completion compaction trigger", `{"request_id":"r","model":"a:b",` + msgs + `,"compaction":{"trigger":-1}}`,
			"compaction.trigger", "negative", completion},
		{"completion wrong type", `{"request_id":"r","model":7,` + msgs + `}`, "model", "must be a string", completion},
		{"reply request_id", `{"stream_subject":"s"}`, "request_id", "is required", reply},
		{"reply stream_subject", `{"request_id":"r"}`, "stream_subject", "is required", reply},
		{"turn turn_id", `{"model":"a:b",` + msgs + `}`, "turn_id", "is required", turn},
		{"turn turn_id token", `{"turn_id":"t 1","model":"a:b",` + msgs + `}`, "turn_id", "NATS subject token", turn},
		{"turn session_id token", `{"turn_id":"t","session_id":"s>","model":"a:b",` + msgs + `}`, "session_id", "NATS subject token", turn},
		{"turn model", `{"turn_id":"t",` + msgs + `}`, "model", "is required", turn},
		{"turn model form", `{"turn_id":"t","model":":x",` + msgs + `}`, "model", "provider:model", turn},
		{"turn messages", `{"turn_id":"t","model":"a:b"}`, "messages", "is required", turn},
		{"turn message role", `{"turn_id":"t","model":"a:b","messages":[{"role":"robot","content":"x"}]}`, "messages[0].role", "user, assistant or tool", turn},
		{"turn tools", `{"turn_id":"t","model":"a:b",` + msgs + `,"tools":["ok","fs.*"]}`, "tools[1]", "tool name", turn},
		{"turn max_steps", `{"turn_id":"t","model":"a:b",` + msgs + `,"max_steps":-1}`, "max_steps", "negative", turn},
		{"turn retries", `{"turn_id":"t","model":"a:b",` + msgs + `,"max_turn_end_retries":-1}`, "max_turn_end_retries", "negative", turn},
		{"turn max_steps type", `{"turn_id":"t","model":"a:b",` + msgs + `,"max_steps":"many"}`, "max_steps", "must be a number", turn},
		{"turn max_total_tokens", `{"turn_id":"t","model":"a:b",` + msgs + `,"max_total_tokens":-1}`, "max_total_tokens", "must not be negative, got -1", turn},
		{"turn max_cost", `{"turn_id":"t","model":"a:b",` + msgs + `,"max_cost":-0.5}`, "max_cost", "not below 0, got -0.5", turn},
		{"turn max_cost type", `{"turn_id":"t","model":"a:b",` + msgs + `,"max_cost":"1 USD"}`, "max_cost", "must be a number", turn},
		{"turn metadata type", `{"turn_id":"t","model":"a:b",` + msgs + `,"metadata":[1]}`, "metadata", "must be an object", turn},
		{"resume turn_id", `{"decisions":{}}`, "turn_id", "is required", resume},
		{"resume turn_id token", `{"turn_id":"a*"}`, "turn_id", "NATS subject token", resume},
		{"resume message", `{"turn_id":"t","messages":[{"role":"user"}]}`, "messages[0].content", "is required", resume},
		{"resume decision", `{"turn_id":"t","decisions":{"c1":"approve","c2":"maybe"}}`, "decisions.c2", "must be a decision", resume},
		{"resume decision object", `{"turn_id":"t","decisions":{"c9":{"inptu":{}}}}`, "decisions.c9", `needs "input"`, resume},
		{"resume decision type", `{"turn_id":"t","decisions":{"c3":7}}`, "decisions.c3", "must be a decision", resume},
		{"resume decisions type", `{"turn_id":"t","decisions":[]}`, "decisions", "must be an object", resume},
		{"catalog name", `{"input_schema":{}}`, "name", "is required", catalog},
		{"catalog schema", `{"name":"f"}`, "input_schema", "is required", catalog},
		{"tool call call_id", `{"turn_id":"t","name":"f"}`, "call_id", "is required", toolCall},
		{"tool call call_id token", `{"call_id":"c.1","turn_id":"t","name":"f"}`, "call_id", "NATS subject token", toolCall},
		{"tool call turn_id", `{"call_id":"c","name":"f"}`, "turn_id", "is required", toolCall},
		{"tool call turn_id token", `{"call_id":"c","turn_id":"t.1","name":"f"}`, "turn_id", "NATS subject token", toolCall},
		{"tool call name", `{"call_id":"c","turn_id":"t"}`, "name", "is required", toolCall},
		{"tool result call_id", `{"name":"f"}`, "call_id", "is required", toolResult},
		{"tool result name", `{"call_id":"c"}`, "name", "is required", toolResult},
		{"tool result is_error type", `{"call_id":"c","name":"f","is_error":"yes"}`, "is_error", "must be a boolean", toolResult},
		{"hook request event", `{"turn_id":"t"}`, "event", "is required", hreq},
		{"hook request event value", `{"event":"on_start","turn_id":"t"}`, "event", "unknown hook event", hreq},
		{"hook request turn_id", `{"event":"on_abort"}`, "turn_id", "is required", hreq},
		{"hook request tool_call", `{"event":"before_tool_call","turn_id":"t"}`, "tool_call", "is required", hreq},
		{"hook request tool_result", `{"event":"after_tool_call","turn_id":"t"}`, "tool_result", "is required", hreq},
		{"hook request step type", `{"event":"on_abort","turn_id":"t","step":"one"}`, "step", "must be a number", hreq},
		{"hook response messages", `{"result":"continue","messages":[{"content":"x"}]}`, "messages[0].role", "is required", hresp},
		{"hook response tool_call", `{"result":"continue","tool_call":{"name":"f"}}`, "tool_call.id", "is required", hresp},
		{"hook response tool_result", `{"result":"continue","tool_result":{"content":"x"}}`, "tool_result.tool_use_id", "is required", hresp},
		{"hook response emit", `{"result":"continue","emit":[{"role":"user","content":[{"type":"picture"}]}]}`, "emit[0].content[0].type", "must be text", hresp},
		{"hook response result type", `{"result":1}`, "result", "must be a string", hresp},
		{"registration event type", `{"name":"h","event":5,"subject":"s"}`, "event", "must be a string", reg},
	}
	for _, c := range cases {
		err := c.decode([]byte(c.json))
		if err == nil {
			t.Errorf("%s: %s decoded without error", c.name, c.json)
			continue
		}
		if f := fieldOf(t, c.name, err); f != c.field || !strings.Contains(err.Error(), c.problem) {
			t.Errorf("%s: error %q names field %q, want %q with %q", c.name, err, f, c.field, c.problem)
		}
	}
}

func TestHookRegistrationValidate(t *testing.T) {
	good := events.HookRegistration{Name: "audit", Event: events.HookBeforeToolCall, Subject: "llmw.hook.audit"}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid registration: %v", err)
	}
	for _, ev := range events.HookEvents {
		r := good
		r.Event = ev
		if err := r.Validate(); err != nil {
			t.Errorf("event %s: %v", ev, err)
		}
	}
	cases := map[string]struct {
		mod   func(*events.HookRegistration)
		field string
	}{
		"no name":        {func(r *events.HookRegistration) { r.Name = "" }, "name"},
		"name not a key": {func(r *events.HookRegistration) { r.Name = "a.b" }, "name"},
		"no event":       {func(r *events.HookRegistration) { r.Event = "" }, "event"},
		"unknown event":  {func(r *events.HookRegistration) { r.Event = "pre_tool_use" }, "event"},
		"no subject":     {func(r *events.HookRegistration) { r.Subject = "" }, "subject"},
		"bad matcher":    {func(r *events.HookRegistration) { r.Matcher = "Edit|(" }, "matcher"},
		"bad failure":    {func(r *events.HookRegistration) { r.Failure = "fail_sometimes" }, "failure"},
		"negative ms":    {func(r *events.HookRegistration) { r.TimeoutMS = -1 }, "timeout_ms"},
	}
	for name, c := range cases {
		r := good
		c.mod(&r)
		if f := fieldOf(t, name, r.Validate()); f != c.field {
			t.Errorf("%s: field %q, want %q", name, f, c.field)
		}
	}
	r := good
	r.Matcher, r.Failure, r.TimeoutMS = "^(Read|Write)File.*", events.FailOpen, 100
	if err := r.Validate(); err != nil {
		t.Fatalf("docs/architecture.md#hooks matcher: %v", err)
	}
}

func TestHookResponseValidateFor(t *testing.T) {
	// docs/protocol.md §7's table: which result each hook point accepts.
	allowed := map[events.HookEvent][]events.HookResultKind{
		events.HookOnMessageSend:  {events.HookContinue, events.HookCancel},
		events.HookBeforeToolCall: {events.HookContinue, events.HookSkip, events.HookAbort, events.HookPause},
		events.HookAfterToolCall:  {events.HookContinue, events.HookAbort},
		events.HookOnTurnEnd:      {events.HookFinish, events.HookContinueWithMessages, events.HookPause},
		events.HookOnAbort:        {events.HookContinue},
	}
	all := []events.HookResultKind{events.HookContinue, events.HookCancel, events.HookSkip, events.HookAbort,
		events.HookPause, events.HookFinish, events.HookContinueWithMessages}
	for ev, ok := range allowed {
		if err := (events.HookResponse{}).ValidateFor(ev); err != nil {
			t.Errorf("%s: an empty result must mean continue/finish: %v", ev, err)
		}
		for _, res := range all {
			err := events.HookResponse{Result: res}.ValidateFor(ev)
			want := false
			for _, a := range ok {
				want = want || a == res
			}
			if want && err != nil {
				t.Errorf("%s/%s: %v", ev, res, err)
			}
			if !want && fieldOf(t, string(ev)+"/"+string(res), err) != "result" {
				t.Errorf("%s/%s: %v", ev, res, err)
			}
		}
	}
	bad := events.HookResponse{Result: events.HookContinue, ToolCall: &events.ToolCall{ID: "c"}}
	if f := fieldOf(t, "invalid tool_call", bad.ValidateFor(events.HookBeforeToolCall)); f != "tool_call.name" {
		t.Fatalf("field %q", f)
	}
	if events.HookEvent("pre").Valid() || !events.HookOnAbort.Valid() {
		t.Fatal("HookEvent.Valid")
	}
	if events.HookContinue.Allowed("nowhere") {
		t.Fatal("a result is allowed at an unknown hook point")
	}
}

func TestDecisionErrors(t *testing.T) {
	for _, in := range []string{`"maybe"`, `{}`, `{"input":null}`, `[1]`, `{"deny":3}`} {
		var d events.Decision
		err := json.Unmarshal([]byte(in), &d)
		if err == nil {
			t.Errorf("%s decoded as %+v", in, d)
			continue
		}
		if !errors.Is(err, events.ErrInvalid) {
			t.Errorf("%s: %v does not match ErrInvalid", in, err)
		}
	}
	var d events.Decision
	if err := json.Unmarshal([]byte(`{"deny":"too risky"}`), &d); err != nil || d.Kind != events.DecisionDeny || d.Reason != "too risky" {
		t.Fatalf("deny with reason: %+v %v", d, err)
	}
	if b, _ := json.Marshal(d); string(b) != `{"deny":"too risky"}` {
		t.Fatalf("deny with reason encodes as %s", b)
	}
}

func TestSubjectsOfDesign(t *testing.T) {
	// Every subject of docs/protocol.md, under the default prefix and a custom one.
	var s events.Subjects
	c := events.NewSubjects("acme")
	cases := []struct{ got, want string }{
		{s.LLMComplete(), "llmw.llm.complete"},
		{s.LLMStream("r1"), "llmw.llm.stream.r1"},
		{s.LLMCancel("r1"), "llmw.llm.cancel.r1"},
		{s.LLMCancelAll(), "llmw.llm.cancel.*"},
		{s.TurnSubmit(), "llmw.turn.submit"},
		{s.TurnResume(), "llmw.turn.resume"},
		{s.TurnCancel("t1"), "llmw.turn.cancel.t1"},
		{s.TurnCancelAll(), "llmw.turn.cancel.*"},
		{s.TurnCancelAny(), "llmw.turn.cancel.>"},
		{s.Events("s1", "t1", events.ChannelText), "llmw.events.s1.t1.text"},
		{s.Events("", "t1", events.ChannelTurn), "llmw.events._.t1.turn"},
		{s.EventsOfTurn("t1"), "llmw.events.*.t1.>"},
		{s.EventsOfSession("s1"), "llmw.events.s1.>"},
		{s.EventsOfSession(""), "llmw.events._.>"},
		{s.EventsAll(), "llmw.events.>"},
		{s.ToolCall("get_weather"), "llmw.tool.call.get_weather"},
		{s.ToolCallAll(), "llmw.tool.call.>"},
		{s.ToolResult("t1", "c1"), "llmw.tool.result.t1.c1"},
		{s.ToolResultsOfTurn("t1"), "llmw.tool.result.t1.*"},
		{s.ToolResultAll(), "llmw.tool.result.>"},
		{s.ToolCancel("t1", "c1"), "llmw.tool.cancel.t1.c1"},
		{s.ToolCancelAll(), "llmw.tool.cancel.*.*"},
		{s.Hook("audit"), "llmw.hook.audit"},
		{c.LLMStream("r1"), "acme.llm.stream.r1"},
		{c.Events("", "t", events.ChannelHook), "acme.events._.t.hook"},
		{events.LastToken("llmw.llm.cancel.r9"), "r9"},
		{events.LastToken("plain"), "plain"},
	}
	for i, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("case %d: got %q, want %q", i, tc.got, tc.want)
		}
	}
	for _, tok := range []string{"", "a.b", "a*", "a>", "a b", "a\tb", "a\x7f", strings.Repeat("x", 257)} {
		if events.ValidToken(tok) {
			t.Errorf("ValidToken(%q)", tok)
		}
	}
	if !events.ValidToken("01J-abc_Z") {
		t.Error("ValidToken rejects an ordinary id")
	}
}

func TestEnvelopeEdgeCases(t *testing.T) {
	if a, b := events.NewID(), events.NewID(); a == "" || a == b {
		t.Fatalf("ids %q %q", a, b)
	}
	if got := events.Source("turn", "r1"); got != "/llmw/turn/r1" {
		t.Fatalf("source %q", got)
	}
	before := time.Now()
	e, err := events.NewEnvelope(events.Source("turn", "r1"), events.TypeTextComplete, events.TextComplete{Step: 1, Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if e.ID == "" || e.Type != events.TypeTextComplete || e.Time.Before(before) || string(e.Data) != `{"step":1,"index":0,"text":"hi"}` {
		t.Fatalf("envelope %+v data %s", e, e.Data)
	}
	got, err := events.DecodeData[events.TextComplete](e)
	if err != nil || got != (events.TextComplete{Step: 1, Text: "hi"}) {
		t.Fatalf("DecodeData %+v %v", got, err)
	}
	if _, err := events.NewEnvelope("s", "t", func() {}); err == nil {
		t.Fatal("a func marshalled")
	}

	data := map[string]struct {
		v    any
		want string
	}{
		"nil":         {nil, `{}`},
		"bytes":       {[]byte(`{"a":1}`), `{"a":1}`},
		"raw":         {json.RawMessage(`[1]`), `[1]`},
		"delta":       {events.TextDelta(2, "x"), `{"index":2,"text":"x"}`},
		"workerDelta": {events.WorkerBlockDelta{BlockDelta: events.ThinkingDelta(0, "t"), Step: 4}, `{"index":0,"thinking":"t","step":4}`},
		"struct":      {events.TurnStep{Step: 1}, `{"step":1}`},
	}
	for name, c := range data {
		b, err := events.MarshalData(c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("MarshalData %s: %s %v, want %s", name, b, err, c.want)
		}
	}

	for name, c := range map[string]struct {
		e     events.Envelope
		field string
	}{
		"id":     {events.Envelope{Source: "s", Type: "t"}, "id"},
		"source": {events.Envelope{ID: "i", Type: "t"}, "source"},
		"type":   {events.Envelope{ID: "i", Source: "s"}, "type"},
	} {
		if f := fieldOf(t, name, c.e.Validate()); f != c.field {
			t.Errorf("%s: field %q", name, f)
		}
	}

	// Canonicalised header names (Ce-Id, as some clients write them) are
	// accepted.
	h := map[string][]string{}
	for k, v := range e.BinaryHeader() {
		h[strings.ToUpper(k[:1])+k[1:]] = v
	}
	back, err := events.DecodeEnvelope(h, e.Data)
	if err != nil || back.ID != e.ID || back.Type != e.Type {
		t.Fatalf("canonical headers: %+v %v", back, err)
	}
	// Every attribute, not only the first looked up: read from upper-case
	// names, it is what the lower-case names give.
	full := events.Envelope{ID: "i1", Source: "/s", Type: "t", Subject: "sub", TurnID: "t1", SessionID: "s1",
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "k=v",
		Time: time.Date(2026, 11, 25, 12, 0, 0, 5, time.UTC), Seq: 42, Data: []byte(`{}`)}
	upper := map[string][]string{}
	for k, v := range full.BinaryHeader() {
		upper[strings.ToUpper(k)] = v
	}
	dec, err := events.DecodeEnvelope(upper, full.Data)
	if err != nil {
		t.Fatal(err)
	}
	if dec.ID != full.ID || dec.Source != full.Source || dec.Type != full.Type || dec.Subject != full.Subject ||
		dec.TurnID != full.TurnID || dec.SessionID != full.SessionID || dec.TraceParent != full.TraceParent ||
		dec.TraceState != full.TraceState || !dec.Time.Equal(full.Time) || dec.Seq != full.Seq {
		t.Fatalf("upper-case headers decode to %+v, want %+v", dec, full)
	}

	// Structured mode with a non-JSON content type or a bad seq.
	ce := cloudevents.NewEvent()
	ce.SetID("i")
	ce.SetSource("/s")
	ce.SetType("t")
	if err := ce.SetData("text/plain", "hello"); err != nil {
		t.Fatal(err)
	}
	if _, err := events.FromCloudEvent(ce); fieldOf(t, "content type", err) != "datacontenttype" {
		t.Fatalf("text/plain accepted: %v", err)
	}
	ce = cloudevents.NewEvent()
	ce.SetID("i")
	ce.SetSource("/s")
	ce.SetType("t")
	ce.SetExtension("seq", "first")
	if err := ce.SetData(cloudevents.ApplicationJSON, map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := events.FromCloudEvent(ce); fieldOf(t, "seq", err) != "seq" {
		t.Fatalf("bad seq accepted: %v", err)
	}
	ce.SetExtension("seq", "7")
	env, err := events.FromCloudEvent(ce)
	if err != nil || env.Seq != 7 || string(env.Data) != `{"a":1}` {
		t.Fatalf("structured %+v %v", env, err)
	}
	if _, err := events.FromCloudEvent(cloudevents.NewEvent()); !errors.Is(err, events.ErrInvalid) {
		t.Fatalf("an event without id/source/type: %v", err)
	}
}

func TestMessageAndRequestHelpers(t *testing.T) {
	m := events.Message{Role: events.RoleAssistant, Content: []events.Part{
		events.TextPart("a"), events.ToolUsePart("c1", "f", raw(`{}`)), events.TextPart("b"), events.ToolUsePart("c2", "g", nil),
	}}
	if m.Text() != "ab" {
		t.Fatalf("Text %q", m.Text())
	}
	if u := m.ToolUses(); len(u) != 2 || u[0].ID != "c1" || u[1].ID != "c2" {
		t.Fatalf("ToolUses %+v", u)
	}
	if a := events.AssistantText("x"); a.Role != events.RoleAssistant || a.Text() != "x" {
		t.Fatalf("AssistantText %+v", a)
	}
	if p, mod := (events.CompletionRequest{Model: "anthropic:claude-sonnet-4-5"}).Provider(); p != "anthropic" || mod != "claude-sonnet-4-5" {
		t.Fatalf("Provider %q %q", p, mod)
	}
	if p, mod := events.SplitModel("gpt"); p != "" || mod != "gpt" {
		t.Fatalf("SplitModel %q %q", p, mod)
	}
	e := events.ToolCatalogEntry{Name: "f", Description: "d", InputSchema: raw(`{}`), TimeoutMS: 5, Version: "1"}
	if d := e.Definition(); d.Name != "f" || d.Description != "d" || string(d.InputSchema) != `{}` {
		t.Fatalf("Definition %+v", d)
	}
	r := events.ToolCallResult{CallID: "c1", Name: "f", Content: "x", IsError: true}
	if tr := r.ToolResult(); !reflect.DeepEqual(tr, events.ToolResult{ToolUseID: "c1", Content: "x", IsError: true}) {
		t.Fatalf("ToolResult %+v", tr)
	}
	if p := (events.ToolResult{ToolUseID: "c1", Content: "x"}).Part(); !reflect.DeepEqual(p, events.ToolResultPart("c1", "x", false)) {
		t.Fatalf("Part %+v", p)
	}
	if f := fieldOf(t, "tool call input", events.ToolCall{ID: "c", Name: "f", Input: raw(`{`)}.Validate()); f != "input" {
		t.Fatalf("field %q", f)
	}
	if f := fieldOf(t, "tool call request input", events.ToolCallRequest{CallID: "c", TurnID: "t", Name: "f", Input: raw(`{`)}.Validate()); f != "input" {
		t.Fatalf("field %q", f)
	}
	for _, ch := range []struct {
		bt   events.BlockType
		want events.Channel
	}{{events.BlockText, events.ChannelText}, {events.BlockToolResult, events.ChannelText},
		{events.BlockThinking, events.ChannelThinking}, {events.BlockToolUse, events.ChannelTool}} {
		if got := events.BlockChannel(ch.bt); got != ch.want {
			t.Errorf("BlockChannel(%s) = %s, want %s", ch.bt, got, ch.want)
		}
	}
	for s, want := range map[events.StreamStatus]bool{events.StatusStarted: false, events.StatusCompleted: true,
		events.StatusCancelled: true, events.StatusFailed: true} {
		if s.Terminal() != want {
			t.Errorf("%s.Terminal() = %v", s, !want)
		}
	}
	if got := (&events.FieldError{Problem: "empty body"}).Error(); got != "invalid payload: empty body" {
		t.Fatalf("FieldError without field: %q", got)
	}
	if _, err := events.Decode[events.TurnStep]([]byte("  ")); !errors.Is(err, events.ErrInvalid) {
		t.Fatalf("empty body: %v", err)
	}
	if _, err := events.Decode[events.TurnStep]([]byte(`{"step":`)); !errors.Is(err, events.ErrInvalid) || !strings.Contains(err.Error(), "malformed JSON") {
		t.Fatalf("truncated body: %v", err)
	}
	if _, err := events.Decode[[]int]([]byte(`{"a":1}`)); !errors.Is(err, events.ErrInvalid) || !strings.Contains(err.Error(), "must be an array") {
		t.Fatalf("top-level type: %v", err)
	}
}
