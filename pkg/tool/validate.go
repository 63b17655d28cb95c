package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// maxProblems bounds how many problems an InvalidArgumentError lists: enough
// for the model to fix its input, not so many that a garbage input floods the
// transcript.
const maxProblems = 10

// Validator checks tool input against a JSON Schema, compiled once. It is
// what typed and raw tools use internally, exported for executors that only
// have a schema, e.g. toolexec validating a call against the catalog entry
// of a tool hosted elsewhere. A Validator is safe for concurrent use.
type Validator struct {
	raw    json.RawMessage
	doc    any // the schema as parsed JSON, to list allowed properties
	schema *jsonschema.Schema
	// fast accepts, without building a tree of the input, the inputs it
	// can tell are valid; everything else goes to schema (fastcheck.go).
	fast *fastNode
}

// schemaURL is where the schema lives for the compiler; it is never fetched.
const schemaURL = "urn:llmworker:tool-input"

// NewValidator compiles schema (JSON Schema, draft 2020-12 unless the schema
// says otherwise in $schema). Formats (date-time, email, ...) are asserted.
// References may point only inside the schema: nothing is loaded from files
// or the network. It fails with ErrInvalidSchema when schema is not a JSON
// object or does not compile.
func NewValidator(schema json.RawMessage) (*Validator, error) {
	schema = bytes.TrimSpace(schema)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrInvalidSchema, err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, fmt.Errorf("%w: must be a JSON object", ErrInvalidSchema)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	// Schemas come from tool authors and remote catalogs: never let a $ref
	// read a local file or reach out.
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	return &Validator{raw: slices.Clone(schema), doc: doc, schema: s, fast: compileFast(doc)}, nil
}

type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("loading %s: external schema references are not allowed", u)
}

// Schema returns the schema the Validator checks against.
func (v *Validator) Schema() json.RawMessage { return v.raw }

// Validate checks input, a JSON value. Empty input (no bytes or only
// whitespace) counts as {}, because that is how model streams send a call
// without arguments. Any mismatch is an *InvalidArgumentError naming each
// offending field and what was expected there.
func (v *Validator) Validate(input json.RawMessage) error {
	_, err := v.check(input)
	return err
}

// check validates and returns the normalized input (empty → {}).
func (v *Validator) check(input json.RawMessage) (json.RawMessage, error) {
	input = normalizeInput(input)
	if v.fast.accepts(input) {
		return input, nil
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(input))
	if err != nil {
		return nil, &InvalidArgumentError{Problems: []Problem{{Message: "is not valid JSON (" + err.Error() + "); send a JSON object"}}}
	}
	err = v.schema.Validate(inst)
	if err == nil {
		return input, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, &InvalidArgumentError{Problems: []Problem{{Message: err.Error()}}}
	}
	return nil, &InvalidArgumentError{Problems: v.problems(ve, inst)}
}

var emptyObject = json.RawMessage(`{}`)

func normalizeInput(input json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(input)) == 0 {
		return emptyObject
	}
	return input
}

