package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/internal/service/ingestsvc"
	"github.com/llmworker/llmworker/internal/service/toolexecsvc"
)

// startReplayStack runs what `up --replay` runs, with no hooks, replaying
// at full speed.
func startReplayStack(t *testing.T) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := StartStack(ctx, StackConfig{Getenv: envOf(),
		Ingest: ingestsvc.Options{Replay: true}, Toolexec: toolexecsvc.Options{Replay: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = st.Stop(ctx)
	})
	return st
}

// Every command that runs a replay model says once that it plays a
// recording, which one, and the question it answers whatever the
// prompt; and the model answers with its recording from every command.
func TestReplaySaysWhatItPlays(t *testing.T) {
	st := startReplayStack(t)
	anthropic, _ := replay.Lookup("anthropic")
	openai, _ := replay.Lookup("openai")
	for _, tc := range []struct {
		name   string
		env    Env
		args   []string
		sc     replay.Scenario
		stderr bool // the notice goes to stderr (stdout is for scripts)
	}{
		{"chat --model replay against a running system, interactive",
			Env{Terminal: true, StdinTerminal: true, Getenv: envOf("NATS_URL", st.URL, "NO_COLOR", "1"), Stdin: strings.NewReader("hello\n/exit\n")},
			[]string{"chat", "--model", "replay:anthropic"}, anthropic, false},
		{"chat --replay with a prompt of its own",
			Env{}, []string{"chat", "--replay", "--replay-pace", "0", "--model", "replay:openai", "hi"}, openai, false},
		{"turn submit",
			Env{Getenv: envOf("NATS_URL", st.URL)}, []string{"turn", "submit", "--model", "replay:openai", "--prompt", "hi", "--follow"}, openai, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.env, tc.args...)
			if r.code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			notice := r.stdout
			if tc.stderr {
				notice = r.stderr
			}
			for _, want := range []string{replay.Label, "scenario " + tc.sc.Name, fmt.Sprintf("the question %q", tc.sc.Prompt)} {
				if n := strings.Count(notice, want); n != 1 {
					t.Errorf("%q said %d times, want once:\n%s", want, n, notice)
				}
			}
			if want := recordedText(t, tc.sc.Steps[len(tc.sc.Steps)-1]); !strings.Contains(r.stdout, want) {
				t.Errorf("the answer is not the recorded one %q:\n%s", Truncate(want, 60), r.stdout)
			}
		})
	}
}

// up --replay lists the replay models with the question each answers, and
// suggests commands the person can run as they ran up.
func TestUpBannerSaysWhatReplayPlaysAndHowToRun(t *testing.T) {
	st := &Stack{URL: "nats://127.0.0.1:4999", Services: AllServices, GatewayURL: "http://127.0.0.1:8080"}
	var b strings.Builder
	printConnect(&Env{Stdout: &b, Command: "go run ./cmd/llmworker"}, st, true, "", "replay:anthropic")
	out := b.String()
	for _, sc := range replay.Scenarios() {
		if !strings.Contains(out, fmt.Sprintf("%s %q", sc.ModelString(), sc.Prompt)) &&
			!strings.Contains(out, fmt.Sprintf("%-25s %q", sc.ModelString(), sc.Prompt)) {
			t.Errorf("banner lacks %s and its question:\n%s", sc.ModelString(), out)
		}
	}
	for _, want := range []string{
		"NATS_URL=nats://127.0.0.1:4999 go run ./cmd/llmworker chat --model replay:",
		"NATS_URL=nats://127.0.0.1:4999 go run ./cmd/llmworker turn submit --model replay:",
		"open the web UI (model replay:anthropic;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("banner lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, " llmworker chat") {
		t.Errorf("banner suggests a llmworker binary the person did not run:\n%s", out)
	}
}

func TestCommandName(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "llmworker")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// What go run starts: the executable it cached in the build cache,
	// or one in $WORK/b001/exe/, $WORK = go-build<n>.
	goRun := filepath.Join(os.TempDir(), "go-build1234", "b001", "exe", "llmworker")
	goRunCached := filepath.Join("/root", ".cache", "go-build", "95", strings.Repeat("9a", 32)+"-d", "llmworker")
	for arg0, want := range map[string]string{
		goRun:       "go run ./cmd/llmworker",
		goRunCached: "go run ./cmd/llmworker",
		"llmworker": "llmworker",
		bin:         bin,
		self:        self,
	} {
		if got := CommandName(arg0); got != want {
			t.Errorf("CommandName(%q) = %q, want %q", arg0, got, want)
		}
	}
	// On PATH, the name is enough.
	t.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if got := CommandName(bin); got != "llmworker" {
		t.Errorf("CommandName(%q) with its directory on PATH = %q, want llmworker", bin, got)
	}
}
