package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
)

// SchemaFor returns the inline input schema New generates for an arguments
// type A: a JSON Schema object with no $ref, $defs, $schema or $id, because
// model APIs take a self-contained schema and some reject references.
//
// Field names, required fields and keywords follow invopop/jsonschema: a
// field is required unless its json tag has omitempty/omitzero (or it is
// tagged `jsonschema:"required"`), `jsonschema:"description=...,enum=a,enum=b,
// minimum=1,..."` sets keywords, and objects do not allow additional
// properties. A plain `description:"..."` tag also sets the description
// (handy for descriptions with commas, which the jsonschema tag would split).
//
// It fails with ErrInvalidSchema when A is not a struct or map (tool input is
// a JSON object), is recursive (an inline schema would be infinite), or
// contains types JSON cannot carry (channels, funcs, complex numbers).
func SchemaFor[A any]() (json.RawMessage, error) {
	return reflectSchema(reflect.TypeFor[A]())
}

func reflectSchema(t reflect.Type) (raw json.RawMessage, err error) {
	if err := checkInlinable(t, nil, ""); err != nil {
		return nil, err
	}
	r := &jsonschema.Reflector{
		// Inline everything: no $defs, no $ref. ExpandedStruct is left off on
		// purpose: with DoNotReference the reflected root is already inline,
		// and ExpandedStruct would look the root up in the definitions by
		// type name, picking the wrong schema when a nested type has the
		// same name as the root (two packages' "Args").
		DoNotReference: true,
		Anonymous:      true, // no $id
		LookupComment:  descriptionTag,
	}
	defer func() {
		// invopop panics on types it cannot reflect (chan, func, complex).
		if p := recover(); p != nil {
			raw, err = nil, fmt.Errorf("%w: %s: %v", ErrInvalidSchema, typeName(t), p)
		}
	}()
	s := r.ReflectFromType(t)
	s.Version = "" // no $schema: the model API decides the draft
	s.ID = ""
	s.Definitions = nil
	raw, err = json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidSchema, typeName(t), err)
	}
	if err := checkToolSchema(raw); err != nil {
		return nil, fmt.Errorf("%w (arguments type %s; use a struct or map type)", err, typeName(t))
	}
	if err := checkInline(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// descriptionTag is the Reflector's LookupComment: it reads the plain
// `description:"..."` struct tag. invopop only calls it when neither
// `jsonschema:"description=..."` nor `jsonschema_description` set one.
func descriptionTag(t reflect.Type, field string) string {
	if field == "" || t.Kind() != reflect.Struct {
		return ""
	}
	f, ok := t.FieldByName(field)
	if !ok {
		return ""
	}
	return f.Tag.Get("description")
}

func typeName(t reflect.Type) string {
	if t == nil {
		return "<nil>"
	}
	return t.String()
}

var (
	timeType = reflect.TypeFor[time.Time]()
	urlType  = reflect.TypeFor[url.URL]()
	rawType  = reflect.TypeFor[json.RawMessage]()
	// Types with their own schema methods are not walked: invopop does not
	// recurse into them either.
	customSchemaType = reflect.TypeFor[interface{ JSONSchema() *jsonschema.Schema }]()
)

// checkInlinable reports types invopop would recurse into forever without
// references (DoNotReference makes recursive types an endless reflection
// and a stack overflow, which cannot be recovered).
func checkInlinable(t reflect.Type, stack []reflect.Type, path string) error {
	if t == nil {
		return fmt.Errorf("%w: arguments type is an interface; use a struct or map type", ErrInvalidSchema)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType || t == urlType || t == rawType || t.Implements(customSchemaType) || reflect.PointerTo(t).Implements(customSchemaType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return checkInlinable(t.Elem(), stack, path+"[]")
	case reflect.Struct:
	default:
		return nil
	}
	for _, s := range stack {
		if s == t {
			return fmt.Errorf("%w: %s is recursive (at %s); an inline schema cannot describe it, give the schema with WithSchema",
				ErrInvalidSchema, t, strings.TrimPrefix(path, "."))
		}
	}
	stack = append(stack, t)
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || strings.HasPrefix(f.Tag.Get("jsonschema"), "-") {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if err := checkInlinable(f.Type, stack, path+"."+name); err != nil {
			return err
		}
	}
	return nil
}

// checkToolSchema checks what model APIs require of a tool input schema: a
// JSON object of "type": "object".
func checkToolSchema(raw json.RawMessage) error {
	var m map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(raw), &m); err != nil || m == nil {
		return fmt.Errorf("%w: must be a JSON object", ErrInvalidSchema)
	}
	if m["type"] != "object" {
		return fmt.Errorf("%w: must have \"type\": \"object\" (tool input is a JSON object), got %s", ErrInvalidSchema, jsonText(m["type"]))
	}
	return nil
}

// checkInline rejects a generated schema with a $ref: it can only come from
// custom schema methods or ref tags, and would dangle without $defs.
func checkInline(raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	if p := findRef(v, ""); p != "" {
		return fmt.Errorf("%w: contains a $ref at %s; a generated schema must be inline (give a schema with WithSchema instead)", ErrInvalidSchema, p)
	}
	return nil
}

func jsonText(v any) string {
	if v == nil {
		return "nothing"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// findRef returns the JSON pointer of the first $ref in the schema s (keys
// visited in sorted order so the answer is stable), "" if none.
func findRef(s any, at string) string {
	switch s := s.(type) {
	case []any:
		for i, c := range s {
			if p := findRef(c, at+"/"+strconv.Itoa(i)); p != "" {
				return p
			}
		}
	case map[string]any:
		if _, ok := s["$ref"]; ok {
			return at + "/$ref"
		}
		for _, k := range slices.Sorted(maps.Keys(s)) {
			switch k {
			case "enum", "const", "default", "examples":
				// values, not schemas
			case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
				// maps from names to schemas: a property may be called "$ref"
				if m, ok := s[k].(map[string]any); ok {
					for _, name := range slices.Sorted(maps.Keys(m)) {
						if p := findRef(m[name], at+"/"+k+"/"+name); p != "" {
							return p
						}
					}
				}
			default:
				if p := findRef(s[k], at+"/"+k); p != "" {
					return p
				}
			}
		}
	}
	return ""
}
