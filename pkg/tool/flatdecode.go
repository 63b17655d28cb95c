package tool

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// flatDecoder decodes a JSON object into a flat argument struct — exported
// fields of string, bool, integer and float kinds, the struct most tools
// take — without encoding/json's reflection walk, which was most of what a
// tool call with instant work cost. It only ever succeeds where
// encoding/json would give the same value: any input it does not decide
// plainly (escapes, a key that is not a field's exact name, a number that
// does not fit, a value of another JSON type, trailing bytes) makes it
// answer false, and the caller decodes with encoding/json, whose errors
// are the ones reported. FuzzFlatDecoder checks that against encoding/json.
type flatDecoder struct {
	fields []flatField
}

type flatField struct {
	name  string
	index int
	kind  reflect.Kind
	bits  int
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// newFlatDecoder returns the decoder for t, or nil when t is not a flat
// argument struct.
func newFlatDecoder(t reflect.Type) *flatDecoder {
	if t.Kind() != reflect.Struct || implementsUnmarshal(t) {
		return nil
	}
	d := &flatDecoder{}
	seen := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil // embedded fields follow encoding/json's promotion rules
		}
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		for _, o := range strings.Split(opts, ",") {
			if o != "" && o != "omitempty" && o != "omitzero" {
				return nil // ",string" and options to come
			}
		}
		if name == "" {
			name = f.Name
		}
		if !plainName(name) {
			return nil // encoding/json has rules for names it finds invalid
		}
		if seen[strings.ToLower(name)] {
			return nil // names that fold together: encoding/json's rules decide
		}
		seen[strings.ToLower(name)] = true
		k := f.Type.Kind()
		switch k {
		case reflect.String, reflect.Bool,
			reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
		default:
			return nil
		}
		if implementsUnmarshal(f.Type) {
			return nil
		}
		ff := flatField{name: name, index: i, kind: k}
		if k != reflect.String && k != reflect.Bool {
			ff.bits = f.Type.Bits()
		}
		d.fields = append(d.fields, ff)
	}
	return d
}

// plainName reports whether a field's JSON name is ASCII letters, digits,
// '_' and '-' only.
func plainName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return name != ""
}

func implementsUnmarshal(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshaler) || p.Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || p.Implements(textUnmarshaler)
}

// decode sets the fields of v (a struct of the decoder's type, addressable
// and zero) from in; false means in was not decided and v may be partly set.
func (d *flatDecoder) decode(in []byte, v reflect.Value) bool {
	i := skipWS(in, 0)
	if i >= len(in) || in[i] != '{' {
		return false
	}
	i = skipWS(in, i+1)
	if i < len(in) && in[i] == '}' {
		return skipWS(in, i+1) == len(in)
	}
	for {
		key, j, ok := plainString(in, i)
		if !ok {
			return false
		}
		i = skipWS(in, j)
		if i >= len(in) || in[i] != ':' {
			return false
		}
		i = skipWS(in, i+1)
		f := d.field(key)
		if f == nil {
			return false // unknown, or a name encoding/json would fold: it decides
		}
		if i, ok = d.value(in, i, f, v.Field(f.index)); !ok {
			return false
		}
		i = skipWS(in, i)
		if i >= len(in) {
			return false
		}
		switch in[i] {
		case ',':
			i = skipWS(in, i+1)
		case '}':
			return skipWS(in, i+1) == len(in)
		default:
			return false
		}
	}
}

func (d *flatDecoder) field(key []byte) *flatField {
	for k := range d.fields {
		if d.fields[k].name == string(key) {
			return &d.fields[k]
		}
	}
	return nil
}

// value decodes the value at in[i:] into fv and returns where it ends.
func (d *flatDecoder) value(in []byte, i int, f *flatField, fv reflect.Value) (int, bool) {
	if hasLiteral(in, i, "null") {
		return i + 4, true // encoding/json leaves a non-pointer field as it is
	}
	switch f.kind {
	case reflect.String:
		s, j, ok := plainString(in, i)
		if !ok {
			return 0, false
		}
		fv.SetString(string(s))
		return j, true
	case reflect.Bool:
		switch {
		case hasLiteral(in, i, "true"):
			fv.SetBool(true)
			return i + 4, true
		case hasLiteral(in, i, "false"):
			fv.SetBool(false) // a repeated key: the last value counts
			return i + 5, true
		}
		return 0, false
	}
	j := i
	for j < len(in) && strings.IndexByte("+-.0123456789eE", in[j]) >= 0 {
		j++
	}
	tok := in[i:j]
	if !jsonNumber(tok) {
		return 0, false
	}
	switch f.kind {
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(string(tok), f.bits)
		if err != nil {
			return 0, false
		}
		fv.SetFloat(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x, err := strconv.ParseUint(string(tok), 10, f.bits)
		if err != nil {
			return 0, false
		}
		fv.SetUint(x)
	default:
		x, err := strconv.ParseInt(string(tok), 10, f.bits)
		if err != nil {
			return 0, false
		}
		fv.SetInt(x)
	}
	return j, true
}

// plainString returns the content of the JSON string at in[i:] when it
// needs no decoding: no escapes, no control characters, valid UTF-8.
func plainString(in []byte, i int) ([]byte, int, bool) {
	if i >= len(in) || in[i] != '"' {
		return nil, 0, false
	}
	ascii := true
	for j := i + 1; j < len(in); j++ {
		switch c := in[j]; {
		case c == '"':
			s := in[i+1 : j]
			if !ascii && !utf8.Valid(s) {
				return nil, 0, false // encoding/json replaces invalid bytes
			}
			return s, j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, 0, false
}

// jsonNumber reports whether tok is a number in JSON's grammar
// (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?).
func jsonNumber(tok []byte) bool {
	i := 0
	digits := func() int {
		n := 0
		for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(tok) && tok[i] == '-' {
		i++
	}
	if i < len(tok) && tok[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(tok) && tok[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(tok)
}

func hasLiteral(in []byte, i int, lit string) bool {
	return len(in)-i >= len(lit) && string(in[i:i+len(lit)]) == lit
}

func skipWS(in []byte, i int) int {
	for i < len(in) && (in[i] == ' ' || in[i] == '\t' || in[i] == '\n' || in[i] == '\r') {
		i++
	}
	return i
}
