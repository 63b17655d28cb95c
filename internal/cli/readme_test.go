package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/internal/service/ingestsvc"
	"github.com/llmworker/llmworker/internal/service/toolexecsvc"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// readmeBlock returns the code block of README.md that follows the marker
// <!-- readme-test: name -->.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- readme-test: "+name+" -->\n```sh\n")
	if !ok {
		t.Fatalf("README.md has no block %q", name)
	}
	block, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		t.Fatalf("README.md block %q is not closed", name)
	}
	return block
}

// TestReadmeNATSCLI runs the README's lines that use the nats CLI (a real
// client in another code base) against a running system: the subscriber
// must see the turn to its end, with the recorded answer. CI installs the
// CLI (.ci/run); elsewhere the test is skipped without it.
func TestReadmeNATSCLI(t *testing.T) {
	natsCLI, err := exec.LookPath("nats")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("the nats CLI is not installed: .ci/run installs github.com/nats-io/natscli/nats@v0.5.0")
		}
		t.Skip("the nats CLI is not installed (go install github.com/nats-io/natscli/nats@v0.5.0)")
	}
	// As `up --replay` runs it: no hooks.
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	st, err := StartStack(sctx, StackConfig{Getenv: envOf(),
		Ingest: ingestsvc.Options{Replay: true}, Toolexec: toolexecsvc.Options{Replay: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = st.Stop(ctx)
	})
	var sub, pub string
	for line := range strings.SplitSeq(strings.ReplaceAll(readmeBlock(t, "nats-cli"), "\\\n", " "), "\n") {
		switch {
		case strings.HasPrefix(line, "nats sub "):
			sub, _, _ = strings.Cut(line, " &")
		case strings.HasPrefix(line, "nats pub "):
			pub = line
		}
	}
	if sub == "" || pub == "" {
		t.Fatalf("README block lacks the nats sub and nats pub lines")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env := append(os.Environ(), "NATS_URL="+st.URL, "PATH="+filepath.Dir(natsCLI)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out := &syncBuffer{}
	subCmd := exec.CommandContext(ctx, "sh", "-c", "exec "+sub)
	subCmd.Env, subCmd.Stdout, subCmd.Stderr = env, out, out
	if err := subCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = subCmd.Process.Kill()
		_ = subCmd.Wait()
	}()
	defer func() {
		if t.Failed() {
			t.Logf("subscriber output:\n%s", out.String())
		}
	}()
	poll := func(what string, ok func(string) bool) {
		t.Helper()
		natstest.EventuallyWithin(t, time.Minute, what, func() bool { return ok(out.String()) })
	}
	poll("subscription", func(s string) bool { return strings.Contains(s, "Subscribing on") })
	pubCmd := exec.CommandContext(ctx, "sh", "-c", pub)
	pubCmd.Env = env
	if b, err := pubCmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", pub, err, b)
	}
	poll("llmw.turn.completed", func(s string) bool { return strings.Contains(s, "llmw.turn.completed") })
	// The answer as recorded, whole in llmw.text.complete.
	want := recordedText(t, "openai-chat/text-after-tool-result_gpt-4o-mini.sse")
	for _, s := range []string{"llmw.block.delta", "llmw.tool.result", want} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("subscriber output lacks %q:\n%s", s, out.String())
		}
	}
}
