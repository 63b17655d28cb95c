package hookbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
)

// File is a parsed hook config file: the hooks in the order written, each
// with its registration and handler ready to serve.
type File struct {
	Hooks []hooknats.Hook
}

// LoadConfig reads and parses a config file (see ParseConfig).
func LoadConfig(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{File: path, Problem: err.Error()}
	}
	return ParseConfig(path, b, ParseOptions{})
}

// ParseOptions are the environment of ParseConfig; the zero value uses the
// process environment and the real clock.
type ParseOptions struct {
	// Getenv expands ${VAR} in HTTP headers ("" = os.Getenv).
	Getenv func(string) string
	// Now is the clock of inject_message placeholders (nil = time.Now).
	Now func() time.Time
	// BaseDir resolves relative schema_file paths ("" = the directory of
	// the config file).
	BaseDir string
}

// ParseConfig parses a YAML hook config (name is used in errors):
//
//	hooks:
//	  - name: no-shell              # required, a NATS subject token
//	    event: before_tool_call     # optional for builtins (implied by the type)
//	    matcher: "^shell$"          # regexp on the tool name, "" = all
//	    priority: 0                 # ascending, then the order in this file
//	    timeout: 5s                 # per call (default: the turn's, 30s)
//	    failure: fail_closed        # or fail_open
//	    subject: llmw.hook.no-shell # default P.hook.<name>
//	    builtin: {type: deny_tools, pattern: "^shell$", reason: "no shell"}
//	    # or command: {argv: [...]} / {shell: "..."}, or http: {url: ...}
//
// Every problem is a *ConfigError naming the line, column and field.
func ParseConfig(name string, data []byte, o ParseOptions) (*File, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.BaseDir == "" {
		o.BaseDir = dirOf(name)
	}
	d := &decoder{file: name, opts: o}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ConfigError{File: name, Problem: "empty config: want a mapping with a hooks list"}
		}
		return nil, yamlError(name, err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	top, err := d.mapping(root, "", "hooks")
	if err != nil {
		return nil, err
	}
	list, ok := top["hooks"]
	if !ok {
		return nil, d.errAt(root, "hooks", "is required: a list of hooks")
	}
	if list.Kind != yaml.SequenceNode {
		return nil, d.errAt(list, "hooks", "must be a list of hooks")
	}
	f := &File{}
	names := map[string]int{}
	for i, item := range list.Content {
		path := fmt.Sprintf("hooks[%d]", i)
		h, err := d.hook(item, path)
		if err != nil {
			return nil, err
		}
		if prev, dup := names[h.Registration.Name]; dup {
			return nil, d.errAt(item, path+".name", "%q is already the name of hooks[%d]", h.Registration.Name, prev)
		}
		names[h.Registration.Name] = i
		f.Hooks = append(f.Hooks, h)
	}
	return f, nil
}

func dirOf(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' || p[i] == os.PathSeparator {
			return p[:i]
		}
	}
	return "."
}

// yamlError turns a yaml.v3 syntax error ("yaml: line 3: ...") into a
// ConfigError with the line.
var yamlLineRE = regexp.MustCompile(`line (\d+): (.*)`)

func yamlError(file string, err error) error {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &ConfigError{File: file, Line: n, Problem: "YAML syntax: " + m[2]}
	}
	return &ConfigError{File: file, Problem: "YAML syntax: " + err.Error()}
}

type decoder struct {
	file string
	opts ParseOptions
}

func (d *decoder) errAt(n *yaml.Node, field, format string, args ...any) error {
	e := &ConfigError{File: d.file, Field: field, Problem: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	return e
}

// mapping returns the values of a mapping node by key; a key not in
// allowed, a duplicate key or a node that is not a mapping is an error.
func (d *decoder) mapping(n *yaml.Node, path string, allowed ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, d.errAt(n, path, "must be a mapping (key: value)")
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		field := join(path, k.Value)
		if !contains(allowed, k.Value) {
			return nil, d.errAt(k, field, "unknown field (allowed: %s)", list(allowed))
		}
		if _, dup := out[k.Value]; dup {
			return nil, d.errAt(k, field, "appears twice")
		}
		out[k.Value] = v
	}
	return out, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func list(l []string) string {
	var b bytes.Buffer
	for i, s := range l {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s)
	}
	return b.String()
}

func (d *decoder) str(n *yaml.Node, path string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", d.errAt(n, path, "must be a string")
	}
	return n.Value, nil
}

func (d *decoder) integer(n *yaml.Node, path string) (int, error) {
	var v int
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
		return 0, d.errAt(n, path, "must be an integer, got %q", n.Value)
	}
	return v, nil
}

func (d *decoder) boolean(n *yaml.Node, path string) (bool, error) {
	var v bool
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
		return false, d.errAt(n, path, "must be true or false, got %q", n.Value)
	}
	return v, nil
}

func (d *decoder) duration(n *yaml.Node, path string) (time.Duration, error) {
	s, err := d.str(n, path)
	if err != nil {
		return 0, err
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return 0, d.errAt(n, path, "must be a positive duration such as 500ms or 5s, got %q", s)
	}
	return v, nil
}

func (d *decoder) regexp(n *yaml.Node, path string) (*regexp.Regexp, error) {
	s, err := d.str(n, path)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, d.errAt(n, path, "is not a valid regular expression: %v", err)
	}
	return re, nil
}

