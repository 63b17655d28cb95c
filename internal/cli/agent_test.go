package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
)

// agent put, list, show and rm against a running stack, and turns that
// name an agent (docs/protocol.md §5, "Agents"; README "Agents").
func TestAgentCommands(t *testing.T) {
	st := startShared(t, 2*time.Millisecond)
	env := Env{Getenv: envOf("NATS_URL", st.URL)}
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	revOf := func(r result) string {
		t.Helper()
		m := regexp.MustCompile(`^support revision (\d+)\n$`).FindStringSubmatch(r.stdout)
		if r.code != 0 || m == nil {
			t.Fatalf("put: exit %d, stdout %q, stderr %q; want \"support revision N\"", r.code, r.stdout, r.stderr)
		}
		return m[1]
	}

	v1 := write("v1.yaml", "name: support\ndescription: answers questions\nmodel: replay:anthropic\nsystem: first prompt\n")
	rev1 := revOf(runCLI(t, env, "agent", "put", v1))
	v2 := write("v2.json", `{"name":"support","description":"answers questions","model":"replay:anthropic","system":"second prompt"}`)
	rev2 := revOf(runCLI(t, env, "agent", "put", v2))

	r := runCLI(t, env, "agent", "list")
	if r.code != 0 || !regexp.MustCompile(`(?m)^support\s+`+rev2+`\s+replay:anthropic\s+answers questions$`).MatchString(r.stdout) {
		t.Fatalf("list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	show := func(ref string) events.AgentDefinition {
		t.Helper()
		r := runCLI(t, env, "agent", "show", ref)
		var d events.AgentDefinition
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &d) != nil {
			t.Fatalf("show %s: exit %d, stdout %q, stderr %q; want the definition as JSON", ref, r.code, r.stdout, r.stderr)
		}
		return d
	}
	if d := show("support"); d.System != "second prompt" {
		t.Errorf("show support: system %q, want the latest", d.System)
	}
	if d := show("support@" + rev1); d.System != "first prompt" {
		t.Errorf("show support@%s: system %q, want the first", rev1, d.System)
	}

	// Bad files are refused naming the field; unknown sub-agents unless
	// --force.
	if r := runCLI(t, env, "agent", "put", write("typo.yaml", "name: x\nmodel: replay:anthropic\nsytem: hi\n")); r.code != 2 || !strings.Contains(r.stderr, `"sytem"`) {
		t.Errorf("unknown field: exit %d, stderr %q; want 2 naming sytem", r.code, r.stderr)
	}
	lead := write("lead.yaml", "name: lead\nmodel: replay:anthropic\nagents: [ghost]\n")
	if r := runCLI(t, env, "agent", "put", lead); r.code != 1 || !strings.Contains(r.stderr, "ghost") || !strings.Contains(r.stderr, "--force") {
		t.Errorf("unknown sub-agent: exit %d, stderr %q; want 1 naming ghost and --force", r.code, r.stderr)
	}
	if r := runCLI(t, env, "agent", "put", lead, "--force"); r.code != 0 || !strings.Contains(r.stderr, "warning:") || !strings.HasPrefix(r.stdout, "lead revision ") {
		t.Errorf("forced put: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// A turn of the agent runs with its model.
	r = runCLI(t, env, "turn", "submit", "--agent", "support", "--prompt", "hi", "--follow")
	if r.code != 0 || !strings.Contains(r.stdout, "✓ completed") {
		t.Fatalf("turn of support: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	if r := runCLI(t, env, "agent", "rm", "support"); r.code != 0 {
		t.Fatalf("rm: exit %d: %s", r.code, r.stderr)
	}
	if r := runCLI(t, env, "agent", "show", "support"); r.code != 1 || !strings.Contains(r.stderr, "unknown agent") {
		t.Errorf("show after rm: exit %d, stderr %q; want 1, unknown agent", r.code, r.stderr)
	}
	if d := show("support@" + rev2); d.System != "second prompt" {
		t.Errorf("show support@%s after rm: system %q", rev2, d.System)
	}
	if r := runCLI(t, env, "agent", "show", "support", "--history"); r.code != 0 || strings.Count(r.stdout, "\n") != 4 || !strings.Contains(r.stdout, "(deleted)") {
		t.Errorf("history: exit %d\n%s%s; want a header, two puts and the delete", r.code, r.stdout, r.stderr)
	}

	// A turn of an agent that is gone is rejected with unknown_agent.
	r = runCLI(t, env, "turn", "submit", "--agent", "support", "--prompt", "hi", "--follow")
	if r.code != 1 || !strings.Contains(r.stdout, `no agent "support"`) || !strings.Contains(r.stdout, "[unknown_agent]") {
		t.Errorf("turn of a deleted agent: exit %d\n%s%s; want 1 and the reason", r.code, r.stdout, r.stderr)
	}
}

// The README's "Agents" lines run as written against `up --replay`'s
// stack, with the --model replay:gemini the README says to add there: the
// example definition is stored and listed, and a turn of it completes.
func TestReadmeAgents(t *testing.T) {
	st := startReplayStack(t)
	env := Env{Getenv: envOf("NATS_URL", st.URL)}
	lines := strings.Split(readmeBlock(t, "agents"), "\n")
	if len(lines) != 3 {
		t.Fatalf("README agents block: %d lines, want put, list and submit", len(lines))
	}
	var outputs []string
	for _, line := range lines {
		args := shellWords(t, line)
		if args[0] != "llmworker" {
			t.Fatalf("README line %q does not run llmworker", line)
		}
		args = args[1:]
		for i, a := range args {
			if strings.HasPrefix(a, "deploy/") {
				args[i] = filepath.Join("..", "..", a)
			}
		}
		if args[0] == "turn" {
			args = append(args, "--model", "replay:gemini")
		}
		r := runCLI(t, env, args...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", line, r.code, r.stdout, r.stderr)
		}
		outputs = append(outputs, r.stdout)
	}
	if !regexp.MustCompile(`^geo revision \d+\n$`).MatchString(outputs[0]) {
		t.Errorf("put printed %q, want \"geo revision N\"", outputs[0])
	}
	if !regexp.MustCompile(`(?m)^geo\s+\d+\s+anthropic:claude-sonnet-4-5\s+Answers questions about countries`).MatchString(outputs[1]) {
		t.Errorf("list printed:\n%s", outputs[1])
	}
	for _, want := range []string{"→ get_capital", "→ get_temperature", "✓ completed"} {
		if !strings.Contains(outputs[2], want) {
			t.Errorf("the turn of geo lacks %q:\n%s", want, outputs[2])
		}
	}
}

// shellWords splits a README command line: words separated by spaces,
// double-quoted words kept whole.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var out []string
	for line != "" {
		line = strings.TrimLeft(line, " ")
		if line == "" {
			break
		}
		if line[0] == '"' {
			end := strings.IndexByte(line[1:], '"')
			if end < 0 {
				t.Fatalf("unclosed quote in %q", line)
			}
			out = append(out, line[1:1+end])
			line = line[2+end:]
			continue
		}
		w, rest, _ := strings.Cut(line, " ")
		out = append(out, w)
		line = rest
	}
	return out
}
