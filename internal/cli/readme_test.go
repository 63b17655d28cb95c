package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// readmeBlock returns the sh code block of README.md that follows the
// marker <!-- readme-test: name -->.
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
	st := startReplayStack(t)
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

// TestReadmeCurl runs the README's curl line against the gateway of a
// running system (its address swapped for the test's): the stream is the
// UI message stream protocol's, with the recorded turn to its end. CI
// installs curl (.ci/run); elsewhere the test is skipped without it.
func TestReadmeCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not installed: .ci/run installs it")
		}
		t.Skip("curl is not installed (apt-get install curl)")
	}
	var line string
	for l := range strings.SplitSeq(strings.ReplaceAll(readmeBlock(t, "curl"), "\\\n", " "), "\n") {
		if strings.HasPrefix(l, "curl ") {
			line = l
		}
	}
	const readmeURL = "http://127.0.0.1:8080"
	if line == "" || !strings.Contains(line, readmeURL+"/api/chat") {
		t.Fatalf("README block curl lacks a curl line posting to %s/api/chat:\n%s", readmeURL, readmeBlock(t, "curl"))
	}
	// As `up --replay` runs it: the gateway's model is the first scenario.
	st := startReplayStack(t)
	if st.GatewayURL == "" {
		t.Fatal("the stack runs no gateway")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", strings.Replace(line, readmeURL, st.GatewayURL, 1))
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(curl)+string(os.PathListSeparator)+os.Getenv("PATH"))
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	sc := replay.Scenarios()[0]
	for _, want := range []string{
		`data: {"type":"start","messageId":`,
		`"type":"reasoning-delta"`,
		`"type":"tool-input-available","toolCallId":`,
		`"toolName":"` + sc.Tools[0] + `"`,
		`"type":"tool-output-available"`,
		`"type":"text-delta"`,
		`data: {"type":"finish","finishReason":"stop"}`,
		"data: [DONE]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stream lacks %s:\n%s", want, out)
		}
	}
	if !strings.Contains(line, sc.Prompt) {
		t.Errorf("the README asks the gateway's replay model (%s) another question than its recording's %q", sc.ModelString(), sc.Prompt)
	}
}

// TestReadmeLayoutListsEveryPackage: the README's layout table names every
// directory of pkg/ and cmd/.
func TestReadmeLayoutListsEveryPackage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(b), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no Layout section")
	}
	for _, top := range []string{"pkg", "cmd"} {
		dirs, err := os.ReadDir(filepath.Join("..", "..", top))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			if !d.IsDir() {
				continue
			}
			if !regexp.MustCompile("`" + top + "/(" + d.Name() + "`|\\{([a-z]+,)*" + d.Name() + "[,}])").MatchString(layout) {
				t.Errorf("the README's layout table lacks %s/%s", top, d.Name())
			}
		}
	}
}

// TestReadmeA2ACurl runs the README's A2A curl lines against the gateway
// of a running system with the agent geo on the replay model that
// recorded its question: the card names the agent, the JSON-RPC call
// answers with the completed task and the recorded answer.
func TestReadmeA2ACurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not installed: .ci/run installs it")
		}
		t.Skip("curl is not installed (apt-get install curl)")
	}
	const readmeURL = "http://127.0.0.1:8080"
	var lines []string
	for l := range strings.SplitSeq(strings.ReplaceAll(readmeBlock(t, "a2a-curl"), "\\\n", " "), "\n") {
		if strings.HasPrefix(l, "curl ") && strings.Contains(l, readmeURL+"/a2a/geo") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("README block a2a-curl: want the card's and a call's curl lines, got %q", lines)
	}
	st := startReplayStack(t)
	js, err := jetstream.New(st.NC)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	def := events.AgentDefinition{Name: "geo", Model: "replay:gemini", Tools: []string{"get_capital", "get_temperature"}}
	if _, _, err := agents.New(js).Put(ctx, def, agents.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	run := func(line string) string {
		cmd := exec.CommandContext(ctx, "sh", "-c", strings.Replace(line, readmeURL, st.GatewayURL, 1))
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(curl)+string(os.PathListSeparator)+os.Getenv("PATH"))
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, b)
		}
		return string(b)
	}
	if card := run(lines[0]); !strings.Contains(card, `"name": "geo"`) || !strings.Contains(card, `"protocolVersion": "1.0"`) {
		t.Errorf("card:\n%s", card)
	}
	if out := run(lines[1]); !strings.Contains(out, `"state":"TASK_STATE_COMPLETED"`) || !strings.Contains(out, "Paris") {
		t.Errorf("SendMessage:\n%s", out)
	}
}
