package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/leaf/fixtures"
	"github.com/llmworker/llmworker/internal/service/hookbridgesvc"
	"github.com/llmworker/llmworker/internal/service/ingestsvc"
	"github.com/llmworker/llmworker/internal/service/toolexecsvc"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// The genai SDK's dependencies start an opencensus worker in an init
// function; it is not ours and never ends.
//
// With $LLMW_CLI_TEST_RUN set the test binary is the llmworker command
// instead, run with those arguments (tests start it as another process:
// a toolexec replica beside the one under test); SIGTERM stops it.
func TestMain(m *testing.M) {
	if args := os.Getenv(runEnv); args != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		code := Main(ctx, strings.Fields(args), Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
		stop()
		os.Exit(code)
	}
	goleak.VerifyTestMain(m, append(natstest.NotOurGoroutines(), goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))...)
}

const runEnv = "LLMW_CLI_TEST_RUN"

// startProcess runs the llmworker command with args in another process
// (this test binary, see TestMain) until the test ends.
func startProcess(t *testing.T, args ...string) *syncBuffer {
	t.Helper()
	out := &syncBuffer{}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runEnv+"="+strings.Join(args, " "))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("llmworker %s did not stop on SIGTERM; its output:\n%s", strings.Join(args, " "), out.String())
		}
	})
	return out
}

// syncBuffer is a bytes.Buffer safe for a command writing while the test
// polls it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// envOf returns a getenv over a fixed map: tests never see the machine's
// provider keys or NATS_URL.
func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs one command in-process.
func runCLI(t *testing.T, env Env, args ...string) result {
	t.Helper()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	env.Stdout, env.Stderr = out, errOut
	if env.Getenv == nil {
		env.Getenv = envOf()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := Main(ctx, args, env)
	return result{code, out.String(), errOut.String()}
}

// shared is a stack with replay, demo tools and an approval hook for
// get_capital (the gemini and openai-responses scenarios pause).
func startShared(t *testing.T, pace time.Duration) *Stack {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hooks.yaml")
	yaml := "hooks:\n" +
		"  - name: approve-capital\n    builtin:\n      type: require_approval\n      pattern: \"^get_capital$\"\n      reason: capital lookups need approval\n" +
		"  - name: no-shell\n    priority: -5\n    builtin:\n      type: deny_tools\n      pattern: \"^shell$\"\n      reason: no shell here\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := StartStack(ctx, StackConfig{Getenv: envOf(),
		Ingest:     ingestsvc.Options{Replay: true, ReplayPace: pace},
		Toolexec:   toolexecsvc.Options{Replay: true},
		Hookbridge: hookbridgesvc.Options{Config: cfg},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := st.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	// The watcher applies registrations asynchronously: wait until the
	// chain has what the registry has.
	if err := st.SyncHooks(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// submit publishes a turn request.
func submit(t *testing.T, st *Stack, req events.TurnRequest) {
	t.Helper()
	tc, _ := turn.NewClient(st.NC, turn.ClientOptions{Prefix: st.Prefix})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if req.Messages == nil {
		req.Messages = []events.Message{events.UserText("hi")}
	}
	if req.Tools == nil {
		req.Tools = []string{"*"}
	}
	if err := tc.Submit(ctx, &req); err != nil {
		t.Fatal(err)
	}
}

// waitFor follows a turn's events until one of type typ arrives.
func waitFor(t *testing.T, st *Stack, turnID, typ string) *events.Envelope {
	t.Helper()
	tc, _ := turn.NewClient(st.NC, turn.ClientOptions{Prefix: st.Prefix})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := tc.Follow(ctx, events.NewSubjects(st.Prefix).EventsOfTurn(turnID))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	var seen []string
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("turn %s: no %s within 30s; saw %v", turnID, typ, seen)
		case it := <-f.C():
			if it.Err != nil {
				t.Fatal(it.Err)
			}
			seen = append(seen, it.Env.Type)
			if it.Env.Type == typ {
				return it.Env
			}
		}
	}
}

// recordedText is the answer text of a recorded stream, read from the
// fixture with plain encoding/json (independently of the adapters).
func recordedText(t *testing.T, name string) string {
	t.Helper()
	body, err := fixtures.SSE(name)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Type  string          `json:"type"`
			Delta json.RawMessage `json:"delta"`
			// OpenAI Chat
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			// Gemini
			Candidates []struct {
				Content struct {
					Parts []struct {
						Text    string `json:"text"`
						Thought bool   `json:"thought"`
					} `json:"parts"`
				} `json:"content"`
			} `json:"candidates"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch {
		case c.Type == "content_block_delta": // Anthropic
			var d struct {
				Type, Text string
			}
			_ = json.Unmarshal(c.Delta, &d)
			if d.Type == "text_delta" {
				b.WriteString(d.Text)
			}
		case c.Type == "response.output_text.delta": // OpenAI Responses
			var d string
			_ = json.Unmarshal(c.Delta, &d)
			b.WriteString(d)
		}
		for _, ch := range c.Choices {
			b.WriteString(ch.Delta.Content)
		}
		for _, cand := range c.Candidates {
			for _, p := range cand.Content.Parts {
				if !p.Thought {
					b.WriteString(p.Text)
				}
			}
		}
	}
	if b.Len() == 0 {
		t.Fatalf("%s has no text", name)
	}
	return b.String()
}
