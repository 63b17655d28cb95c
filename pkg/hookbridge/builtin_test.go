package hookbridge_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
)

// serve1 parses a one-hook config and calls its handler.
func serve1(t *testing.T, yml string, req *events.HookRequest) *events.HookResponse {
	t.Helper()
	f := config(t, yml)
	if len(f.Hooks) != 1 {
		t.Fatalf("%d hooks", len(f.Hooks))
	}
	if req.Event == "" {
		req.Event = f.Hooks[0].Registration.Event
	}
	req.TurnID = "t1"
	resp, err := f.Hooks[0].Handler.ServeHook(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp != nil {
		if err := resp.ValidateFor(req.Event); err != nil {
			t.Fatalf("builtin returned an invalid response: %v", err)
		}
	}
	return resp
}

func toolReq(name, input string) *events.HookRequest {
	return &events.HookRequest{ToolCall: &events.ToolCall{ID: "c1", Name: name, Input: json.RawMessage(input)}}
}

func TestBuiltinDenyTools(t *testing.T) {
	yml := "hooks:\n  - name: deny\n    builtin: {type: deny_tools, pattern: '^(shell|exec)$', reason: no shells here}\n"
	if r := serve1(t, yml, toolReq("shell", `{}`)); r == nil || r.Result != events.HookSkip || r.Reason != "no shells here" {
		t.Errorf("shell: %+v", r)
	}
	if r := serve1(t, yml, toolReq("shellfish", `{}`)); r != nil {
		t.Errorf("shellfish: %+v", r)
	}
	// Default reason names the tool.
	yml = "hooks:\n  - name: deny\n    builtin: {type: deny_tools, pattern: rm}\n"
	if r := serve1(t, yml, toolReq("rm", `{}`)); r == nil || r.Reason != "tool rm is not allowed" {
		t.Errorf("default reason: %+v", r)
	}
}

func TestBuiltinRequireApproval(t *testing.T) {
	yml := "hooks:\n  - name: approve\n    builtin: {type: require_approval, pattern: '^write_'}\n"
	if r := serve1(t, yml, toolReq("write_file", `{}`)); r == nil || r.Result != events.HookPause || r.Reason != "tool write_file needs approval" {
		t.Errorf("write_file: %+v", r)
	}
	if r := serve1(t, yml, toolReq("read_file", `{}`)); r != nil {
		t.Errorf("read_file: %+v", r)
	}
}

func TestBuiltinRewriteInput(t *testing.T) {
	yml := `hooks:
  - name: rw
    builtin:
      type: rewrite_input
      set:
        safe: true
        opts.limit: 5
        items.1.id: "x"
      delete: [debug, opts.raw, missing.field]
`
	r := serve1(t, yml, toolReq("search", `{"q":"go","debug":1,"opts":{"raw":true,"keep":2},"items":[{"id":"a"},{"id":"b"}]}`))
	if r == nil || r.ToolCall == nil || r.ToolCall.ID != "c1" {
		t.Fatalf("response %+v", r)
	}
	var got, want any
	_ = json.Unmarshal(r.ToolCall.Input, &got)
	_ = json.Unmarshal([]byte(`{"q":"go","safe":true,"opts":{"keep":2,"limit":5},"items":[{"id":"a"},{"id":"x"}]}`), &want)
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("input %s\nwant  %s", gb, wb)
	}
	// Empty input counts as {}.
	r = serve1(t, "hooks:\n  - name: rw\n    builtin: {type: rewrite_input, set: {a.b: 1}}\n", toolReq("x", ``))
	if r == nil || string(r.ToolCall.Input) != `{"a":{"b":1}}` {
		t.Errorf("empty input: %+v", r)
	}
	// A set through a string fails the hook.
	f := config(t, "hooks:\n  - name: rw\n    builtin: {type: rewrite_input, set: {a.b: 1}}\n")
	if _, err := f.Hooks[0].Handler.ServeHook(ctx(t), &events.HookRequest{Event: events.HookBeforeToolCall, ToolCall: &events.ToolCall{ID: "c", Name: "x", Input: json.RawMessage(`{"a":"str"}`)}}); err == nil {
		t.Error("set through a string succeeded")
	}
}

func TestBuiltinMaskResult(t *testing.T) {
	yml := `hooks:
  - name: mask
    builtin:
      type: mask_result
      presets: [secrets, emails]
      patterns:
        - regex: '\b\d{3}-\d{2}-\d{4}\b'
          replacement: "[SSN]"
`
	content := "user bob@example.com key sk-proj-abcdefghijklmnopqrstuvwxyz012345 aws AKIAIOSFODNN7EXAMPLE\n" +
		"password=hunter2 ssn 123-45-6789 Authorization: Bearer abcdefghijklmnop1234\n" +
		"-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nkeep this"
	req := &events.HookRequest{ToolResult: &events.ToolResult{ToolUseID: "c1", Content: content}}
	r := serve1(t, yml, req)
	if r == nil || r.ToolResult == nil {
		t.Fatalf("response %+v", r)
	}
	want := "user [REDACTED] key [REDACTED] aws [REDACTED]\n" +
		"password=[REDACTED] ssn [SSN] Authorization: Bearer [REDACTED]\n" +
		"[REDACTED]\nkeep this"
	if r.ToolResult.Content != want {
		t.Errorf("masked\n%q\nwant\n%q", r.ToolResult.Content, want)
	}
	if r.ToolResult.ToolUseID != "c1" {
		t.Errorf("tool_use_id %q", r.ToolResult.ToolUseID)
	}
	// Nothing to mask: no replacement.
	if r := serve1(t, yml, &events.HookRequest{ToolResult: &events.ToolResult{ToolUseID: "c1", Content: "clean"}}); r != nil {
		t.Errorf("clean: %+v", r)
	}
}

