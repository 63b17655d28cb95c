package tool

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/invopop/jsonschema"
)

// canon parses a JSON Schema and sorts every "required" array: the order of
// required names carries no meaning in JSON Schema, so tests must not depend
// on it.
func canon(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, raw)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				if r, ok := c.([]any); ok && k == "required" {
					slices.SortFunc(r, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
				}
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(v)
	return v
}

func assertSchema(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	if !reflect.DeepEqual(canon(t, got), canon(t, []byte(want))) {
		t.Errorf("schema mismatch\n got: %s\nwant: %s", got, want)
	}
	for _, k := range []string{`"$ref"`, `"$defs"`, `"definitions"`, `"$schema"`, `"$id"`} {
		if strings.Contains(string(got), k) {
			t.Errorf("schema contains %s: %s", k, got)
		}
	}
}

type Unit string

type Location struct {
	City    string `json:"city" description:"City name, e.g. Tokyo"`
	Country string `json:"country,omitempty" jsonschema:"description=ISO 3166 code\\, two letters,minLength=2,maxLength=2"`
}

type Base struct {
	Verbose bool `json:"verbose,omitempty" description:"Explain the answer"`
}

type ForecastArgs struct {
	Base
	Location Location          `json:"location" description:"Where"`
	Days     int               `json:"days,omitempty" jsonschema:"minimum=1,maximum=7,default=3"`
	Unit     Unit              `json:"unit,omitempty" jsonschema:"enum=celsius,enum=fahrenheit" description:"Temperature unit"`
	Stops    []Location        `json:"stops,omitempty"`
	Tags     []string          `json:"tags,omitempty" jsonschema:"maxItems=3"`
	Since    time.Time         `json:"since,omitzero"`
	Limit    *int              `json:"limit,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Score    float64           `json:"score"`
	Force    bool              `json:"force,omitempty" jsonschema:"required"`
	Note     *string           `json:"note,omitempty" jsonschema:"nullable"`
	Ignored  string            `json:"-"`
	hidden   string
}

// The expected schema is written by hand from the JSON Schema spec and the
// tag rules documented in doc.go, not captured from the generator.
const forecastSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["location", "score", "force"],
  "properties": {
    "verbose": {"type": "boolean", "description": "Explain the answer"},
    "location": {
      "type": "object",
      "description": "Where",
      "additionalProperties": false,
      "required": ["city"],
      "properties": {
        "city": {"type": "string", "description": "City name, e.g. Tokyo"},
        "country": {"type": "string", "description": "ISO 3166 code, two letters", "minLength": 2, "maxLength": 2}
      }
    },
    "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 3},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
    "stops": {
      "type": "array",
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["city"],
        "properties": {
          "city": {"type": "string", "description": "City name, e.g. Tokyo"},
          "country": {"type": "string", "description": "ISO 3166 code, two letters", "minLength": 2, "maxLength": 2}
        }
      }
    },
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "since": {"type": "string", "format": "date-time"},
    "limit": {"type": "integer"},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "score": {"type": "number"},
    "force": {"type": "boolean"},
    "note": {"oneOf": [{"type": "string"}, {"type": "null"}]}
  }
}`

func TestSchemaForNested(t *testing.T) {
	got, err := SchemaFor[ForecastArgs]()
	if err != nil {
		t.Fatal(err)
	}
	assertSchema(t, got, forecastSchema)

	// A pointer to the arguments struct describes the same object.
	got, err = SchemaFor[*ForecastArgs]()
	if err != nil {
		t.Fatal(err)
	}
	assertSchema(t, got, forecastSchema)
}

func TestSchemaForSimpleTypes(t *testing.T) {
	cases := []struct {
		name string
		get  func() (json.RawMessage, error)
		want string
	}{
		{"empty struct", SchemaFor[struct{}], `{"type":"object","properties":{},"additionalProperties":false}`},
		{"map of any", SchemaFor[map[string]any], `{"type":"object"}`},
		{"map of ints", SchemaFor[map[string]int], `{"type":"object","additionalProperties":{"type":"integer"}}`},
		{"no json tags", SchemaFor[struct{ A string }], `{"type":"object","properties":{"A":{"type":"string"}},"required":["A"],"additionalProperties":false}`},
		{"jsonschema description wins over description tag", SchemaFor[struct {
			Q string `json:"q" jsonschema:"description=from jsonschema" description:"from description"`
		}], `{"type":"object","properties":{"q":{"type":"string","description":"from jsonschema"}},"required":["q"],"additionalProperties":false}`},
		{"nested slices", SchemaFor[struct {
			Grid [][]int `json:"grid"`
		}], `{"type":"object","properties":{"grid":{"type":"array","items":{"type":"array","items":{"type":"integer"}}}},"required":["grid"],"additionalProperties":false}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.get()
			if err != nil {
				t.Fatal(err)
			}
			assertSchema(t, got, c.want)
		})
	}
}

type pkgLocation = Location

// A nested type with the same Go name as the root must not replace the root
// schema (a pitfall of looking the root up by type name).
func TestSchemaForSameNameNested(t *testing.T) {
	type Location struct {
		Where pkgLocation `json:"where"`
	}
	got, err := SchemaFor[Location]()
	if err != nil {
		t.Fatal(err)
	}
	assertSchema(t, got, `{"type":"object","additionalProperties":false,"required":["where"],"properties":{
		"where":{"type":"object","additionalProperties":false,"required":["city"],"properties":{
			"city": {"type": "string", "description": "City name, e.g. Tokyo"},
			"country": {"type": "string", "description": "ISO 3166 code, two letters", "minLength": 2, "maxLength": 2}}}}}`)
}

type recursiveNode struct {
	Name     string           `json:"name"`
	Children []*recursiveNode `json:"children,omitempty"`
}

type recursiveViaPointer struct {
	Next *recursiveViaPointer `json:"next,omitempty"`
}

type refSchema struct{}

func (refSchema) JSONSchema() *jsonschema.Schema { return &jsonschema.Schema{Ref: "#/$defs/elsewhere"} }

func TestSchemaForRejects(t *testing.T) {
	cases := []struct {
		name string
		get  func() (json.RawMessage, error)
		want string // part of the message
	}{
		{"recursive via slice", SchemaFor[recursiveNode], "recursive"},
		{"recursive via pointer", SchemaFor[recursiveViaPointer], "recursive"},
		{"string", SchemaFor[string], `"type": "object"`},
		{"slice", SchemaFor[[]int], `"type": "object"`},
		{"interface", SchemaFor[any], "interface"},
		{"chan field", SchemaFor[struct {
			C chan int `json:"c"`
		}], "chan"},
		{"func field", SchemaFor[struct{ F func() }], "func"},
		{"ref from custom schema", SchemaFor[struct {
			R refSchema `json:"r"`
		}], "$ref at /properties/r/$ref"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.get()
			if !errors.Is(err, ErrInvalidSchema) {
				t.Fatalf("err = %v, want ErrInvalidSchema", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %q, want it to mention %q", err, c.want)
			}
		})
	}
}
