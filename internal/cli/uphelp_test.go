package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// up --help lists every flag once: the common ones first, then each
// service's own under a heading.
func TestUpHelpGrouped(t *testing.T) {
	r := runCLI(t, Env{}, "up", "--help")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	help := r.stderr
	headings := []string{"common flags:", "ingest flags:", "toolexec flags:", "hookbridge flags:", "turn flags:", "gateway flags:"}
	last := -1
	for _, h := range headings {
		i := strings.Index(help, "\n"+h+"\n")
		if i < 0 || i < last {
			t.Fatalf("help lacks %q after the headings before it:\n%s", h, help)
		}
		last = i
	}
	section := func(h string) string {
		rest := help[strings.Index(help, "\n"+h+"\n"):]
		if end := strings.Index(rest[1:], "\n\n"); end > 0 {
			return rest[:end+1]
		}
		return rest
	}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)
	seen := map[string]int{}
	for _, m := range flagLine.FindAllStringSubmatch(help, -1) {
		seen[m[1]]++
	}
	for name, n := range seen {
		if n > 1 {
			t.Errorf("-%s listed %d times", name, n)
		}
	}
	common := section("common flags:")
	for _, name := range []string{"nats-url", "listen", "temp-store", "store-dir", "http", "replay", "replay-pace", "hooks"} {
		if !regexp.MustCompile(`(?m)^  -` + name + `\b`).MatchString(common) {
			t.Errorf("-%s is not among the common flags:\n%s", name, common)
		}
	}
	// A flag one service has is listed by its own name under that
	// service; the prefixed form is not listed.
	for svc, name := range map[string]string{"gateway": "chat-model", "turn": "max-steps", "toolexec": "root", "ingest": "structured"} {
		if !regexp.MustCompile(`(?m)^  -` + name + `\b`).MatchString(section(svc + " flags:")) {
			t.Errorf("-%s not under %s:\n%s", name, svc, section(svc+" flags:"))
		}
		if seen[svc+"-"+name] > 0 {
			t.Errorf("-%s-%s listed besides -%s", svc, name, name)
		}
	}
	// A name two services give different meanings is listed per service.
	for svc, name := range map[string]string{"turn": "turn-ack-wait", "toolexec": "toolexec-ack-wait"} {
		if !strings.Contains(section(svc+" flags:"), "  -"+name+" ") {
			t.Errorf("-%s not under %s", name, svc)
		}
	}
	if strings.Contains(help, "[for ") {
		t.Errorf("help still carries the per-form notes:\n%s", help)
	}
	// Still every form parses: the plain name of a shared flag, a prefixed
	// form that is not listed.
	o := newUpOptions(&Env{Getenv: envOf()})
	if err := parse(o.fs, []string{"--ack-wait", "3s", "--gateway-chat-model", "replay:openai", "--turn-max-steps", "4"}); err != nil {
		t.Fatal(err)
	}
	if o.tr.Options.AckWait != 3*time.Second || o.exec.Options.AckWait != 3*time.Second || o.gw.Options.Model != "replay:openai" || o.tr.Options.MaxSteps != 4 {
		t.Errorf("parsed turn %+v toolexec %+v gateway %+v", o.tr.Options, o.exec.Options, o.gw.Options)
	}
}

// Every flag up's help names a variable for takes its default from that
// variable.
func TestUpFlagsFromEnvironment(t *testing.T) {
	r := runCLI(t, Env{}, "up", "--help")
	type named struct{ flag, typ string }
	byVar := map[string]named{} // variable -> a flag it sets and its type
	line := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)( [a-z]+)?\n[^\n]*\(\$([A-Z0-9_]+)\)`)
	for _, m := range line.FindAllStringSubmatch(r.stderr, -1) {
		byVar[m[3]] = named{m[1], strings.TrimSpace(m[2])}
	}
	if len(byVar) < 40 {
		t.Fatalf("only %d flags with a variable in the help:\n%s", len(byVar), r.stderr)
	}
	// A value of each type that differs from any default.
	sample := map[string]string{"": "true", "int": "7", "duration": "7s", "string": "x7"}
	defaults := newUpOptions(&Env{Getenv: envOf()})
	for v, n := range byVar {
		name := n.flag
		if defaults.fs.Lookup(name) == nil {
			t.Errorf("help lists -%s, which does not parse", name)
			continue
		}
		want, ok := sample[n.typ]
		if !ok {
			t.Fatalf("-%s: type %q", name, n.typ)
		}
		o := newUpOptions(&Env{Getenv: envOf(v, want)})
		if err := parse(o.fs, nil); err != nil {
			t.Fatal(err)
		}
		if err := o.svcFlags.Err(); err != nil {
			t.Errorf("$%s=%s: %v", v, want, err)
		}
		if got := o.fs.Lookup(name).Value.String(); got != want {
			t.Errorf("$%s=%s: -%s is %q", v, want, name, got)
		}
	}
}
