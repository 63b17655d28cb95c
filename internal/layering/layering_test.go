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
	for _, pkg := range []string{"pkg/events", "pkg/timeline", "pkg/llm", "pkg/tool", "pkg/hook", "pkg/worker"} {
		if d := offending(t, pkg, natsPaths); d != "" {
			t.Errorf("%s imports %s: the core packages must not depend on NATS (move the NATS part to the service or transport package)", pkg, d)
		}
	}
}

// The provider SDKs are heavy to compile and large to link: only ingest's
// binary and the all-in-one command (which embeds ingest) carry them.
func TestOnlyIngestLinksProviderSDKs(t *testing.T) {
	for _, pkg := range []string{"cmd/turn", "cmd/toolexec", "cmd/hookbridge", "cmd/gateway", "pkg/gateway", "pkg/ingest", "pkg/turn", "pkg/toolexec", "pkg/hookbridge"} {
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
