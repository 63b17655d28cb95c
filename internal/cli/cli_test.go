package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/internal/replay/demotools"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/toolexec/builtin"
	"github.com/llmworker/llmworker/pkg/turn"
)

// TestChatReplay runs `chat --replay` end to end for every provider
// format: embedded NATS, ingest with the real adapters, turn, toolexec.
func TestChatReplay(t *testing.T) {
	for _, sc := range replay.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			r := runCLI(t, Env{}, "chat", "--replay", "--replay-pace", "0", "--model", "replay:"+sc.Name, "what now?")
			if r.code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, replay.Label) {
				t.Errorf("output does not say it is a replay:\n%s", r.stdout)
			}
			for _, tool := range sc.Tools {
				if !strings.Contains(r.stdout, "→ "+tool+" ") {
					t.Errorf("no tool call %s in output:\n%s", tool, r.stdout)
				}
				if !regexp.MustCompile(`← ` + tool + ` \(\d+ ms\): .*` + regexp.QuoteMeta(demotools.DemoNote)).MatchString(r.stdout) {
					t.Errorf("no demo result of %s in output:\n%s", tool, r.stdout)
				}
			}
			want := recordedText(t, sc.Steps[len(sc.Steps)-1])
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks the recorded text %q…\n%s", Truncate(want, 80), r.stdout)
			}
			if strings.Contains(r.stdout, "\x1b[") {
				t.Error("ANSI escapes in output that is not a terminal")
			}
			if !strings.Contains(r.stdout, "✓ completed") || !strings.Contains(r.stdout, "usage: ") {
				t.Errorf("no completion with usage:\n%s", r.stdout)
			}
		})
	}
}

// TestChatColours: thinking is dimmed on a terminal, plain with NO_COLOR.
func TestChatColours(t *testing.T) {
	r := runCLI(t, Env{Terminal: true}, "chat", "--replay", "--replay-pace", "0", "--model", "replay:anthropic", "q")
	if r.code != 0 || !strings.Contains(r.stdout, ansiDim+"thinking: "+ansiReset) {
		t.Fatalf("exit %d, no dimmed thinking:\n%q", r.code, r.stdout)
	}
	r = runCLI(t, Env{Terminal: true, Getenv: envOf("NO_COLOR", "1")}, "chat", "--replay", "--replay-pace", "0", "q")
	if r.code != 0 || strings.Contains(r.stdout, "\x1b[") || !strings.Contains(r.stdout, "thinking: ") {
		t.Fatalf("exit %d, NO_COLOR output:\n%q", r.code, r.stdout)
	}
}

// TestChatReplayDemo: `chat --replay` with no prompt plays the recorded
// question. Output that is not a terminal (a file, /dev/null) gets that
// turn and the command ends; a person at a terminal then gets the other
// recordings to choose from, and free text is answered with that choice
// instead of a recording about something else.
func TestChatReplayDemo(t *testing.T) {
	first := replay.Scenarios()[0]
	r := runCLI(t, Env{}, "chat", "--replay", "--replay-pace", "0")
	if r.code != 0 || strings.Count(r.stdout, "✓ completed") != 1 {
		t.Fatalf("exit %d, want one completed turn:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, s := range []string{"prompt: " + first.Prompt, recordedText(t, first.Steps[len(first.Steps)-1])} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("output lacks %q:\n%s", Truncate(s, 60), r.stdout)
		}
	}
	if strings.Contains(r.stdout, "Type a number") {
		t.Errorf("a menu without a person to answer it:\n%s", r.stdout)
	}

	var pick replay.Scenario
	n := 0
	for i, sc := range replay.Scenarios() {
		if sc.Name == "gemini" {
			pick, n = sc, i+1
		}
	}
	in := "What time is it in Tokyo?\n" + strconv.Itoa(n) + "\n/exit\n"
	r = runCLI(t, Env{Terminal: true, StdinTerminal: true, Getenv: envOf("NO_COLOR", "1"), Stdin: strings.NewReader(in)},
		"chat", "--replay", "--replay-pace", "0")
	if r.code != 0 || strings.Count(r.stdout, "✓ completed") != 2 {
		t.Fatalf("exit %d, want the demo turn and the picked one:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if c := strings.Count(r.stdout, "Type a number to play one"); c != 2 {
		t.Errorf("menu shown %d times, want after the demo and after the free text:\n%s", c, r.stdout)
	}
	for _, s := range []string{"scenario gemini", pick.Prompt, recordedText(t, pick.Steps[len(pick.Steps)-1]), "→ get_temperature"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("output lacks %q:\n%s", Truncate(s, 60), r.stdout)
		}
	}
}

func TestChatMissingCredentials(t *testing.T) {
	r := runCLI(t, Env{}, "chat", "hello")
	if r.code != 2 {
		t.Fatalf("exit %d, want 2", r.code)
	}
	for _, want := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
		"OPENAI_BASE_URL=http://localhost:11434/v1", "--model openai:<model>", "--replay", replay.Label} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("message lacks %q:\n%s", want, r.stderr)
		}
	}
	// A model whose key is missing names the variables too.
	r = runCLI(t, Env{Getenv: envOf("OPENAI_API_KEY", "k")}, "chat", "--model", "anthropic:claude-sonnet-4-5", "hello")
	if r.code != 2 || !strings.Contains(r.stderr, "ANTHROPIC_API_KEY") {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
}

