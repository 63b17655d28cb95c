package hookbridge

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook/builtin"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
)

// builtin decodes a builtin: block into the config struct of its type
// (package hook/builtin), validates it and serves the typed hook through
// hooknats.Adapt. Every problem names the line and the field: unknown
// keys and wrong types here, the config's own Validate errors at the node
// of the field they name.
func (d *decoder) builtin(n *yaml.Node, path string, reg *events.HookRegistration, eventNode *yaml.Node) (hooknats.Handler, error) {
	if n.Kind != yaml.MappingNode {
		return nil, d.errAt(n, path, "must be a mapping with a type")
	}
	var typN *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "type" {
			typN = n.Content[i+1]
		}
	}
	if typN == nil {
		return nil, d.errAt(n, path+".type", "is required (one of %s)", list(builtin.Types))
	}
	typ, err := d.str(typN, path+".type")
	if err != nil {
		return nil, err
	}
	cfg, ok := builtin.ConfigOf(typ)
	if !ok {
		return nil, d.errAt(typN, path+".type", "unknown builtin %q (one of %s)", typ, list(builtin.Types))
	}
	if ev := cfg.Event(); reg.Event == "" {
		reg.Event = ev
	} else if reg.Event != ev {
		return nil, d.errAt(eventNode, strings.TrimSuffix(path, ".builtin")+".event", "builtin %s runs at %s, not %s", typ, ev, reg.Event)
	}
	allowed := append([]string{"type"}, yamlFields(cfg)...)
	if typ == "validate_json" {
		allowed = append(allowed, "schema_file") // read here, relative to the config file
	}
	m, err := d.mapping(n, path, allowed...)
	if err != nil {
		return nil, err
	}
	body := withoutKeys(n, "type", "schema_file")
	if err := body.Decode(cfg); err != nil {
		return nil, d.yamlDecodeError(n, path, err)
	}
	switch c := cfg.(type) {
	case *builtin.LimitToolCalls:
		c.Name = reg.Name
	case *builtin.InjectMessage:
		c.Now = d.opts.Now
	case *builtin.ValidateJSON:
		if fn, ok := m["schema_file"]; ok {
			if _, both := m["schema"]; both {
				return nil, d.errAt(fn, path+".schema_file", "give schema or schema_file, not both")
			}
			if c.Schema, err = d.schemaFile(fn, path+".schema_file"); err != nil {
				return nil, err
			}
			if verr := cfg.Validate(); verr != nil {
				var fe *builtin.FieldError
				if errors.As(verr, &fe) && fe.Field == "schema" {
					return nil, d.errAt(fn, path+".schema_file", "%s", fe.Problem)
				}
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		var fe *builtin.FieldError
		if !errors.As(err, &fe) {
			return nil, d.errAt(n, path, "%v", err)
		}
		field := path
		if fe.Field != "" {
			field = joinField(path, fe.Field)
		}
		return nil, d.errAt(locate(n, fe.Field), field, "%s", fe.Problem)
	}
	if mt, ok := cfg.(builtin.Matcher); ok && reg.Matcher == "" {
		// Only matching calls need a round trip to the bridge.
		reg.Matcher = mt.Matcher()
	}
	h, err := builtin.New(cfg)
	if err != nil {
		return nil, d.errAt(n, path, "%v", err)
	}
	handler, _, err := hooknats.Adapt(h)
	if err != nil {
		return nil, d.errAt(n, path, "%v", err)
	}
	return handler, nil
}

// yamlFields are the yaml names of a config struct's fields.
func yamlFields(cfg any) []string {
	t := reflect.TypeOf(cfg)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// withoutKeys returns a copy of mapping n without the given keys.
func withoutKeys(n *yaml.Node, keys ...string) *yaml.Node {
	c := *n
	c.Content = nil
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !contains(keys, n.Content[i].Value) {
			c.Content = append(c.Content, n.Content[i], n.Content[i+1])
		}
	}
	return &c
}

// yamlDecodeError reports a type error of yaml.v3 ("line 5: cannot
// unmarshal !!str `x` into int") at its line, naming the field when the
// line holds one.
func (d *decoder) yamlDecodeError(n *yaml.Node, path string, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		return d.errAt(n, path, "%v", err)
	}
	msg := te.Errors[0]
	line := 0
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Line == line || k.Line == line {
			return d.errAt(v, joinField(path, k.Value), "%s", msg)
		}
	}
	return d.errAt(n, path, "%s", msg)
}

// locate finds the node of a field path below n ("pattern", "presets[1]",
// "patterns[0].regex", "set.a..b": a mapping key may contain dots, so the
// longest key that matches wins); n itself when the path does not lead
// anywhere.
func locate(n *yaml.Node, field string) *yaml.Node {
	for field != "" {
		switch n.Kind {
		case yaml.MappingNode:
			var next *yaml.Node
			rest, keyLen := "", -1
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if len(k) <= keyLen {
					continue
				}
				switch {
				case field == k:
					next, rest, keyLen = n.Content[i+1], "", len(k)
				case strings.HasPrefix(field, k+"."):
					next, rest, keyLen = n.Content[i+1], field[len(k)+1:], len(k)
				case strings.HasPrefix(field, k+"["):
					next, rest, keyLen = n.Content[i+1], field[len(k):], len(k)
				}
			}
			if next == nil {
				return n
			}
			n, field = next, rest
		case yaml.SequenceNode:
			end := strings.IndexByte(field, ']')
			if !strings.HasPrefix(field, "[") || end < 0 {
				return n
			}
			i, err := strconv.Atoi(field[1:end])
			if err != nil || i < 0 || i >= len(n.Content) {
				return n
			}
			n, field = n.Content[i], strings.TrimPrefix(field[end+1:], ".")
		default:
			return n
		}
	}
	return n
}

func joinField(path, field string) string {
	if strings.HasPrefix(field, "[") {
		return path + field
	}
	return path + "." + field
}

// schemaFile reads validate_json's schema_file (JSON or YAML) relative to
// the config file's directory.
func (d *decoder) schemaFile(fn *yaml.Node, field string) (json.RawMessage, error) {
	p, err := d.str(fn, field)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(d.opts.BaseDir, p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, d.errAt(fn, field, "%v", err)
	}
	if json.Valid(b) {
		return b, nil
	}
	var y any
	if yaml.Unmarshal(b, &y) != nil {
		return nil, d.errAt(fn, field, "%s is neither JSON nor YAML", p)
	}
	if b, err = json.Marshal(normalizeYAML(y)); err != nil {
		return nil, d.errAt(fn, field, "%v", err)
	}
	return b, nil
}
