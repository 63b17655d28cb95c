package tool

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fullOnly is v without its fast path: what Validate answered before the
// fast path existed.
func fullOnly(v *Validator) *Validator {
	c := *v
	c.fast = nil
	return &c
}

// fullAccepts is the full validator's verdict on input, the reference the
// fast path must never contradict when it accepts.
func fullAccepts(v *Validator, input []byte) bool {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(normalizeInput(input)))
	return err == nil && v.schema.Validate(inst) == nil
}

// The verdicts below are read off the JSON Schema 2020-12 spec and RFC 8259
// by hand; both the validator as used (fast path first) and the full
// validator alone must give them, with the same error text.
func TestValidatorFastPathVerdicts(t *testing.T) {
	schema := `{"type":"object","additionalProperties":false,"required":["n","s"],"properties":{
		"n":{"type":"integer","minimum":1,"maximum":7},
		"x":{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10},
		"s":{"type":"string","minLength":2,"maxLength":3},
		"e":{"type":"string","enum":["a","b"]},
		"k":{"const":5},
		"f":{"type":"number"},
		"b":{"type":"boolean"},
		"l":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":2},
		"m":{"type":"object","additionalProperties":{"type":"integer"}},
		"o":{"type":"object","required":["z"]},
		"u":{"oneOf":[{"type":"string"},{"type":"null"}]},
		"t":{"type":["integer","boolean"]},
		"any":true}}`
	v, err := NewValidator(json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		in    string
		valid bool
	}{
		{`{"n":1,"s":"ab"}`, true},
		{` {"s":"abc" , "n" : 7 } `, true},
		{`{"n":0,"s":"ab"}`, false},                       // minimum
		{`{"n":8,"s":"ab"}`, false},                       // maximum
		{`{"n":1.0,"s":"ab"}`, true},                      // 1.0 is an integer to JSON Schema
		{`{"n":1.5,"s":"ab"}`, false},                     // not an integer
		{`{"n":1e0,"s":"ab"}`, true},                      // 1e0 = 1
		{`{"n":-0,"s":"ab"}`, false},                      // -0 = 0 < 1
		{`{"n":1,"s":"ab","x":0}`, false},                 // exclusiveMinimum
		{`{"n":1,"s":"ab","x":10}`, false},                // exclusiveMaximum
		{`{"n":1,"s":"ab","x":9}`, true},                  //
		{`{"n":1,"s":"a"}`, false},                        // minLength
		{`{"n":1,"s":"abcd"}`, false},                     // maxLength
		{`{"n":1,"s":"é€"}`, true},                        // two characters, five bytes
		{`{"n":1,"s":"\u00e9\u20ac\u00e9"}`, true},        // three characters once decoded
		{`{"n":1,"s":"\u00e9\u20ac\u00e9\u00e9"}`, false}, // four
		{`{"n":1}`, false},                                // s is required
		{`{"s":"ab"}`, false},                             // n is required
		{`{"n":1,"s":"ab","zz":1}`, false},                // additionalProperties false
		{`{"n":1,"s":"ab","e":"b"}`, true},
		{`{"n":1,"s":"ab","e":"c"}`, false},
		{`{"n":1,"s":"ab","e":"\u0061"}`, true}, // "a" escaped
		{`{"n":1,"s":"ab","k":5}`, true},
		{`{"n":1,"s":"ab","k":5.0}`, true}, // equal as numbers
		{`{"n":1,"s":"ab","k":"5"}`, false},
		{`{"n":1,"s":"ab","f":-1.5e-3}`, true},
		{`{"n":1,"s":"ab","f":"1"}`, false},
		{`{"n":1,"s":"ab","b":false}`, true},
		{`{"n":1,"s":"ab","b":0}`, false},
		{`{"n":1,"s":"ab","l":["x","y"]}`, true},
		{`{"n":1,"s":"ab","l":[]}`, false},            // minItems
		{`{"n":1,"s":"ab","l":["x","y","z"]}`, false}, // maxItems
		{`{"n":1,"s":"ab","l":["x",1]}`, false},       // items
		{`{"n":1,"s":"ab","m":{"a":1,"b c":2}}`, true},
		{`{"n":1,"s":"ab","m":{"a":"1"}}`, false},
		{`{"n":1,"s":"ab","o":{"z":null,"y":[{}]}}`, true},
		{`{"n":1,"s":"ab","o":{}}`, false},
		{`{"n":1,"s":"ab","u":null}`, true},
		{`{"n":1,"s":"ab","u":"x"}`, true},
		{`{"n":1,"s":"ab","u":1}`, false},
		{`{"n":1,"s":"ab","t":true}`, true},
		{`{"n":1,"s":"ab","t":2}`, true},
		{`{"n":1,"s":"ab","t":2.5}`, false},
		{`{"n":1,"s":"ab","any":{"deep":[1,{"x":[true,null,"\n"]}]}}`, true},
		{`{"n":1,"s":"ab","n":2}`, true},    // a repeated key: the last one counts
		{`{"n":1,"s":"ab","n":"2"}`, false}, // … and is checked
		{`{"n":1,"s":"ab"`, false},          // not JSON
		{`{"n":1,"s":"ab"} {}`, false},
		{`{"n":01,"s":"ab"}`, false},
		{`{"n":1,"s":"ab",}`, false},
		{`{"n":1,"s":"a\x"}`, false},
		{`[]`, false},
		{``, false}, // {}: n and s missing
	}
	for _, c := range cases {
		for _, vv := range []*Validator{v, fullOnly(v)} {
			err := vv.Validate(json.RawMessage(c.in))
			if (err == nil) != c.valid {
				t.Errorf("fast path %v: Validate(%s) = %v, want valid=%v", vv.fast != nil, c.in, err, c.valid)
			}
		}
		errFast, errFull := v.Validate(json.RawMessage(c.in)), fullOnly(v).Validate(json.RawMessage(c.in))
		if (errFast == nil) != (errFull == nil) || errFast != nil && errFast.Error() != errFull.Error() {
			t.Errorf("Validate(%s): with the fast path %v, without %v", c.in, errFast, errFull)
		}
	}
}

