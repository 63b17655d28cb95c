package gemini

import (
	"encoding/json"
	"strconv"
	"strings"

	"google.golang.org/genai"
)

// argsBuilder assembles the arguments of a function call, given whole
// (args) or streamed as partialArgs: values addressed by a JSON path, a
// string value possibly split over several pieces of the same path
// (willContinue).
type argsBuilder struct {
	root map[string]any
	// cont is the path whose string value continues in the next piece.
	cont string
}

func (a *argsBuilder) merge(args map[string]any) {
	if len(args) == 0 {
		return
	}
	if a.root == nil {
		a.root = make(map[string]any, len(args))
	}
	for k, v := range args {
		a.root[k] = v
	}
}

func (a *argsBuilder) add(pas []*genai.PartialArg) {
	for _, pa := range pas {
		if pa == nil {
			continue
		}
		var v any
		isString := false
		switch {
		case pa.NumberValue != nil:
			v = *pa.NumberValue
		case pa.BoolValue != nil:
			v = *pa.BoolValue
		case pa.NULLValue != "":
			v = nil
		default:
			isString = true
		}
		path := parsePath(pa.JsonPath)
		if isString {
			s := pa.StringValue
			if a.cont == pa.JsonPath {
				if prev, ok := a.get(path).(string); ok {
					s = prev + s
				}
			}
			v = s
		}
		a.set(path, v)
		a.cont = ""
		if isString && pa.WillContinue != nil && *pa.WillContinue {
			a.cont = pa.JsonPath
		}
	}
}

// json returns the arguments as a JSON object ("{}" when there are none).
func (a *argsBuilder) json() string {
	if len(a.root) == 0 {
		return "{}"
	}
	b, err := json.Marshal(a.root)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// seg is one step of a JSON path: a key, or an index when key is "" and
// idx >= 0.
type seg struct {
	key string
	idx int
}

// parsePath parses the RFC 9535 subset the API sends: $.a.b, $.a[0],
// $['a'] and $["a"]. Anything else is taken as one key at the top level,
// so that no value is lost.
func parsePath(p string) []seg {
	rest, ok := strings.CutPrefix(p, "$")
	if !ok {
		return []seg{{key: p, idx: -1}}
	}
	var out []seg
	for rest != "" {
		switch {
		case rest[0] == '.':
			rest = rest[1:]
			n := strings.IndexAny(rest, ".[")
			if n < 0 {
				n = len(rest)
			}
			if n == 0 {
				return []seg{{key: p, idx: -1}}
			}
			out = append(out, seg{key: rest[:n], idx: -1})
			rest = rest[n:]
		case strings.HasPrefix(rest, "['") || strings.HasPrefix(rest, `["`):
			q := rest[1]
			end := strings.IndexByte(rest[2:], q)
			if end < 0 || len(rest) < end+4 || rest[2+end+1] != ']' {
				return []seg{{key: p, idx: -1}}
			}
			out = append(out, seg{key: rest[2 : 2+end], idx: -1})
			rest = rest[2+end+2:]
		case rest[0] == '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return []seg{{key: p, idx: -1}}
			}
			i, err := strconv.Atoi(rest[1:end])
			if err != nil || i < 0 || i > 1<<16 {
				return []seg{{key: p, idx: -1}}
			}
			out = append(out, seg{idx: i})
			rest = rest[end+1:]
		default:
			return []seg{{key: p, idx: -1}}
		}
	}
	if len(out) == 0 || out[0].key == "" {
		// The root itself or an index at the top: keep it under its path.
		return []seg{{key: p, idx: -1}}
	}
	return out
}

func (a *argsBuilder) get(path []seg) any {
	var cur any = a.root
	for _, s := range path {
		switch c := cur.(type) {
		case map[string]any:
			if s.key == "" {
				return nil
			}
			cur = c[s.key]
		case []any:
			if s.key != "" || s.idx >= len(c) {
				return nil
			}
			cur = c[s.idx]
		default:
			return nil
		}
	}
	return cur
}

// set stores v at path, creating objects and arrays on the way (and
// replacing what does not fit).
func (a *argsBuilder) set(path []seg, v any) {
	if a.root == nil {
		a.root = map[string]any{}
	}
	a.root[path[0].key] = setIn(a.root[path[0].key], path[1:], v)
}

func setIn(cur any, path []seg, v any) any {
	if len(path) == 0 {
		return v
	}
	s := path[0]
	if s.key != "" {
		m, ok := cur.(map[string]any)
		if !ok {
			m = map[string]any{}
		}
		m[s.key] = setIn(m[s.key], path[1:], v)
		return m
	}
	l, _ := cur.([]any)
	for len(l) <= s.idx {
		l = append(l, nil)
	}
	l[s.idx] = setIn(l[s.idx], path[1:], v)
	return l
}