func TestBuiltinInjectMessage(t *testing.T) {
	yml := "hooks:\n  - name: date\n    builtin: {type: inject_message, text: 'Current date: {{date}} ({{weekday}}), turn {{turn_id}} step {{step}} mode {{var:mode}} {{unknown}}'}\n"
	req := &events.HookRequest{Step: 2, Variables: map[string]string{"mode": "fast"}, Messages: []events.Message{events.UserText("hi")}}
	r := serve1(t, yml, req)
	// fixedNow is 2025-03-14 (a Friday).
	want := "Current date: 2025-03-14 (Friday), turn t1 step 2 mode fast {{unknown}}"
	if r == nil || len(r.Messages) != 2 || r.Messages[0].Role != events.RoleUser || r.Messages[0].Text() != want || r.Messages[1].Text() != "hi" {
		t.Errorf("messages %+v, want %q first", r, want)
	}
	yml = "hooks:\n  - name: date\n    builtin: {type: inject_message, text: 'now {{time}}', position: end, role: assistant, timezone: Asia/Tokyo}\n"
	r = serve1(t, yml, &events.HookRequest{Messages: []events.Message{events.UserText("hi")}})
	if r == nil || len(r.Messages) != 2 || r.Messages[1].Role != events.RoleAssistant || r.Messages[1].Text() != "now 2025-03-15T00:09:26+09:00" {
		t.Errorf("end/assistant/tz: %+v", r)
	}
}

func TestBuiltinValidateJSON(t *testing.T) {
	plain := "hooks:\n  - name: v\n    builtin: {type: validate_json}\n"
	end := func(text string) *events.HookRequest {
		return &events.HookRequest{Messages: []events.Message{events.UserText("q"), events.AssistantText(text)}}
	}
	if r := serve1(t, plain, end(`{"a":1}`)); r != nil {
		t.Errorf("valid JSON: %+v", r)
	}
	if r := serve1(t, plain, end("```json\n{\"a\":1}\n```")); r != nil {
		t.Errorf("fenced JSON: %+v", r)
	}
	r := serve1(t, plain, end(`{"a":}`))
	if r == nil || r.Result != events.HookContinueWithMessages || len(r.Messages) != 1 || r.Messages[0].Role != events.RoleUser ||
		!strings.HasPrefix(r.Messages[0].Text(), "Your final answer is not valid: it is not JSON") {
		t.Errorf("invalid JSON: %+v", r)
	}
	schema := `hooks:
  - name: v
    builtin:
      type: validate_json
      message: "Fix: {{error}}"
      schema:
        type: object
        required: [answer]
        properties:
          answer: {type: string}
`
	if r := serve1(t, schema, end(`{"answer":"42"}`)); r != nil {
		t.Errorf("matching: %+v", r)
	}
	r = serve1(t, schema, end(`{"answer":42}`))
	if r == nil || !strings.HasPrefix(r.Messages[0].Text(), "Fix: it does not match the JSON Schema") || !strings.Contains(r.Messages[0].Text(), "answer") {
		t.Errorf("not matching: %+v", r)
	}
	if r := serve1(t, schema, &events.HookRequest{Messages: []events.Message{events.UserText("only a question")}}); r != nil {
		t.Errorf("no assistant message: %+v", r)
	}
}

func TestBuiltinLimitToolCalls(t *testing.T) {
	f := config(t, "hooks:\n  - name: budget\n    builtin: {type: limit_tool_calls, max: 2}\n")
	h := f.Hooks[0].Handler
	vars := map[string]string{}
	var results []string
	for i := range 4 {
		resp, err := h.ServeHook(ctx(t), &events.HookRequest{Event: events.HookBeforeToolCall, TurnID: "t", Variables: vars,
			ToolCall: &events.ToolCall{ID: "c" + string(rune('0'+i)), Name: "x"}})
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, string(resp.Result)+" "+resp.Reason)
		for k, v := range resp.Variables {
			vars[k] = v
		}
	}
	want := []string{"continue ", "continue ", "skip tool call limit of 2 per turn reached", "skip tool call limit of 2 per turn reached"}
	if strings.Join(results, "|") != strings.Join(want, "|") {
		t.Errorf("results %q, want %q", results, want)
	}
	if vars["tool_calls:budget"] != "2" {
		t.Errorf("vars %v", vars)
	}
}