// The fast path must actually cover what typed tools generate, or the
// speed it exists for is silently gone: these inputs are valid (see
// TestTypedExecuteDecodesArgs), and the fast path alone must say so.
func TestValidatorFastPathCoversGeneratedSchemas(t *testing.T) {
	type echo struct {
		N int `json:"n"`
	}
	type nested struct {
		Path    string   `json:"path" description:"file"`
		Lines   []int    `json:"lines,omitempty"`
		Mode    string   `json:"mode,omitempty" jsonschema:"enum=r,enum=w"`
		Retries int      `json:"retries,omitempty" jsonschema:"minimum=0,maximum=5"`
		Tags    []string `json:"tags,omitempty" jsonschema:"maxItems=3"`
		Opts    struct {
			Force bool    `json:"force"`
			Ratio float64 `json:"ratio,omitempty"`
		} `json:"opts"`
		Env  map[string]string `json:"env,omitempty"`
		Note *string           `json:"note,omitempty" jsonschema:"nullable"`
	}
	for _, c := range []struct {
		schema func() (json.RawMessage, error)
		input  string
	}{
		{SchemaFor[echo], `{"n":3}`},
		{SchemaFor[nested], `{"path":"a/b","lines":[1,2],"mode":"w","retries":5,"tags":["x"],"opts":{"force":true,"ratio":0.25},"env":{"K":"V"},"note":null}`},
		{SchemaFor[nested], `{"path":"\u00e9t\u00e9","opts":{"force":false}}`},
	} {
		schema, err := c.schema()
		if err != nil {
			t.Fatal(err)
		}
		v, err := NewValidator(schema)
		if err != nil {
			t.Fatal(err)
		}
		if !v.fast.accepts([]byte(c.input)) {
			t.Errorf("the fast path does not accept %s under %s", c.input, schema)
		}
		if !fullAccepts(v, []byte(c.input)) {
			t.Errorf("the full validator rejects %s", c.input)
		}
	}
}

