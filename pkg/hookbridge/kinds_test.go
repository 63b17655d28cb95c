package hookbridge_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/hook/hooktest"
	"github.com/llmworker/llmworker/pkg/hookbridge"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// Command hooks end to end: config → bridge → registry → chain.
func TestCommandHooksEndToEnd(t *testing.T) {
	e := start(t)
	dir := t.TempDir()
	// Reads the tool name from the stdin JSON and blocks "rm" with exit 2.
	deny := script(t, "deny.sh", `
input=$(cat)
case "$input" in
  *'"name":"rm"'*) echo "rm is not allowed (tool $LLMW_TOOL_NAME, hook $LLMW_HOOK_NAME)" >&2; exit 2 ;;
esac
exit 0
`)
	// Prints a JSON reply rewriting the input.
	rewrite := script(t, "rewrite.sh", `
cat >/dev/null
printf '%s' '{"result":"continue","tool_call":{"id":"c1","name":"echo","input":{"text":"rewritten"}},"variables":{"seen":"yes"}}'
`)
	// Starts a child that would outlive it, then hangs: a timeout must kill both.
	hang := script(t, "hang.sh", `
cat >/dev/null
sleep 60 &
echo $! > "$PIDFILE"
wait
`)
	fails := script(t, "fails.sh", "cat >/dev/null; echo broken >&2; exit 7\n")
	notJSON := script(t, "notjson.sh", "cat >/dev/null; echo hello\n")
	pidFile := filepath.Join(dir, "child.pid")
	yml := fmt.Sprintf(`
hooks:
  - name: deny-rm
    event: before_tool_call
    command: {argv: [%q]}
  - name: rewrite
    event: before_tool_call
    matcher: ^echo$
    command: {argv: [%q]}
  - name: hang
    event: after_tool_call
    timeout: 300ms
    matcher: ^slow$
    command: {argv: [%q], env: {PIDFILE: %q}}
  - name: fails
    event: after_tool_call
    matcher: ^fails$
    command: {argv: [%q]}
  - name: not-json
    event: after_tool_call
    matcher: ^notjson$
    command: {argv: [%q]}
  - name: fix-answer
    event: on_turn_end
    command: {shell: 'cat >/dev/null; echo "please add a summary" >&2; exit 2'}
`, deny, rewrite, hang, pidFile, fails, notJSON)
	e.bridge(t, config(t, yml).Hooks...)
	c, _ := e.chain(t)
	tn := &hook.Turn{ID: "t1"}

	out := c.RunBeforeToolCall(ctx(t), &hook.ToolCallInput{Turn: tn, Call: call("c0", "rm", `{"path":"/"}`)})
	if out.Result.Action != hook.ToolSkip || out.Hook != "deny-rm" || out.Result.Reason != "rm is not allowed (tool rm, hook deny-rm)" {
		t.Errorf("exit 2: %+v", out)
	}
	in := &hook.ToolCallInput{Turn: tn, Call: call("c1", "echo", `{"text":"hi"}`)}
	if out := c.RunBeforeToolCall(ctx(t), in); out.Stopped() || string(in.Call.Input) != `{"text":"rewritten"}` || tn.Vars.Get("seen") != "yes" {
		t.Errorf("JSON reply: %+v input %s vars %v", out, in.Call.Input, tn.Vars)
	}

	start := time.Now()
	res := &hook.ToolResultInput{Turn: tn, Call: call("c2", "slow", `{}`), Result: events.ToolResult{ToolUseID: "c2"}}
	out2 := c.RunAfterToolCall(ctx(t), res)
	// Either side may notice first: the turn's chain gives up at 300ms, the
	// bridge kills the command at its own deadline and replies an error.
	// Both are a failed hook.
	if !out2.Failed || !(errors.Is(out2.Err, hook.ErrTimeout) || strings.Contains(out2.Err.Error(), "did not finish within")) {
		t.Errorf("timeout: %+v", out2)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("timeout took %v", d)
	}
	// The process group was killed: the background child is gone.
	pidB := waitFile(t, pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidB)))
	natstest.Eventually(t, fmt.Sprintf("child %d of the timed-out hook to end", pid), func() bool {
		return syscall.Kill(pid, 0) != nil
	})

	for _, name := range []string{"fails", "notjson"} {
		out := c.RunAfterToolCall(ctx(t), &hook.ToolResultInput{Turn: tn, Call: call("c3", name, `{}`), Result: events.ToolResult{ToolUseID: "c3"}})
		if !out.Failed || !errors.Is(out.Err, hooknats.ErrResponder) {
			t.Errorf("%s: %+v", name, out)
		}
	}
	if out := c.RunAfterToolCall(ctx(t), &hook.ToolResultInput{Turn: tn, Call: call("c3", "fails", `{}`), Result: events.ToolResult{ToolUseID: "c3"}}); !strings.Contains(out.Err.Error(), "exited with code 7: broken") {
		t.Errorf("exit code error %v", out.Err)
	}

	te := c.RunTurnEnd(ctx(t), &hook.TurnEndInput{Turn: tn, Messages: []events.Message{events.AssistantText("done")}})
	if te.Result.Action != hook.TurnContinueWithMessages || len(te.Result.Messages) != 1 || te.Result.Messages[0].Text() != "please add a summary" {
		t.Errorf("on_turn_end exit 2: %+v", te)
	}
}

