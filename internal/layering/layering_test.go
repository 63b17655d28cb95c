package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/llmworker/llmworker/"

// The prefixes of import paths a layer must not reach.
var (
	// The NATS client and server. github.com/nats-io/nuid, a
	// dependency-free unique-id generator that pkg/events uses for event
	// ids, is allowed: it opens no connection and pulls nothing in.
	natsPaths = []string{"github.com/nats-io/nats.go", "github.com/nats-io/nats-server", "github.com/nats-io/jwt", "github.com/nats-io/nkeys"}
	sdkPaths  = []string{
		"github.com/openai/openai-go",
		"github.com/anthropics/anthropic-sdk-go",
		"google.golang.org/genai",
		"github.com/aws/aws-sdk-go-v2",
		"github.com/Azure/azure-sdk-for-go",
	}
)

// deps returns the transitive imports of pkg (tests excluded) as go list
// reports them.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg += ": " + string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %s", pkg, msg)
	}
	return strings.Fields(string(out))
}

// offending returns the first dependency of pkg under one of the prefixes.
func offending(t *testing.T, pkg string, prefixes []string) string {
	for _, d := range deps(t, pkg) {
		for _, p := range prefixes {
			if strings.HasPrefix(d, p) {
				return d
			}
		}
	}
	return ""
}

// The core works in-process with no broker: a library user who embeds a
// worker must not link NATS.
func TestCoreImportsNoNATS(t *testing.T) {
	for _, pkg := range []string{"pkg/events", "pkg/timeline", "pkg/llm", "pkg/tool", "pkg/hook", "pkg/compact", "pkg/worker", "pkg/models"} {
		if d := offending(t, pkg, natsPaths); d != "" {
			t.Errorf("%s imports %s: the core packages must not depend on NATS (move the NATS part to the service or transport package)", pkg, d)
		}
	}
	// The transcript store is the NATS side of the worker's transcript:
	// the core must not reach it.
	for _, pkg := range []string{"pkg/events", "pkg/timeline", "pkg/llm", "pkg/tool", "pkg/hook", "pkg/worker"} {
		if d := offending(t, pkg, []string{module + "pkg/transcript"}); d != "" {
			t.Errorf("%s imports %s, which uses NATS", pkg, d)
		}
	}
	if offending(t, "pkg/transcript", natsPaths) == "" {
		t.Errorf("pkg/transcript imports no NATS: is the prefix list of this test still right?")
	}
}

// The provider SDKs are heavy to compile and large to link: only ingest's
// binary and the all-in-one command (which embeds ingest) carry them.
func TestOnlyIngestLinksProviderSDKs(t *testing.T) {
	for _, pkg := range []string{"cmd/turn", "cmd/toolexec", "cmd/hookbridge", "cmd/gateway", "pkg/gateway", "pkg/a2a", "pkg/ingest", "pkg/turn", "pkg/toolexec", "pkg/hookbridge"} {
		if d := offending(t, pkg, sdkPaths); d != "" {
			t.Errorf("%s links the provider SDK %s: only cmd/ingest and cmd/llmworker may (through pkg/provider)", pkg, d)
		}
	}
	// And the rule is not vacuous: the ingest command does link them.
	for _, pkg := range []string{"cmd/ingest", "cmd/llmworker"} {
		if offending(t, pkg, sdkPaths) == "" {
			t.Errorf("%s links no provider SDK: is the prefix list of this test still right?", pkg)
		}
	}
}

// A remote A2A agent's client is the turn service's to give
// (turn.Config.RemoteAgents, pkg/a2a/remote.Agents from cmd/turn and
// `llmworker up`): pkg/turn links no A2A SDK, so that a program that
// embeds the turn service without remote agents does not carry it.
func TestTurnLinksNoA2ASDK(t *testing.T) {
	a2aPaths := []string{"github.com/a2aproject/"}
	for _, pkg := range []string{"pkg/turn", "pkg/worker", "pkg/events"} {
		if d := offending(t, pkg, a2aPaths); d != "" {
			t.Errorf("%s links the A2A SDK %s: the A2A client reaches pkg/turn through turn.Config.RemoteAgents (pkg/a2a/remote)", pkg, d)
		}
	}
	// And the rule is not vacuous: the turn service's command links it.
	for _, pkg := range []string{"cmd/turn", "cmd/llmworker"} {
		if offending(t, pkg, a2aPaths) == "" {
			t.Errorf("%s links no A2A SDK: does it give the turn service its A2A client (turn.Config.RemoteAgents)?", pkg)
		}
	}
}

// internal/ holds two layers: the leaf helpers under internal/leaf,
// below pkg/, and above pkg/ what assembles it (internal/cli,
// internal/service, internal/replay, internal/protogen). A package of
// pkg/ may depend on a leaf and nothing else of internal/, and a leaf on
// nothing of this module outside internal/leaf. Tests are not held to
// it: pkg/gateway's run the assembled services.
func TestPkgDependsOnlyOnLeavesOfInternal(t *testing.T) {
	leaf := module + "internal/leaf/"
	usesLeaf := false
	forDeps(t, module+"pkg/...", func(pkg, dep string) {
		switch {
		case strings.HasPrefix(dep, leaf):
			usesLeaf = true
		case strings.HasPrefix(dep, module+"internal/"):
			t.Errorf("%s depends on %s: a package of pkg/ may use internal/leaf only (move a helper that imports nothing of this module there; the assembly builds on pkg/)", pkg, dep)
		}
	})
	if !usesLeaf {
		t.Errorf("no package of pkg/ depends on internal/leaf: is the prefix of this test still right?")
	}
	forDeps(t, leaf+"...", func(pkg, dep string) {
		if strings.HasPrefix(dep, module) && !strings.HasPrefix(dep, leaf) {
			t.Errorf("%s depends on %s: a leaf helper imports nothing of this module outside internal/leaf", pkg, dep)
		}
	})
}

// forDeps calls f with each package that pattern matches and each of its
// transitive imports (tests excluded) as go list reports them.
func forDeps(t *testing.T, pattern string, f func(pkg, dep string)) {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", pattern).Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg += ": " + string(ee.Stderr)
		}
		t.Fatalf("go list %s: %s", pattern, msg)
	}
	n := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		n++
		for _, d := range fields[1:] {
			f(fields[0], d)
		}
	}
	if n == 0 {
		t.Fatalf("go list %s matched no package", pattern)
	}
}
