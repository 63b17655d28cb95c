package hookbridgesvc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/hookbridgesvc"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const config = `hooks:
  - name: no-shell
    builtin:
      type: deny_tools
      pattern: "^shell$"
      reason: "no shell here"
`

func writeConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hooks.yaml")
	if err := os.WriteFile(p, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The service serves the hooks of its config file: a turn's chain, fed by
// the registry as the turn service's is, gets the hook's answer for a
// matching call and none for another; Stop drains and, with Unregister,
// takes the hooks out of the registry.
func TestAnswersAHookAndDrains(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	svc := &hookbridgesvc.Service{Options: hookbridgesvc.Options{Config: writeConfig(t), Unregister: true}}
	root, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := svc.Start(root, service.Env{NC: srv.NC, Instance: "hb1", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}

	ctx := natstest.Context(t)
	chain := &hook.Chain{}
	w, err := hooknats.Watch(ctx, srv.JS, chain, hooknats.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	run := func(name string) hook.Outcome[hook.BeforeToolCallResult] {
		return chain.RunBeforeToolCall(ctx, &hook.ToolCallInput{Turn: &hook.Turn{ID: "t1"}, Call: events.ToolCall{ID: "c-" + name, Name: name, Input: json.RawMessage(`{}`)}})
	}
	if out := run("shell"); out.Result.Action != hook.ToolSkip || out.Hook != "no-shell" || out.Result.Reason != "no shell here" {
		t.Errorf("shell: %s by %q %q, want skip by no-shell with the config's reason", out.Kind, out.Hook, out.Result.Reason)
	}
	if out := run("calculator"); out.Stopped() {
		t.Errorf("calculator: %s by %q %q, want continue", out.Kind, out.Hook, out.Result.Reason)
	}

	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer scancel()
	if err := st.Stop(sctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	kv, err := srv.JS.KeyValue(ctx, events.BucketHooks)
	if err != nil {
		t.Fatal(err)
	}
	if regs, err := hooknats.List(ctx, kv); err != nil || len(regs) != 0 {
		t.Errorf("registry after Stop with Unregister: %v, %v; want empty", regs, err)
	}
}

// Preflight with Check prints each hook of the config and says to exit
// without connecting; without a config it is refused, naming the flag.
func TestPreflight(t *testing.T) {
	var out bytes.Buffer
	svc := &hookbridgesvc.Service{Options: hookbridgesvc.Options{Config: writeConfig(t), Check: true}}
	exit, err := svc.Preflight(&out)
	if err != nil || !exit {
		t.Fatalf("Preflight = %v, %v; want exit", exit, err)
	}
	if !strings.HasPrefix(out.String(), "no-shell\tbefore_tool_call\t") || !strings.Contains(out.String(), `matcher="^shell$"`) {
		t.Errorf("--check printed %q", out.String())
	}
	if _, err := (&hookbridgesvc.Service{}).Preflight(io.Discard); err == nil || !strings.Contains(err.Error(), "--config") {
		t.Errorf("no config: %v", err)
	}
}