func waitFile(t *testing.T, p string) []byte {
	t.Helper()
	var b []byte
	natstest.Eventually(t, p+" written", func() bool {
		b, _ = os.ReadFile(p)
		return len(b) > 0
	})
	return b
}

// The model's tool input never reaches a shell: metacharacters in it are
// inert, for argv and for a user-written shell line alike.
func TestCommandHookNeverInterpolatesInput(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "pwned")
	evil := fmt.Sprintf(`{"x":"$(touch %s)","y":"; touch %s","z":"`+"`touch %s`"+`"}`, marker, marker, marker)
	argvHook, err := hookbridge.Command(events.HookBeforeToolCall, hookbridge.CommandOptions{Argv: []string{"/bin/cat"}})
	if err != nil {
		t.Fatal(err)
	}
	shellHook, err := hookbridge.Command(events.HookBeforeToolCall, hookbridge.CommandOptions{Shell: `read -r line; echo $LLMW_TOOL_NAME >/dev/null; exit 0`})
	if err != nil {
		t.Fatal(err)
	}
	req := &events.HookRequest{Event: events.HookBeforeToolCall, TurnID: "t", ToolCall: &events.ToolCall{ID: "c", Name: "x", Input: json.RawMessage(evil)}}
	// /bin/cat echoes the request: stdout is the request JSON, not a
	// response, so the hook fails; what matters is that nothing ran.
	_, _ = argvHook.ServeHook(ctx(t), req)
	if _, err := shellHook.ServeHook(ctx(t), req); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("tool input was executed by a shell")
	}
}

// A command hook's environment is minimal: no provider keys, no NATS
// credentials, nothing of the bridge's environment but CommandEnv, plus the
// hook's own env and the request's LLMW_* variables.
func TestCommandHookEnvironmentIsMinimal(t *testing.T) {
	for k, v := range map[string]string{"OPENAI_API_KEY": "sk-secret", "ANTHROPIC_API_KEY": "sk-ant", "NATS_CREDS": "/etc/creds", "NATS_URL": "nats://x", "LLMW_SECRET": "s", "PATH": os.Getenv("PATH")} {
		t.Setenv(k, v)
	}
	out := filepath.Join(t.TempDir(), "env")
	h, err := hookbridge.Command(events.HookBeforeToolCall, hookbridge.CommandOptions{
		Argv: []string{"/bin/sh", "-c", "env > " + out},
		Env:  map[string]string{"MY_SETTING": "on"},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := &events.HookRequest{Hook: "h", Event: events.HookBeforeToolCall, TurnID: "t1", ToolCall: &events.ToolCall{ID: "c", Name: "x", Input: json.RawMessage(`{}`)}}
	if _, err := h.ServeHook(ctx(t), req); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, _, _ := strings.Cut(line, "=")
		got[k] = true
	}
	for _, secret := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "NATS_CREDS", "NATS_URL", "LLMW_SECRET"} {
		if got[secret] {
			t.Errorf("%s reached the command hook", secret)
		}
	}
	for _, want := range []string{"PATH", "MY_SETTING", "LLMW_HOOK_NAME", "LLMW_TURN_ID", "LLMW_TOOL_NAME"} {
		if !got[want] {
			t.Errorf("%s missing from the command hook's environment: %v", want, got)
		}
	}
	for k := range got {
		if !slices.Contains(hookbridge.CommandEnv, k) && k != "MY_SETTING" && !strings.HasPrefix(k, "LLMW_") && k != "PWD" && k != "SHLVL" && k != "_" {
			t.Errorf("unexpected variable %s in the command hook's environment", k)
		}
	}
}