// problems flattens a validation error tree into its leaves, phrased for a
// model, sorted and bounded.
func (v *Validator) problems(ve *jsonschema.ValidationError, inst any) []Problem {
	var out []Problem
	types := map[string]*kind.Type{} // per field, to merge "want X" of anyOf/oneOf branches
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		field := fieldPath(inst, e.InstanceLocation)
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, m := range k.Missing {
				out = append(out, Problem{Field: joinField(field, m), Message: "is required"})
			}
		case *kind.AdditionalProperties:
			allowed := v.propertiesAt(e.SchemaURL)
			for _, p := range k.Properties {
				msg := "is not allowed"
				if len(allowed) > 0 {
					msg += " (allowed: " + strings.Join(allowed, ", ") + ")"
				}
				out = append(out, Problem{Field: joinField(field, p), Message: msg})
			}
		case *kind.Type:
			if t, ok := types[field]; ok {
				for _, w := range k.Want {
					if !slices.Contains(t.Want, w) {
						t.Want = append(t.Want, w)
					}
				}
				return
			}
			t := &kind.Type{Got: k.Got, Want: slices.Clone(k.Want)}
			types[field] = t
		default:
			out = append(out, Problem{Field: field, Message: message(e.ErrorKind)})
		}
	}
	walk(ve)
	for field, t := range types {
		out = append(out, Problem{Field: field, Message: "must be " + strings.Join(t.Want, " or ") + ", got " + t.Got})
	}
	slices.SortFunc(out, func(a, b Problem) int {
		if c := strings.Compare(a.Field, b.Field); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	out = slices.Compact(out)
	if len(out) == 0 {
		out = []Problem{{Message: "does not match the input schema"}}
	}
	if len(out) > maxProblems {
		n := len(out) - maxProblems
		out = append(out[:maxProblems], Problem{Message: "has " + strconv.Itoa(n) + " more problems"})
	}
	return out
}

// message phrases the other error kinds as "must ..." where that is clearer
// than the library's wording.
func message(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = jsonText(w)
		}
		if len(want) == 1 {
			return "must be " + want[0]
		}
		return "must be one of " + strings.Join(want, ", ")
	case *kind.Const:
		return "must be " + jsonText(k.Want)
	case *kind.Minimum:
		return "must be >= " + ratText(k.Want) + ", got " + ratText(k.Got)
	case *kind.Maximum:
		return "must be <= " + ratText(k.Want) + ", got " + ratText(k.Got)
	case *kind.ExclusiveMinimum:
		return "must be > " + ratText(k.Want) + ", got " + ratText(k.Got)
	case *kind.ExclusiveMaximum:
		return "must be < " + ratText(k.Want) + ", got " + ratText(k.Got)
	case *kind.MultipleOf:
		return "must be a multiple of " + ratText(k.Want) + ", got " + ratText(k.Got)
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %d characters long, got %d", k.Want, k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long, got %d", k.Want, k.Got)
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %d items, got %d", k.Want, k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %d items, got %d", k.Want, k.Got)
	case *kind.Pattern:
		return fmt.Sprintf("must match the pattern %s, got %s", strconv.Quote(k.Want), strconv.Quote(k.Got))
	case *kind.Format:
		return fmt.Sprintf("must be a valid %s, got %s", k.Want, jsonText(k.Got))
	case *kind.FalseSchema:
		return "is not allowed"
	}
	// The library's own wording, without its "at '<pointer>': " prefix
	// (the field is named by the Problem).
	msg := (&jsonschema.ValidationError{ErrorKind: k}).Error()
	return strings.TrimPrefix(msg, "at '': ")
}

func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() && len(r.Num().String()) <= 21 {
		return r.Num().String()
	}
	// big.Float, not float64: 1e400 must not print as +Inf.
	return new(big.Float).SetRat(r).Text('g', 10)
}

// propertiesAt lists the properties the schema at loc (a schema URL with a
// JSON pointer fragment, as the validator reports it) declares, sorted.
func (v *Validator) propertiesAt(loc string) []string {
	_, frag, _ := strings.Cut(loc, "#")
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return nil
	}
	node := v.doc
	if frag != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch n := node.(type) {
			case map[string]any:
				node = n[tok]
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(n) {
					return nil
				}
				node = n[i]
			default:
				return nil
			}
		}
	}
	m, _ := node.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// joinField appends an object key to a field path: "a.b", or a["x y"] for
// keys that would be ambiguous after a dot.
func joinField(path, key string) string {
	if !plainKey.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldPath renders an instance location (JSON pointer tokens) as a field
// path like "stops[2].name", looking at the instance to tell array indexes
// from object keys that happen to be digits.
func fieldPath(inst any, tokens []string) string {
	var b string
	node := inst
	for _, tok := range tokens {
		switch n := node.(type) {
		case []any:
			b += "[" + tok + "]"
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n) {
				node = n[i]
			} else {
				node = nil
			}
		case map[string]any:
			b = joinField(b, tok)
			node = n[tok]
		default:
			b = joinField(b, tok)
			node = nil
		}
	}
	return b
}
