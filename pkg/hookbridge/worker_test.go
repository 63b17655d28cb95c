package hookbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// echoTool records the inputs it ran with and answers with a contact
// e-mail address (for mask_result).
type echoTool struct {
	mu     sync.Mutex
	inputs []string
}

func (e *echoTool) tool(t testing.TB, name string) tool.Tool {
	return tool.MustFunc(name, "echoes", json.RawMessage(`{"type":"object"}`), func(_ context.Context, in json.RawMessage) (string, error) {
		e.mu.Lock()
		e.inputs = append(e.inputs, string(in))
		e.mu.Unlock()
		return "ran with " + string(in) + ", contact bob@example.com", nil
	})
}

func resultContents(msgs []events.Message) []string {
	var out []string
	for _, m := range msgs {
		for _, p := range m.Content {
			if p.Type == events.PartToolResult {
				out = append(out, p.Content)
			}
		}
	}
	return out
}

// A whole turn through pkg/worker with a scripted model and the remote
// hooks of a config file: every hook point takes effect.
func TestFullTurnThroughWorker(t *testing.T) {
	e := start(t)
	yml := `
hooks:
  - name: date
    builtin: {type: inject_message, text: "Current date: {{date}}"}
  - name: no-shell
    builtin: {type: deny_tools, pattern: ^shell$, reason: shells are off}
  - name: safe
    matcher: ^echo$
    builtin: {type: rewrite_input, set: {mode: safe}, delete: [debug]}
  - name: mask
    builtin: {type: mask_result, presets: [emails]}
  - name: json
    builtin: {type: validate_json}
`
	e.bridge(t, config(t, yml).Hooks...)
	chain, _ := e.chain(t)
	echo := &echoTool{}
	model := llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "shell", Input: `{"cmd":"rm -rf /"}`},
			llmtest.ToolCallSpec{ID: "c2", Name: "echo", Input: `{"debug":true,"text":"hi"}`}),
		llmtest.TextStep("here you go"),
		llmtest.TextStep(`{"answer":"done"}`),
	)
	w, err := worker.New(worker.Config{Provider: model, Tools: []tool.Tool{echo.tool(t, "echo"), echo.tool(t, "shell")}, Hooks: chain})
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.Run(ctx(t), []events.Message{events.UserText("do it")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != worker.StatusCompleted || res.Text() != `{"answer":"done"}` {
		t.Fatalf("status %s reason %q text %q", res.Status, res.Reason, res.Text())
	}
	// on_message_send: every request starts with the injected date (the
	// config's clock is fixedNow).
	for i, req := range model.Requests() {
		if got := req.Messages[0].Text(); got != "Current date: 2025-03-14" {
			t.Errorf("request %d starts with %q", i, got)
		}
	}
	// before_tool_call: shell skipped (never ran), echo rewritten.
	if len(echo.inputs) != 1 || echo.inputs[0] != `{"mode":"safe","text":"hi"}` {
		t.Errorf("tool inputs %q", echo.inputs)
	}
	results := resultContents(res.Messages)
	if len(results) != 2 || !strings.Contains(results[0], `skipped by hook "no-shell": shells are off`) {
		t.Errorf("shell result %q", results)
	}
	// after_tool_call: the e-mail address is masked.
	if len(results) == 2 && results[1] != `ran with {"mode":"safe","text":"hi"}, contact [REDACTED]` {
		t.Errorf("echo result %q", results[1])
	}
	// on_turn_end: the non-JSON answer was sent back with a fix request.
	var fix string
	for _, m := range res.Messages {
		if m.Role == events.RoleUser && strings.HasPrefix(m.Text(), "Your final answer is not valid") {
			fix = m.Text()
		}
	}
	if fix == "" {
		t.Errorf("no fix request in the transcript %v", res.Messages)
	}
}

// A hook that keeps asking for another try stops at max_turn_end_retries,
// and the failure names the bound and the hook.
func TestLoopingContinueStopsAtBound(t *testing.T) {
	e := start(t)
	e.bridge(t, config(t, "hooks:\n  - name: json\n    builtin: {type: validate_json}\n").Hooks...)
	chain, _ := e.chain(t)
	model := llmtest.NewScripted()
	model.SetFallback(llmtest.TextStep("still not JSON"))
	w, err := worker.New(worker.Config{Provider: model, Hooks: chain, MaxTurnEndRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := w.Run(ctx(t), []events.Message{events.UserText("answer in JSON")})
	if res.Status != worker.StatusFailed || res.Code != worker.CodeMaxTurnEndRetries || res.Hook != "json" {
		t.Fatalf("status %s code %s hook %q reason %q", res.Status, res.Code, res.Hook, res.Reason)
	}
	if !errors.Is(res.Err(), worker.ErrMaxTurnEndRetries) || !strings.Contains(res.Reason, "max_turn_end_retries (2)") || !strings.Contains(res.Reason, `"json"`) {
		t.Errorf("reason %q", res.Reason)
	}
	// The first answer plus two retries reached the model, no more.
	if n := model.Calls(); n != 3 {
		t.Errorf("model called %d times, want 3", n)
	}
}

// require_approval pauses the turn; a resume approves, denies or edits the
// call, and the before_tool_call chain is not asked again.
func TestApprovalPauseAndResume(t *testing.T) {
	e := start(t)
	e.bridge(t, config(t, "hooks:\n  - name: approve\n    builtin: {type: require_approval, pattern: ^write$}\n  - name: mask\n    builtin: {type: mask_result, presets: [emails]}\n").Hooks...)
	chain, _ := e.chain(t)
	for _, tc := range []struct {
		name     string
		decision events.Decision
		want     string
	}{
		{"approve", events.Decision{Kind: events.DecisionApprove}, `ran with {"path":"a.txt"}, contact [REDACTED]`},
		{"edit", events.Decision{Kind: events.DecisionEdit, Input: json.RawMessage(`{"path":"b.txt"}`)}, `ran with {"path":"b.txt"}, contact [REDACTED]`},
		{"deny", events.Decision{Kind: events.DecisionDeny, Reason: "not today"}, "not today"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			echo := &echoTool{}
			model := llmtest.NewScripted(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "w1", Name: "write", Input: `{"path":"a.txt"}`}), llmtest.TextStep("ok"))
			w, err := worker.New(worker.Config{Provider: model, Tools: []tool.Tool{echo.tool(t, "write")}, Hooks: chain})
			if err != nil {
				t.Fatal(err)
			}
			res, _ := w.Run(ctx(t), []events.Message{events.UserText("write it")})
			if res.Status != worker.StatusPaused || res.Hook != "approve" || len(echo.inputs) != 0 {
				t.Fatalf("status %s hook %q inputs %q", res.Status, res.Hook, echo.inputs)
			}
			res, err = w.Resume(ctx(t), res.State, map[string]events.Decision{"w1": tc.decision})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != worker.StatusCompleted {
				t.Fatalf("after resume: %s %q", res.Status, res.Reason)
			}
			results := resultContents(res.Messages)
			if len(results) != 1 || !strings.Contains(results[0], tc.want) {
				t.Errorf("result %q, want it to contain %q", results, tc.want)
			}
		})
	}
}
