package mcp

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/llmworker/llmworker/internal/leaf/childenv"
	"github.com/llmworker/llmworker/pkg/events"
)

// DefaultTimeout is how long one call of an MCP server's tool may take
// when its ServerConfig names no timeout.
const DefaultTimeout = time.Minute

// ServerConfig is one MCP server whose tools a host offers: a stdio server
// (Command) or a streamable-HTTP server (URL), never both.
type ServerConfig struct {
	// Name prefixes the server's tools: mcp__<Name>__<tool>. A NATS
	// subject token of letters, digits, '-' and '_'.
	Name string `yaml:"name"`
	// Command is the argv of a stdio server, started by the host.
	Command []string `yaml:"command"`
	// Env is added to a stdio server's environment, which otherwise holds
	// only PATH, HOME and the locale (CommandEnv): the host's NATS
	// credentials and provider keys are not the server's business.
	Env map[string]string `yaml:"env"`
	// URL is the endpoint of a streamable-HTTP server (http:// or
	// https://).
	URL string `yaml:"url"`
	// Headers are sent with every HTTP request to URL (an API key).
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds one tool call (0 = DefaultTimeout). toolexec applies
	// it as the call's deadline; the server is sent notifications/cancelled
	// when it passes.
	Timeout time.Duration `yaml:"timeout"`
	// Eager says whether calls of the server's tools may start while the
	// model still streams (tool.Eagerer, the catalog's eager). nil: a
	// tool's annotations decide: eager when the server says it is
	// read-only (readOnlyHint) or idempotent (idempotentHint), not
	// otherwise, so a tool that says nothing waits for the model's
	// response to end.
	Eager *bool `yaml:"eager"`
}

// CommandEnv are the variables of the host's environment a stdio server
// inherits; ServerConfig.Env adds to them.
var CommandEnv = childenv.Inherited

// Validate says what is wrong with c, naming the field. Errors match
// ErrInvalidConfig.
func (c ServerConfig) Validate() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: server %q: %s", ErrInvalidConfig, c.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Name == "":
		return fmt.Errorf("%w: a server without a name", ErrInvalidConfig)
	case !validName(c.Name):
		return fail("name must be letters, digits, '-' and '_' only")
	case len(c.Command) == 0 && c.URL == "":
		return fail("needs a command (stdio) or a url (streamable HTTP)")
	case len(c.Command) > 0 && c.URL != "":
		return fail("has both a command and a url; give one")
	case c.Timeout < 0:
		return fail("timeout %v is negative", c.Timeout)
	case len(c.Headers) > 0 && c.URL == "":
		return fail("headers apply to a url server only")
	case len(c.Env) > 0 && len(c.Command) == 0:
		return fail("env applies to a command server only")
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fail("url %q is not an http:// or https:// URL", c.URL)
		}
	}
	if len(c.Command) > 0 && c.Command[0] == "" {
		return fail("empty command")
	}
	return nil
}

func validName(s string) bool {
	if !events.ValidToken(s) {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func (c ServerConfig) timeout() time.Duration {
	if c.Timeout == 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// ParseSpec parses the command-line form of a server, as `--mcp` takes
// it: NAME=COMMAND ARGS… for a stdio server (split at white space; use a
// config file for arguments with spaces) or NAME=http(s)://… for a
// streamable-HTTP server.
func ParseSpec(spec string) (ServerConfig, error) {
	name, rest, ok := strings.Cut(spec, "=")
	rest = strings.TrimSpace(rest)
	if !ok || rest == "" {
		return ServerConfig{}, fmt.Errorf("--mcp %q: %w: want NAME=COMMAND ARGS… or NAME=https://…", spec, ErrInvalidConfig)
	}
	c := ServerConfig{Name: strings.TrimSpace(name)}
	if strings.HasPrefix(rest, "http://") || strings.HasPrefix(rest, "https://") {
		c.URL = rest
	} else {
		c.Command = strings.Fields(rest)
	}
	if err := c.Validate(); err != nil {
		return ServerConfig{}, fmt.Errorf("--mcp %q: %w", spec, err)
	}
	return c, nil
}

// File is the YAML form of a host's servers (`--mcp-config`):
//
//	servers:
//	  - name: files
//	    command: [mcp-server-filesystem, /srv/data]
//	    env: {LOG_LEVEL: warn}
//	    timeout: 30s
//	  - name: search
//	    url: https://mcp.example.com/mcp
//	    headers: {Authorization: "Bearer …"}
type File struct {
	Servers []ServerConfig `yaml:"servers"`
}

// ParseFile parses a config file's bytes (name is used in errors). Unknown
// fields are refused; every server is validated.
func ParseFile(name string, data []byte) ([]ServerConfig, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, name, err)
	}
	for i, s := range f.Servers {
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("%s: servers[%d]: %w", name, i, err)
		}
	}
	return f.Servers, nil
}

// Load reads the servers of a config file (path "" = none) and of specs
// (ParseSpec), refusing a name given twice.
func Load(path string, specs []string) ([]ServerConfig, error) {
	var out []ServerConfig
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		if out, err = ParseFile(path, data); err != nil {
			return nil, err
		}
	}
	for _, s := range specs {
		c, err := ParseSpec(s)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	seen := map[string]bool{}
	for _, c := range out {
		if seen[c.Name] {
			return nil, fmt.Errorf("%w: server %q is configured twice", ErrInvalidConfig, c.Name)
		}
		seen[c.Name] = true
	}
	return slices.Clip(out), nil
}