// HTTP hooks end to end: the request is POSTed as JSON; 2xx JSON replies
// answer; other statuses and timeouts are failures.
func TestHTTPHookEndToEnd(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req events.HookRequest
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/mask":
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			res := *req.ToolResult
			res.Content = strings.ReplaceAll(res.Content, "hunter2", "***")
			_ = json.NewEncoder(w).Encode(events.HookResponse{Result: events.HookContinue, ToolResult: &res})
		case "/500":
			http.Error(w, "policy engine down", http.StatusInternalServerError)
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	defer close(release)
	e := start(t)
	yml := fmt.Sprintf(`
hooks:
  - name: mask
    event: after_tool_call
    matcher: ^read$
    http: {url: "%s/mask", headers: {Authorization: "Bearer ${TOKEN}"}}
  - name: five-hundred
    event: after_tool_call
    matcher: ^broken$
    failure: fail_open
    http: {url: "%s/500"}
  - name: slow
    event: on_abort
    timeout: 200ms
    http: {url: "%s/slow"}
`, srv.URL, srv.URL, srv.URL)
	f, err := hookbridge.ParseConfig("http.yaml", []byte(yml), hookbridge.ParseOptions{Getenv: func(k string) string {
		if k == "TOKEN" {
			return "s3cret"
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.bridge(t, f.Hooks...)
	c, _ := e.chain(t)
	rec := &hooktest.Recorder{}
	tn := &hook.Turn{ID: "t1", Observer: rec}
	in := &hook.ToolResultInput{Turn: tn, Call: call("c1", "read", `{}`), Result: events.ToolResult{ToolUseID: "c1", Content: "password: hunter2"}}
	if out := c.RunAfterToolCall(ctx(t), in); out.Stopped() || in.Result.Content != "password: ***" {
		t.Errorf("mask: %+v %q", out, in.Result.Content)
	}
	rec.Reset()
	if out := c.RunAfterToolCall(ctx(t), &hook.ToolResultInput{Turn: tn, Call: call("c2", "broken", `{}`), Result: events.ToolResult{ToolUseID: "c2"}}); out.Stopped() {
		t.Errorf("500 fail_open: %+v", out)
	}
	if ds := rec.Decisions(); len(ds) != 1 || !ds[0].Failed || !strings.Contains(ds[0].Reason, "500") {
		t.Errorf("500 decision %+v", ds)
	}
	rec.Reset()
	c.RunAbort(ctx(t), &hook.AbortInput{Turn: tn, Reason: "x"})
	if ds := rec.Decisions(); len(ds) != 1 || !ds[0].Failed {
		t.Errorf("slow decision %+v", ds)
	}
}

// An HTTP hook's 2xx reply must be a JSON hook response with a "result",
// as a reply over NATS must: an empty body, null or an object without
// "result" is a hook failure, which the hook's failure policy handles
// (fail_closed stops the hook point, fail_open goes on), and the decision
// says what was wrong.
func TestHTTPHookEmptyReplyIsAFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/empty":
			w.WriteHeader(http.StatusOK)
		case "/no-content":
			w.WriteHeader(http.StatusNoContent)
		case "/null":
			_, _ = io.WriteString(w, "null\n")
		case "/no-result":
			_, _ = io.WriteString(w, `{"reason":"looks fine"}`)
		}
	}))
	defer srv.Close()
	e := start(t)
	var yml strings.Builder
	yml.WriteString("hooks:\n")
	paths := []string{"empty", "no-content", "null", "no-result"}
	for _, p := range paths {
		for _, policy := range []string{"fail_closed", "fail_open"} {
			fmt.Fprintf(&yml, "  - name: %s-%s\n    event: before_tool_call\n    matcher: ^%s-%s$\n    failure: %s\n    http: {url: \"%s/%s\"}\n",
				p, policy, p, policy, policy, srv.URL, p)
		}
	}
	f, err := hookbridge.ParseConfig("http.yaml", []byte(yml.String()), hookbridge.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.bridge(t, f.Hooks...)
	c, _ := e.chain(t)
	for _, p := range paths {
		for _, policy := range []string{"fail_closed", "fail_open"} {
			t.Run(p+"/"+policy, func(t *testing.T) {
				rec := &hooktest.Recorder{}
				name := p + "-" + policy
				out := c.RunBeforeToolCall(ctx(t), &hook.ToolCallInput{Turn: &hook.Turn{ID: "t1", Observer: rec}, Call: call("c1", name, `{}`)})
				ds := rec.Decisions()
				if len(ds) != 1 || !ds[0].Failed || ds[0].Hook != name || !strings.Contains(ds[0].Reason, "not a JSON hook response") {
					t.Fatalf("decisions %+v, want one failed decision saying the reply is not a hook response", ds)
				}
				if policy == "fail_open" {
					if out.Stopped() || ds[0].Result != events.HookContinue {
						t.Errorf("fail_open: outcome %+v, decision %+v", out, ds[0])
					}
					return
				}
				if !out.Failed || out.Result.Action != hook.ToolAbort || out.Hook != name {
					t.Errorf("fail_closed: outcome %+v", out)
				}
			})
		}
	}
}