// Schemas the fast path does not cover, or inputs it cannot decide, go to
// the full validator with the same result as without the fast path.
func TestValidatorFastPathDeclines(t *testing.T) {
	for _, c := range []struct{ schema, input string }{
		{`{"type":"object","properties":{"d":{"type":"string","format":"date-time"}}}`, `{"d":"2024-05-01T10:00:00Z"}`},
		{`{"type":"object","properties":{"d":{"type":"string","pattern":"^a"}}}`, `{"d":"abc"}`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"exclusiveMinimum":1}}}`, `{"a":2}`},
		{`{"type":"object","properties":{"n":{"type":"integer","minimum":1}}}`, `{"n":12345678901234567890}`},
		{`{"type":"object","properties":{"n":{"type":"number","minimum":0.5}}}`, `{"n":1}`},
		{`{"type":"object","properties":{"n":{"enum":[[1]]}}}`, `{"n":[1]}`},
	} {
		v, err := NewValidator(json.RawMessage(c.schema))
		if err != nil {
			t.Fatal(err)
		}
		if v.fast.accepts([]byte(c.input)) {
			t.Errorf("the fast path accepts %s under %s, which it does not cover", c.input, c.schema)
		}
		if err := v.Validate(json.RawMessage(c.input)); err != nil {
			t.Errorf("Validate(%s) under %s: %v", c.input, c.schema, err)
		}
	}
}

// FuzzFastCheck is the differential test of the fast path against the
// full validator: for any schema that compiles and any input, an input the
// fast path accepts is one the full validator accepts, and Validate gives
// the same answer (and error text) with and without the fast path.
func FuzzFastCheck(f *testing.F) {
	forecast, _ := SchemaFor[ForecastArgs]()
	schemas := []string{
		string(forecast),
		`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`,
		`{"type":"object","properties":{"n":{"type":"integer","minimum":-3,"maximum":3,"enum":[1,2,-3]},"s":{"type":"string","minLength":1,"maxLength":2,"const":"é"}}}`,
		`{"type":"object","properties":{"a":{"type":"array","items":{"type":["string","null"]},"minItems":1,"maxItems":2},"u":{"oneOf":[{"type":"integer"},{"type":"string"}]},"v":{"anyOf":[{"type":"integer"},{"type":"number"}]}},"required":["a","x"]}`,
		`{"type":"object","additionalProperties":{"type":"object","properties":{"b":{"type":"boolean","enum":[true]}},"additionalProperties":false}}`,
		`{"type":"object","properties":{"e":{"enum":[null,false,"x",0]},"k":{"const":null},"t":true,"f":false}}`,
	}
	inputs := []string{
		``, `{}`, `{"n":1}`, `{"n":-0}`, `{"n":1.0}`, `{"n":1e2}`, `{"n":"1"}`, `{"n":1,"n":"x"}`, `{"s":"é"}`, `{"s":"\u00e9"}`,
		`{"s":"\ud800"}`, "{\"s\":\"\xff\"}", `{"a":["x",null]}`, `{"a":[],"x":1}`, `{"u":1,"v":2.5}`, `{"q":{"b":true}}`,
		`{"e":null,"k":null,"t":[{}]}`, `{"f":1}`, `[1]`, `1 2`, `{"n":99999999999999999999}`, `{"location":{"city":"x"},"score":1,"force":true}`,
		`{"location":{"city":"x","country":"JP"},"score":1e999,"force":true,"days":7,"unit":"celsius","tags":["a","b","c"],"labels":{"":""},"note":null}`,
	}
	for i := range schemas {
		for _, in := range inputs {
			f.Add(uint8(i), "", []byte(in))
		}
	}
	f.Add(uint8(255), `{"type":"object","properties":{"a":{"type":"integer","exclusiveMaximum":5}}}`, []byte(`{"a":4}`))
	f.Fuzz(func(t *testing.T, pick uint8, schema string, input []byte) {
		if int(pick) < len(schemas) {
			schema = schemas[pick]
		}
		v, err := NewValidator(json.RawMessage(schema))
		if err != nil {
			return
		}
		if v.fast.accepts(normalizeInput(input)) && !fullAccepts(v, input) {
			t.Fatalf("the fast path accepts %q under %s; the full validator does not", input, schema)
		}
		errFast, errFull := v.Validate(input), fullOnly(v).Validate(input)
		if (errFast == nil) != (errFull == nil) || errFast != nil && errFast.Error() != errFull.Error() {
			t.Fatalf("Validate(%q) under %s: with the fast path %v, without %v", input, schema, errFast, errFull)
		}
	})
}