// strings accepts a list of strings or one string.
func (d *decoder) strings(n *yaml.Node, path string) ([]string, error) {
	if n.Kind == yaml.ScalarNode {
		s, err := d.str(n, path)
		return []string{s}, err
	}
	if n.Kind != yaml.SequenceNode {
		return nil, d.errAt(n, path, "must be a list of strings")
	}
	out := make([]string, 0, len(n.Content))
	for i, c := range n.Content {
		s, err := d.str(c, fmt.Sprintf("%s[%d]", path, i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (d *decoder) stringMap(n *yaml.Node, path string) (map[string]string, [][2]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, nil, d.errAt(n, path, "must be a mapping of strings")
	}
	out := map[string]string{}
	var nodes [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		s, err := d.str(v, join(path, k.Value))
		if err != nil {
			return nil, nil, err
		}
		out[k.Value] = s
		nodes = append(nodes, [2]*yaml.Node{k, v})
	}
	return out, nodes, nil
}

// jsonValue converts a YAML node to JSON (for schemas and set values).
func (d *decoder) jsonValue(n *yaml.Node, path string) (json.RawMessage, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, d.errAt(n, path, "%v", err)
	}
	b, err := json.Marshal(normalizeYAML(v))
	if err != nil {
		return nil, d.errAt(n, path, "cannot be expressed as JSON: %v", err)
	}
	return b, nil
}

// normalizeYAML turns map[any]any (not produced by yaml.v3, but keys may be
// non-strings) into map[string]any so that encoding/json accepts it.
func normalizeYAML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeYAML(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = normalizeYAML(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = normalizeYAML(e)
		}
		return x
	}
	return v
}

var hookFields = []string{"name", "event", "matcher", "priority", "timeout", "failure", "subject", "builtin", "command", "http"}

// hook parses one entry of the hooks list.
func (d *decoder) hook(n *yaml.Node, path string) (hooknats.Hook, error) {
	m, err := d.mapping(n, path, hookFields...)
	if err != nil {
		return hooknats.Hook{}, err
	}
	var reg events.HookRegistration
	nameN, ok := m["name"]
	if !ok {
		return hooknats.Hook{}, d.errAt(n, path+".name", "is required")
	}
	if reg.Name, err = d.str(nameN, path+".name"); err != nil {
		return hooknats.Hook{}, err
	}
	if !events.ValidToken(reg.Name) {
		return hooknats.Hook{}, d.errAt(nameN, path+".name", "must be one NATS subject token (no spaces, '.', '*' or '>'), got %q", reg.Name)
	}
	if v, ok := m["event"]; ok {
		s, err := d.str(v, path+".event")
		if err != nil {
			return hooknats.Hook{}, err
		}
		reg.Event = events.HookEvent(s)
		if !reg.Event.Valid() {
			return hooknats.Hook{}, d.errAt(v, path+".event", "must be on_message_send, before_tool_call, after_tool_call, on_turn_end or on_abort, got %q", s)
		}
	}
	if v, ok := m["matcher"]; ok {
		re, err := d.regexp(v, path+".matcher")
		if err != nil {
			return hooknats.Hook{}, err
		}
		reg.Matcher = re.String()
	}
	if v, ok := m["priority"]; ok {
		if reg.Priority, err = d.integer(v, path+".priority"); err != nil {
			return hooknats.Hook{}, err
		}
	}
	if v, ok := m["timeout"]; ok {
		t, err := d.duration(v, path+".timeout")
		if err != nil {
			return hooknats.Hook{}, err
		}
		reg.TimeoutMS = max(t.Milliseconds(), 1)
	}
	if v, ok := m["failure"]; ok {
		s, err := d.str(v, path+".failure")
		if err != nil {
			return hooknats.Hook{}, err
		}
		reg.Failure = events.FailurePolicy(s)
		if reg.Failure != events.FailClosed && reg.Failure != events.FailOpen {
			return hooknats.Hook{}, d.errAt(v, path+".failure", "must be fail_closed or fail_open, got %q", s)
		}
	}
	if v, ok := m["subject"]; ok {
		if reg.Subject, err = d.str(v, path+".subject"); err != nil {
			return hooknats.Hook{}, err
		}
	}

	// The kinds in the order written, so that the error points at the
	// second one.
	var kinds []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; k == "builtin" || k == "command" || k == "http" {
			kinds = append(kinds, k)
		}
	}
	switch len(kinds) {
	case 0:
		return hooknats.Hook{}, d.errAt(n, path, "needs one of builtin, command or http")
	case 1:
	default:
		return hooknats.Hook{}, d.errAt(m[kinds[1]], path+"."+kinds[1], "only one of builtin, command or http may be given (also has %s)", kinds[0])
	}
	var h hooknats.Handler
	switch kinds[0] {
	case "builtin":
		h, err = d.builtin(m["builtin"], path+".builtin", &reg, m["event"])
	case "command":
		h, err = d.command(m["command"], path+".command", &reg)
	case "http":
		h, err = d.http(m["http"], path+".http", &reg)
	}
	if err != nil {
		return hooknats.Hook{}, err
	}
	if reg.Event == "" {
		return hooknats.Hook{}, d.errAt(n, path+".event", "is required for %s hooks", kinds[0])
	}
	return hooknats.Hook{Registration: reg, Handler: h}, nil
}
