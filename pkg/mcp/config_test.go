package mcp_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/mcp"
)

func TestParseSpec(t *testing.T) {
	c, err := mcp.ParseSpec("files=mcp-server-filesystem /srv/data --read-only")
	if err != nil || c.Name != "files" || strings.Join(c.Command, "|") != "mcp-server-filesystem|/srv/data|--read-only" || c.URL != "" {
		t.Fatalf("stdio: %+v %v", c, err)
	}
	c, err = mcp.ParseSpec("search=https://mcp.example.com/mcp")
	if err != nil || c.URL != "https://mcp.example.com/mcp" || c.Command != nil {
		t.Fatalf("http: %+v %v", c, err)
	}
	// Each refusal names the entry and what is wrong with it.
	for spec, want := range map[string]string{
		"files":                  "NAME=COMMAND",
		"=cmd":                   "without a name",
		"a.b=cmd":                "letters, digits",
		"x=ftp://example.com":    "", // a command named ftp://… is a stdio server
		"web=https://":           "not an http:// or https:// URL",
		"files=   ":              "NAME=COMMAND",
		"mcp server=cmd --flag ": "letters, digits",
	} {
		_, err := mcp.ParseSpec(spec)
		if want == "" {
			if err != nil {
				t.Errorf("%q: %v", spec, err)
			}
			continue
		}
		if !errors.Is(err, mcp.ErrInvalidConfig) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), strings.TrimSpace(strings.SplitN(spec, "=", 2)[0])) {
			t.Errorf("%q: %v, want ErrInvalidConfig naming %q", spec, err, want)
		}
	}
}

func TestParseFile(t *testing.T) {
	servers, err := mcp.ParseFile("mcp.yaml", []byte(`servers:
  - name: files
    command: [mcp-server-filesystem, "/srv/my data"]
    env: {LOG_LEVEL: warn}
    timeout: 30s
  - name: search
    url: https://mcp.example.com/mcp
    headers: {Authorization: "Bearer k"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 2 || servers[0].Command[1] != "/srv/my data" || servers[0].Timeout != 30*time.Second || servers[0].Env["LOG_LEVEL"] != "warn" ||
		servers[1].Headers["Authorization"] != "Bearer k" {
		t.Fatalf("%+v", servers)
	}
	for body, want := range map[string]string{
		"servers:\n  - name: x\n    comand: [a]\n":                      "comand",
		"servers:\n  - name: x\n    command: [a]\n    url: http://h/\n": "both a command and a url",
		"servers:\n  - name: x\n    url: http://h/\n    env: {A: b}\n":  "env applies to a command server",
		"servers:\n  - name: x\n    command: [a]\n    timeout: -1s\n":   "negative",
		"servers: 7\n": "line 1",
	} {
		_, err := mcp.ParseFile("mcp.yaml", []byte(body))
		if !errors.Is(err, mcp.ErrInvalidConfig) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "mcp.yaml") {
			t.Errorf("%q: %v, want ErrInvalidConfig naming the file and %q", body, err, want)
		}
	}
	path := filepath.Join(t.TempDir(), "mcp.yaml")
	if err := os.WriteFile(path, []byte("servers:\n  - name: files\n    command: [a]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mcp.Load(path, []string{"files=b"}); !errors.Is(err, mcp.ErrInvalidConfig) || !strings.Contains(err.Error(), `"files" is configured twice`) {
		t.Errorf("a name twice: %v", err)
	}
	if got, err := mcp.Load(path, []string{"web=http://127.0.0.1:1/mcp"}); err != nil || len(got) != 2 {
		t.Errorf("file and flags: %+v %v", got, err)
	}
}

// Catalog names fit the model's rule, keep the mcp__NAME__ prefix hooks
// match on, and never collide.
func TestToolName(t *testing.T) {
	taken := map[string]bool{}
	long := strings.Repeat("x", 80)
	got := []string{
		mcp.ToolName("fs", "read_file", taken),
		mcp.ToolName("fs", "read.file", taken), // maps to the name above
		mcp.ToolName("fs", "list files", taken),
		mcp.ToolName("fs", long, taken),
		mcp.ToolName("fs", long+"y", taken),
	}
	if got[0] != "mcp__fs__read_file" || got[2] != "mcp__fs__list_files" {
		t.Errorf("plain names: %v", got)
	}
	seen := map[string]bool{}
	for _, n := range got {
		if !events.ValidToolName(n) || !strings.HasPrefix(n, "mcp__fs__") || seen[n] {
			t.Errorf("%q: invalid, without the prefix, or taken twice (%v)", n, got)
		}
		seen[n] = true
	}
	// The same server's names map the same way every time.
	if again := mcp.ToolName("fs", "read.file", map[string]bool{"mcp__fs__read_file": true}); again != got[1] {
		t.Errorf("not deterministic: %q then %q", got[1], again)
	}
}
