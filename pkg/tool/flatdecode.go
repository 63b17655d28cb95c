package tool

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
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
	s := fastScanner{b: in}
	s.ws()
	if !s.lit("{") {
		return false
	}
	s.ws()
	if !s.lit("}") {
		for {
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				return false
			}
			key, ok := s.rawStr()
			if !ok {
				return false
			}
			s.ws()
			if !s.lit(":") {
				return false
			}
			s.ws()
			f := d.field(key)
			if f == nil || !f.value(&s, v.Field(f.index)) {
				return false // an unknown key, or a name encoding/json would fold: it decides
			}
			s.ws()
			if s.lit("}") {
				break
			}
			if !s.lit(",") {
				return false
			}
			s.ws()
		}
	}
	s.ws()
	return s.i == len(s.b)
}

func (d *flatDecoder) field(key []byte) *flatField {
	for k := range d.fields {
		if d.fields[k].name == string(key) {
			return &d.fields[k]
		}
	}
	return nil
}

// value decodes the value at s.i into fv.
func (f *flatField) value(s *fastScanner, fv reflect.Value) bool {
	if s.lit("null") {
		return true // encoding/json leaves a non-pointer field as it is
	}
	switch f.kind {
	case reflect.String:
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		str, ok := s.rawStr()
		if ok {
			fv.SetString(string(str))
		}
		return ok
	case reflect.Bool:
		switch {
		case s.lit("true"):
			fv.SetBool(true)
		case s.lit("false"):
			fv.SetBool(false) // a repeated key: the last value counts
		default:
			return false
		}
		return true
	}
	start := s.i
	if _, _, _, ok := s.numberLit(); !ok {
		return false
	}
	tok := string(s.b[start:s.i])
	switch f.kind {
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(tok, f.bits)
		if err != nil {
			return false
		}
		fv.SetFloat(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x, err := strconv.ParseUint(tok, 10, f.bits)
		if err != nil {
			return false
		}
		fv.SetUint(x)
	default:
		x, err := strconv.ParseInt(tok, 10, f.bits)
		if err != nil {
			return false
		}
		fv.SetInt(x)
	}
	return true
}