func TestPickModel(t *testing.T) {
	cases := []struct {
		flag string
		env  []string
		want string
	}{
		{"x:y", []string{"ANTHROPIC_API_KEY", "k"}, "x:y"},
		{"", []string{"LLMW_MODEL", "openai:m", "ANTHROPIC_API_KEY", "k"}, "openai:m"},
		{"", []string{"ANTHROPIC_API_KEY", "k", "OPENAI_API_KEY", "k"}, DefaultAnthropicModel},
		{"", []string{"OPENAI_API_KEY", "k"}, DefaultOpenAIModel},
		{"", []string{"GOOGLE_API_KEY", "k"}, DefaultGeminiModel},
		{"", []string{"OPENAI_BASE_URL", "http://localhost:11434/v1"}, ""},
		{"", nil, ""},
	}
	for _, c := range cases {
		env := &Env{Getenv: envOf(c.env...)}
		if got := pickModel(c.flag, env, readCredentials(env)); got != c.want {
			t.Errorf("pickModel(%q, %v) = %q, want %q", c.flag, c.env, got, c.want)
		}
	}
	// A cloud model is tried without its credentials in the environment:
	// its SDK may find them elsewhere, and the provider names what is missing.
	none := readCredentials(&Env{Getenv: envOf()})
	for _, p := range []string{"bedrock", "vertex", "vertex-anthropic", "azure", "azure-responses"} {
		if !none.has(p) {
			t.Errorf("%s refused before the provider was asked", p)
		}
	}
	if none.has("anthropic") {
		t.Error("anthropic without a key was not refused")
	}
	for in, want := range map[string]string{"": "replay:anthropic", "gemini:gemini-2.5-pro": "replay:gemini",
		"replay:openai": "replay:openai", "ollama:x": "replay:anthropic"} {
		if got := replayModel(in); got != want {
			t.Errorf("replayModel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBadUsage(t *testing.T) {
	cases := []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{}, nil, "no command"},
		{[]string{"frobnicate"}, nil, `unknown command "frobnicate"`},
		{[]string{"chat", "--bogus"}, nil, "flag provided but not defined: -bogus"},
		{[]string{"chat", "--max-steps", "x", "hi"}, nil, "invalid value"},
		{[]string{"tools"}, nil, "NATS_URL"},
		{[]string{"tail", "--session", "a", "--turn", "b"}, []string{"NATS_URL", "nats://127.0.0.1:1"}, "not both"},
		{[]string{"tail", "--turn", "a.b"}, []string{"NATS_URL", "nats://127.0.0.1:1"}, "not a valid id"},
		{[]string{"turn"}, nil, "submit, cancel or resume"},
		{[]string{"turn", "pause", "x"}, nil, `unknown turn subcommand "pause"`},
		{[]string{"turn", "cancel"}, nil, "missing <turn_id>"},
		{[]string{"agent"}, nil, "put, list, show or rm"},
		{[]string{"agent", "put"}, nil, "missing argument"},
		{[]string{"agent", "list", "extra"}, nil, "unexpected arguments"},
		{[]string{"agent", "put", "/no/such/file.yaml"}, nil, "no such file"},
		{[]string{"turn", "resume", "t1"}, nil, "--approve, --deny, --edit or --approve-all"},
		{[]string{"turn", "resume", "t1", "--edit", "c1=notjson"}, nil, "JSON object"},
		{[]string{"turn", "resume", "t1", "--approve", "c1", "--deny", "c1"}, nil, "decided twice"},
		{[]string{"up", "extra"}, nil, "takes no arguments"},
		{[]string{"up", "--listen", "nope"}, nil, "host:port"},
		{[]string{"up", "--log-format", "xml"}, nil, "text or json"},
		{[]string{"up", "--services", "ingest,frob", "--listen", "127.0.0.1:0"}, nil, `unknown service "frob"`},
	}
	for _, c := range cases {
		r := runCLI(t, Env{Getenv: envOf(c.env...)}, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
	for _, args := range [][]string{{"chat", "--help"}, {"up", "-h"}, {"tail", "--help"}, {"tools", "--help"},
		{"hooks", "--help"}, {"agent", "--help"}, {"agent", "put", "--help"}, {"turn", "--help"}, {"turn", "resume", "--help"}, {"turn", "cancel", "--help"}, {"help"}} {
		r := runCLI(t, Env{}, args...)
		if r.code != 0 || !strings.Contains(r.stderr+r.stdout, "usage: llmworker") {
			t.Errorf("%v: exit %d, output %q", args, r.code, r.stderr+r.stdout)
		}
	}
}

// TestClientCommands runs tools, hooks, tail, turn resume and turn cancel
// against one running stack.
func TestClientCommands(t *testing.T) {
	st := startShared(t, 2*time.Millisecond)
	env := Env{Getenv: envOf("NATS_URL", st.URL)}

	t.Run("tools", func(t *testing.T) {
		r := runCLI(t, env, "tools")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		bt, _ := builtin.Tools(builtin.Config{})
		for _, tl := range append(bt, demotools.Tools()...) {
			if !regexp.MustCompile(`(?m)^` + tl.Name() + `\s.*` + regexp.QuoteMeta(string([]rune(tl.Description())[:30]))).MatchString(r.stdout) {
				t.Errorf("no line for %s with its description:\n%s", tl.Name(), r.stdout)
			}
		}
		// One tool whole: its description uncut and its schema.
		tl := demotools.Tools()[0]
		r = runCLI(t, env, "tools", tl.Name())
		if r.code != 0 || !strings.Contains(r.stdout, "description: "+tl.Description()) || !strings.Contains(r.stdout, "input schema:") {
			t.Errorf("tools %s: exit %d:\n%s%s", tl.Name(), r.code, r.stdout, r.stderr)
		}
		if r = runCLI(t, env, "tools", "no_such_tool"); r.code != 2 || !strings.Contains(r.stderr, "no_such_tool") {
			t.Errorf("tools no_such_tool: exit %d %s", r.code, r.stderr)
		}
	})

	t.Run("hooks", func(t *testing.T) {
		js, _ := jetstream.New(st.NC)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		kv, err := hooknats.Bucket(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		// Registered after the config's hooks, with priorities: the chain
		// order is per hook point, priority, then registration.
		for _, reg := range []events.HookRegistration{
			{Name: "late-first", Event: events.HookBeforeToolCall, Subject: "x.late", Priority: -10, Matcher: "^get_", TimeoutMS: 1500, Failure: events.FailOpen},
			{Name: "audit", Event: events.HookAfterToolCall, Subject: "x.audit"},
			{Name: "date", Event: events.HookOnMessageSend, Subject: "x.date", Priority: 5},
		} {
			if _, err := hooknats.Register(ctx, kv, reg); err != nil {
				t.Fatal(err)
			}
		}
		// A guard put by hand with a matcher that does not compile.
		if _, err := kv.Put(ctx, "typo-guard", []byte(`{"name":"typo-guard","event":"before_tool_call","matcher":"(","subject":"x.typo"}`)); err != nil {
			t.Fatal(err)
		}
		defer func() {
			for _, n := range []string{"late-first", "audit", "date", "typo-guard"} {
				_ = hooknats.Unregister(context.Background(), kv, n)
			}
			_ = st.SyncHooks(context.Background())
		}()
		r := runCLI(t, env, "hooks")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		var names []string
		for _, line := range strings.Split(r.stdout, "\n")[1:] {
			if f := strings.Fields(line); len(f) > 2 {
				names = append(names, f[2])
			}
		}
		want := []string{"date", "late-first", "no-shell", "approve-capital", "typo-guard", "audit"}
		if !slices.Equal(names, want) {
			t.Fatalf("hook order %v, want %v:\n%s", names, want, r.stdout)
		}
		if !regexp.MustCompile(`before_tool_call\s+late-first\s+-10\s+\^get_\s+x\.late\s+1\.5s\s+fail_open`).MatchString(r.stdout) {
			t.Errorf("late-first line incomplete:\n%s", r.stdout)
		}
		if !regexp.MustCompile(`before_tool_call\s+approve-capital\s+0\s+\S+\s+llmw\.hook\.approve-capital\s+default\s+fail_closed\s+ok`).MatchString(r.stdout) {
			t.Errorf("approve-capital line incomplete:\n%s", r.stdout)
		}
		if !regexp.MustCompile(`before_tool_call\s+typo-guard\s+0\s+\(\s+x\.typo\s+default\s+fail_closed\s+broken: refuses every before_tool_call \(fail_closed\): .*"matcher"`).MatchString(r.stdout) {
			t.Errorf("typo-guard not shown as broken naming its matcher:\n%s", r.stdout)
		}
	})

	t.Run("turn submit", func(t *testing.T) {
		r := runCLI(t, env, "turn", "submit", "--model", "replay:anthropic", "--prompt", "hi", "--follow")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		id := strings.SplitN(r.stdout, "\n", 2)[0]
		if !events.ValidToken(id) || !strings.Contains(r.stdout, "✓ completed") {
			t.Fatalf("want the turn id, then the turn to its end:\n%s", r.stdout)
		}
		// The same id with another request: the service answers that the
		// turn exists, and the command says so with the code.
		in := Env{Getenv: env.Getenv, Stdin: strings.NewReader(`{"turn_id":"` + id + `","model":"replay:anthropic","messages":[{"role":"user","content":[{"type":"text","text":"other"}]}]}`)}
		r = runCLI(t, in, "turn", "submit", "--file", "-", "--follow")
		if r.code != 1 || !strings.Contains(r.stderr, "turn_exists") {
			t.Fatalf("exit %d, want 1 naming turn_exists: %s", r.code, r.stderr)
		}
	})

	t.Run("turn submit --id gives a file without turn_id its id", func(t *testing.T) {
		// --id: "turn id (default: the file's, else a new one)"; the file
		// is a request that the flags complete, so it is checked after them.
		id := "t-" + nuid.Next()
		in := Env{Getenv: env.Getenv, Stdin: strings.NewReader(`{"model":"replay:anthropic","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`)}
		r := runCLI(t, in, "turn", "submit", "--file", "-", "--id", id, "--follow")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		if got := strings.SplitN(r.stdout, "\n", 2)[0]; got != id || !strings.Contains(r.stdout, "✓ completed") {
			t.Fatalf("want the turn id %s, then the turn to its end:\n%s", id, r.stdout)
		}
		// Without --id, the file's own turn_id is still required to be
		// well-formed when given.
		in = Env{Getenv: env.Getenv, Stdin: strings.NewReader(`{"turn_id":"a b","model":"replay:anthropic","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`)}
		if r := runCLI(t, in, "turn", "submit", "--file", "-"); r.code != 2 || !strings.Contains(r.stderr, "turn_id") {
			t.Fatalf("a bad turn_id in the file: exit %d, want 2 naming turn_id: %s", r.code, r.stderr)
		}
	})

	// A session of several turns, each followed to its end, then shown
	// whole: every turn's question and answer, in order, although each
	// turn's completed event carries only its own.
	t.Run("session show", func(t *testing.T) {
		session := "s-show-" + nuid.Next()
		sc, _ := replay.Lookup("anthropic")
		answer, _, _ := strings.Cut(strings.TrimSpace(recordedText(t, sc.Steps[len(sc.Steps)-1])), "\n")
		const turns = 3
		for k := range turns {
			r := runCLI(t, env, "turn", "submit", "--model", "replay:anthropic", "--session", session, "--prompt", fmt.Sprintf("question %d", k), "--follow")
			if r.code != 0 || !strings.Contains(r.stdout, "✓ completed") {
				t.Fatalf("turn %d: exit %d:\n%s%s", k, r.code, r.stdout, r.stderr)
			}
		}
		r := runCLI(t, env, "session", "show", session)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		at := -1
		for k := range turns {
			q := strings.Index(r.stdout, fmt.Sprintf("question %d", k))
			a := strings.Index(r.stdout[max(q, 0):], answer)
			if q <= at || a < 0 {
				t.Fatalf("question %d and its answer %q missing or out of order:\n%s", k, answer, r.stdout)
			}
			at = q
		}
		if n := strings.Count(r.stdout, "← "); n != turns {
			t.Errorf("%d tool results shown, want one per turn:\n%s", n, r.stdout)
		}
		if r := runCLI(t, env, "session", "show", "s-nobody-"+nuid.Next()); r.code != 1 || !strings.Contains(r.stderr, "no session") {
			t.Errorf("unknown session: exit %d, %q", r.code, r.stderr)
		}
		if r := runCLI(t, env, "session", "show"); r.code != 2 || !strings.Contains(r.stderr, "<session_id>") {
			t.Errorf("no id: exit %d, %q", r.code, r.stderr)
		}
	})

	// A session compacted on demand keeps the compaction in its record:
	// its next turn starts from it.
	t.Run("session compact", func(t *testing.T) {
		session := "s-compact-" + nuid.Next()
		for k := range 3 {
			r := runCLI(t, env, "turn", "submit", "--model", "replay:anthropic", "--session", session, "--prompt", fmt.Sprintf("question %d", k), "--follow")
			if r.code != 0 || !strings.Contains(r.stdout, "✓ completed") {
				t.Fatalf("turn %d: exit %d:\n%s%s", k, r.code, r.stdout, r.stderr)
			}
		}
		// The turn service compacts it: the line says what it made.
		r := runCLI(t, env, "session", "compact", session)
		line := regexp.MustCompile(`^session ` + regexp.QuoteMeta(session) + ` compacted: positions \[0, (\d+)\) read as (\d+) messages \(([a-z,]+)( by \S+)?\) · ~(\d+) → ~(\d+) tokens( · summarizer usage: .* tokens)?\n$`)
		m := line.FindStringSubmatch(r.stdout)
		if r.code != 0 || m == nil {
			t.Fatalf("exit %d, the compaction's line %q does not match %s; stderr %q", r.code, r.stdout, line, r.stderr)
		}
		r = runCLI(t, env, "session", "show", session, "--json")
		var s struct {
			Compaction *events.Compaction `json:"compaction"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || s.Compaction == nil {
			t.Fatalf("the session keeps no compaction: %v %s", err, r.stdout)
		}
		c := s.Compaction
		if got := []string{strconv.Itoa(c.To), strconv.Itoa(len(c.Messages)), c.Policy, summarizedBy(c), strconv.FormatInt(c.TokensBefore, 10), strconv.FormatInt(c.TokensAfter, 10)}; !slices.Equal(got, m[1:7]) ||
			!strings.HasPrefix(c.ID, session+".s") || c.TokensAfter >= c.TokensBefore {
			t.Fatalf("the session's compaction %s %v, the command printed %v", c.ID, got, m[1:7])
		}
		// One more turn, and the session compacted again: --json prints
		// the compaction the session now keeps, which reaches further.
		if r := runCLI(t, env, "turn", "submit", "--model", "replay:anthropic", "--session", session, "--prompt", "question 3", "--follow"); r.code != 0 {
			t.Fatalf("turn 3: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = runCLI(t, env, "session", "compact", session, "--json")
		var again events.Compaction
		if err := json.Unmarshal([]byte(r.stdout), &again); r.code != 0 || err != nil || again.To <= c.To || again.ID == c.ID {
			t.Fatalf("exit %d, the second compaction printed (%v) reaches %d, the first %d: %s%s", r.code, err, again.To, c.To, r.stdout, r.stderr)
		}
		r = runCLI(t, env, "session", "show", session, "--json")
		if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || s.Compaction == nil || s.Compaction.ID != again.ID {
			t.Fatalf("the session's compaction is not %s: %v %s", again.ID, err, r.stdout)
		}
		if r := runCLI(t, env, "session", "compact", "s-nobody-"+nuid.Next()); r.code != 1 || !strings.Contains(r.stderr, "no session") {
			t.Errorf("unknown session: exit %d, %q", r.code, r.stderr)
		}
		// Under another prefix no turn service listens: the command says
		// that none answers, naming the subject.
		r = runCLI(t, env, "session", "compact", "--prefix", "nobody", session)
		if r.code != 1 || !strings.Contains(r.stderr, "no turn service answers nobody.session.compact."+session) {
			t.Errorf("no turn service: exit %d, %q", r.code, r.stderr)
		}
	})

	t.Run("tail", func(t *testing.T) {
		turnID, session := nuid.Next(), "s-"+nuid.Next()
		submit(t, st, events.TurnRequest{TurnID: turnID, SessionID: session, Model: "replay:anthropic"})
		waitFor(t, st, turnID, events.TypeTurnCompleted)
		sc, _ := replay.Lookup("anthropic")
		want := recordedText(t, sc.Steps[len(sc.Steps)-1])
		for _, args := range [][]string{{"tail", "--turn", turnID}, {"tail", "--session", session, "--follow=false"}} {
			r := runCLI(t, env, args...)
			if r.code != 0 {
				t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
			}
			for _, s := range []string{"→ fixed_version {}", "← fixed_version", want, "✓ completed"} {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("%v: output lacks %q:\n%s", args, Truncate(s, 60), r.stdout)
				}
			}
			if args[1] == "--session" && !strings.Contains(r.stdout, "── turn "+turnID+" · session "+session+" · replay:anthropic ──") {
				t.Errorf("no turn header:\n%s", r.stdout)
			}
		}
		r := runCLI(t, env, "tail", "--session", "nobody-here", "--follow=false")
		if r.code != 0 || !strings.Contains(r.stderr, "no events stored") {
			t.Errorf("empty session: exit %d, %q", r.code, r.stderr)
		}
	})

	t.Run("resume", func(t *testing.T) {
		// approve-all: the paused call runs, the turn completes.
		turnID := nuid.Next()
		submit(t, st, events.TurnRequest{TurnID: turnID, Model: "replay:gemini"})
		paused := waitFor(t, st, turnID, events.TypeTurnPaused)
		p, err := events.DecodeData[events.TurnPaused](paused)
		if err != nil || len(p.Pending) != 1 || p.Pending[0].Name != "get_capital" {
			t.Fatalf("paused = %+v, %v", p, err)
		}
		r := runCLI(t, env, "turn", "resume", turnID, "--approve-all")
		if r.code != 0 || !strings.Contains(r.stdout, p.Pending[0].ID+"=approve") {
			t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
		}
		res := waitFor(t, st, turnID, events.TypeToolResult)
		tr, _ := events.DecodeData[events.ToolCallResult](res)
		if tr.IsError || !strings.Contains(tr.Content, "Paris") {
			t.Errorf("approved call result = %+v", tr)
		}
		waitFor(t, st, turnID, events.TypeTurnCompleted)

		// deny with a reason: the model gets an error result, the tool
		// never runs.
		turnID = nuid.Next()
		submit(t, st, events.TurnRequest{TurnID: turnID, Model: "replay:gemini"})
		p, _ = events.DecodeData[events.TurnPaused](waitFor(t, st, turnID, events.TypeTurnPaused))
		// A call named by something that is not pending: refused, naming
		// what is.
		r = runCLI(t, env, "turn", "resume", turnID, "--approve", "zzz")
		if r.code != 2 || !strings.Contains(r.stderr, p.Pending[0].ID) {
			t.Fatalf("unknown call: exit %d: %s", r.code, r.stderr)
		}
		// The call by its position.
		r = runCLI(t, env, "turn", "resume", "--deny", "1=not today", turnID)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		done := waitFor(t, st, turnID, events.TypeTurnCompleted)
		c, _ := events.DecodeData[events.TurnCompleted](done)
		var denied *events.Part
		for _, m := range c.Messages {
			for i, part := range m.Content {
				if part.Type == events.PartToolResult && part.ToolUseID == p.Pending[0].ID {
					denied = &m.Content[i]
				}
			}
		}
		if denied == nil || !denied.IsError || !strings.Contains(denied.Content, "not today") {
			t.Errorf("denied result = %+v", denied)
		}

		// edit: runs with the edited input.
		turnID = nuid.Next()
		submit(t, st, events.TurnRequest{TurnID: turnID, Model: "replay:gemini"})
		p, _ = events.DecodeData[events.TurnPaused](waitFor(t, st, turnID, events.TypeTurnPaused))
		// The call by a prefix of its id.
		r = runCLI(t, env, "turn", "resume", turnID, "--edit", p.Pending[0].ID[:6]+`={"country":"Japan"}`)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		tr, _ = events.DecodeData[events.ToolCallResult](waitFor(t, st, turnID, events.TypeToolResult))
		if !strings.Contains(tr.Content, "Tokyo") {
			t.Errorf("edited call result = %+v", tr)
		}
		r = runCLI(t, env, "turn", "resume", turnID, "--approve-all")
		if r.code != 1 || !strings.Contains(r.stderr, "not paused") {
			t.Errorf("resume of a finished turn: exit %d %q", r.code, r.stderr)
		}
		// A turn that never ran: said at once, whatever the flags.
		r = runCLI(t, env, "turn", "resume", "never-"+nuid.Next(), "--approve", "1")
		if r.code != 1 || !strings.Contains(r.stderr, "no events of turn") {
			t.Errorf("resume of an unknown turn: exit %d %q", r.code, r.stderr)
		}
	})

	t.Run("chat-approval", func(t *testing.T) {
		// chat asks per pending call; "x" is not an answer, "e" edits.
		r := runCLI(t, Env{Getenv: envOf("NATS_URL", st.URL), Stdin: strings.NewReader("x\ne\n{\"country\":\"Italy\"}\n")},
			"chat", "--model", "replay:gemini", "capital?")
		if r.code != 0 {
			t.Fatalf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		for _, s := range []string{"⏸ turn paused: ", "capital lookups need approval (hook approve-capital)",
			"please answer a, d", "← get_capital", "Rome", "✓ completed"} {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("output lacks %q:\n%s", s, r.stdout)
			}
		}
		// No answer at all (stdin ends): chat gives up, the turn stays paused.
		r = runCLI(t, Env{Getenv: envOf("NATS_URL", st.URL)}, "chat", "--model", "replay:gemini", "capital?")
		if r.code != 1 || !strings.Contains(r.stderr+r.stdout, "llmworker turn resume") {
			t.Errorf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("interactive", func(t *testing.T) {
		r := runCLI(t, Env{Terminal: true, Getenv: envOf("NATS_URL", st.URL, "NO_COLOR", "1"), Stdin: strings.NewReader("first\n\nsecond\n/exit\nnever\n")},
			"chat", "--model", "replay:anthropic", "--session", "s-interactive")
		if r.code != 0 {
			t.Fatalf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		if n := strings.Count(r.stdout, "✓ completed"); n != 2 {
			t.Fatalf("%d completed turns, want 2:\n%s", n, r.stdout)
		}
		if !strings.Contains(r.stdout, "session s-interactive") || strings.Count(r.stdout, "> ") < 3 {
			t.Errorf("no session line or prompts:\n%s", r.stdout)
		}
		// The session kept the conversation: the second turn's transcript
		// starts with the first turn.
		js, _ := jetstream.New(st.NC)
		sess, ok, err := turn.LoadSession(context.Background(), js, "s-interactive")
		if err != nil || !ok {
			t.Fatalf("LoadSession: %v %v", ok, err)
		}
		b, _ := json.Marshal(sess.Messages)
		var firsts int
		for _, needle := range []string{`"first"`, `"second"`} {
			if strings.Contains(string(b), needle) {
				firsts++
			}
		}
		if firsts != 2 {
			t.Errorf("session transcript lacks a prompt: %s", Truncate(string(b), 300))
		}
	})

	t.Run("cancel", func(t *testing.T) {
		// A paused turn (the hook holds its get_capital call) is cancelled:
		// the command exits 0 and prints the reason, which names the
		// subject with this installation's prefix.
		turnID := nuid.Next()
		submit(t, st, events.TurnRequest{TurnID: turnID, Model: "replay:openai-responses"})
		waitFor(t, st, turnID, events.TypeTurnPaused)
		r := runCLI(t, env, "turn", "cancel", turnID)
		if r.code != 0 || !strings.Contains(r.stdout, "cancel sent for turn "+turnID) || !strings.Contains(r.stdout, "turn "+turnID+" aborted: ") {
			t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
		}
		if subj := events.NewSubjects(st.Prefix).TurnCancel(turnID); !strings.Contains(r.stdout, subj) || strings.Contains(r.stdout, "P.turn") {
			t.Errorf("reason does not name %s:\n%s", subj, r.stdout)
		}
		waitFor(t, st, turnID, events.TypeTurnAborted)
		// An id that has no turn: the service says so, and so does the
		// command.
		r = runCLI(t, env, "turn", "cancel", "no-such-"+nuid.Next())
		if r.code != 1 || !strings.Contains(r.stderr, "unknown_turn") {
			t.Fatalf("exit %d, want 1 naming unknown_turn: %s %s", r.code, r.stdout, r.stderr)
		}
	})

}

// TestChatInterrupt: Ctrl-C during a turn cancels it. The replay is slowed
// down so that the turn is still streaming when the interrupt comes.
func TestChatInterrupt(t *testing.T) {
	st := startShared(t, 150*time.Millisecond)
	intr := make(chan os.Signal, 1)
	out := &syncBuffer{}
	var code atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		code.Store(int32(Main(ctx, []string{"chat", "--model", "replay:anthropic", "go"},
			Env{Getenv: envOf("NATS_URL", st.URL), Stdout: out, Stderr: out, Interrupt: intr})))
	}()
	natstest.EventuallyWithin(t, 30*time.Second, "thinking streamed", func() bool {
		return strings.Contains(out.String(), "thinking: ")
	})
	intr <- os.Interrupt
	<-done
	if code.Load() != 1 || !strings.Contains(out.String(), "cancelling turn") || !strings.Contains(out.String(), "✗ turn aborted") {
		t.Fatalf("exit %d:\n%s", code.Load(), out.String())
	}
}

// waitForDelta waits until n block deltas of a turn were published.
func waitForDelta(t *testing.T, st *Stack, turnID string, n int) {
	t.Helper()
	tc, _ := turn.NewClient(st.NC, turn.ClientOptions{Prefix: st.Prefix})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := tc.Follow(ctx, events.NewSubjects(st.Prefix).EventsOfTurn(turnID))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	after := false
	for n > 0 {
		select {
		case <-ctx.Done():
			t.Fatal("no deltas")
		case it := <-f.C():
			if it.Env.Type == events.TypeTurnResumed {
				after = true
			}
			if after && it.Env.Type == events.TypeBlockDelta {
				n--
			}
		}
	}
}

func TestHealthHandler(t *testing.T) {
	var cur atomic.Pointer[Stack]
	srv := httptest.NewServer(healthHandler(&cur, nil))
	defer srv.Close()
	get := func(path string) int {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if get("/healthz") != 200 || get("/readyz") != 503 {
		t.Fatal("before start: want alive, not ready")
	}
	ctx := context.Background()
	st, err := StartStack(ctx, StackConfig{Services: []string{SvcToolexec}})
	if err != nil {
		t.Fatal(err)
	}
	cur.Store(st)
	if get("/readyz") != 200 {
		t.Error("started: not ready")
	}
	_ = st.Stop(ctx)
	if get("/readyz") != 503 {
		t.Error("stopped: still ready")
	}
}

func TestRenderer(t *testing.T) {
	var b strings.Builder
	r := NewRenderer(&b, false)
	env := func(typ string, data any) *events.Envelope {
		e, err := events.NewEnvelope("/t", typ, data)
		if err != nil {
			t.Fatal(err)
		}
		e.TurnID = "t1"
		return e
	}
	long := strings.Repeat("x", 400)
	steps := []*events.Envelope{
		env(events.TypeTurnStarted, events.TurnStarted{TurnID: "t1", Model: "anthropic:claude"}),
		env(events.TypeTurnStep, events.TurnStep{Step: 1, Attempt: 1, Model: "anthropic:claude"}),
		env(events.TypeTurnStep, events.TurnStep{Step: 1, Attempt: 2}),
		env(events.TypeTurnStep, events.TurnStep{Step: 1, Attempt: 3, Model: "openai:gpt"}),
		env(events.TypeToolSkipped, events.ToolSkipped{CallID: "c1", Name: "shell", Hook: "no-shell", Reason: "no shell here"}),
		env(events.TypeHookDecision, events.HookDecision{Hook: "h", Event: events.HookBeforeToolCall, Result: events.HookAbort, Reason: "timeout", Failed: true, MS: 12}),
		env(events.TypeToolResult, events.ToolCallResult{CallID: "c2", Name: "read_file", Content: long, DurationMS: 3}),
		env(events.TypeToolResult, events.ToolCallResult{CallID: "c3", Name: "calc", Content: "bad", IsError: true}),
		env(events.TypeHookMessage, events.HookMessage{Hook: "h", Messages: []events.Message{events.AssistantText("note")}}),
		env(events.TypeTurnWarning, events.TurnWarning{Step: 1, Model: "openai:gpt", Warnings: []events.Warning{{Setting: "top_k", Message: "openai has no top_k"}}}),
		env(events.TypeTurnFailed, events.TurnEnded{Reason: "max steps (20) reached", Code: "max_steps"}),
	}
	var last Rendered
	for _, e := range steps {
		var err error
		if last, err = r.Render(e); err != nil {
			t.Fatal(err)
		}
	}
	out := b.String()
	for _, want := range []string{
		"↻ step 1: retrying the model call (attempt 2)",
		"↪ step 1: falling back from anthropic:claude to openai:gpt",
		"⊘ shell skipped by hook no-shell: no shell here",
		"⚑ hook h (before_tool_call) → abort: timeout [hook failed] (12.0 ms)",
		"← read_file (3 ms): " + strings.Repeat("x", 300) + "… (100 more chars)",
		"✗ calc failed (0 ms): bad",
		"⚑ h: note",
		"⚠ top_k not sent: openai has no top_k",
		"✗ turn failed: max steps (20) reached [max_steps]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if last.State != StateFailed || last.Reason != "max steps (20) reached" {
		t.Errorf("last = %+v", last)
	}
	if _, err := r.Render(&events.Envelope{Type: events.TypeTurnPaused, Data: []byte(`{"pending":"x"}`)}); err == nil {
		t.Error("undecodable paused event: no error")
	}
	u := events.UsageEvent{InputTokens: events.Int64(10), OutputTokens: events.Int64(5), CacheReadInputTokens: events.Int64(0)}
	if got := FormatUsage(u); got != "usage: 10 input, 5 output tokens" {
		t.Errorf("FormatUsage = %q", got)
	}
	_ = fmt.Sprint
	_ = json.Valid
}

// With Headers (tail of several turns), each turn gets one header line: a
// turn.started writes it with the model, a turn first seen mid-way (its
// start expired or was filtered) gets one from its first event.
func TestRendererHeaders(t *testing.T) {
	var b strings.Builder
	r := NewRenderer(&b, false)
	r.Headers = true
	env := func(turnID, typ string, data any) *events.Envelope { return envelopeOf(t, turnID, typ, data) }
	for _, e := range []*events.Envelope{
		env("t1", events.TypeTurnStarted, events.TurnStarted{TurnID: "t1", SessionID: "s1", Model: "m"}),
		env("t1", events.TypeTurnStep, events.TurnStep{Step: 1}),
		env("t2", events.TypeTurnStep, events.TurnStep{Step: 3}),
		env("t2", events.TypeTurnCompleted, events.TurnCompleted{StopReason: events.StopEndTurn}),
	} {
		if _, err := r.Render(e); err != nil {
			t.Fatal(err)
		}
	}
	want := "── turn t1 · session s1 · m ──\n── turn t2 · session s1 ──\n✓ completed\n"
	if got := b.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// A session's turn that fails before it starts (no llmw.turn.started)
// shows no usage: the previous turn's is not its own.
func TestRendererUsagePerTurn(t *testing.T) {
	in, out := int64(11), int64(7)
	var b strings.Builder
	r := NewRenderer(&b, false)
	env := func(turnID, typ string, data any) *events.Envelope { return envelopeOf(t, turnID, typ, data) }
	for _, e := range []*events.Envelope{
		env("t1", events.TypeTurnStarted, events.TurnStarted{TurnID: "t1", SessionID: "s1", Model: "m"}),
		env("t1", events.TypeUsage, events.UsageReport{Step: 1, Total: events.UsageEvent{InputTokens: &in, OutputTokens: &out}}),
		env("t1", events.TypeTurnCompleted, events.TurnCompleted{StopReason: events.StopEndTurn}),
		env("t2", events.TypeTurnFailed, events.TurnEnded{Reason: "no such model", Code: "unknown_model"}),
	} {
		if _, err := r.Render(e); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "no such model") || strings.Contains(last, "usage") {
		t.Errorf("failed turn line %q: want the reason and no usage\n%s", last, b.String())
	}
	if !strings.Contains(b.String(), "11 input") {
		t.Errorf("the first turn's usage is missing:\n%s", b.String())
	}
}

func TestResolveCall(t *testing.T) {
	pending := []string{"call_abc_t1", "call_abd_t1", "toolu_9_t1"}
	for _, c := range []struct{ ref, want, err string }{
		{"call_abc_t1", "call_abc_t1", ""},
		{"2", "call_abd_t1", ""},
		{"toolu", "toolu_9_t1", ""},
		{"call_ab", "", "starts 2 pending calls"},
		{"4", "", "has 3 pending call(s)"},
		{"x", "", "no pending call"},
		{"", "", "empty"},
	} {
		got, err := resolveCall(c.ref, pending)
		if got != c.want || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("resolveCall(%q) = %q, %v; want %q, %q", c.ref, got, err, c.want, c.err)
		}
	}
}

// envelopeOf is a worker event of turnID in session s1.
func envelopeOf(t *testing.T, turnID, typ string, data any) *events.Envelope {
	t.Helper()
	e, err := events.NewEnvelope("/t", typ, data)
	if err != nil {
		t.Fatal(err)
	}
	e.TurnID, e.SessionID = turnID, "s1"
	return e
}
