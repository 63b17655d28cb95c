package tool

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// flatArgs has a field of every kind the flat decoder takes, named by tag,
// by field name and with omitempty.
type flatArgs struct {
	S    string  `json:"s"`
	B    bool    `json:"b"`
	I    int     `json:"i"`
	I8   int8    `json:"i8"`
	I64  int64   `json:"i64,omitempty"`
	U    uint    `json:"u"`
	U16  uint16  `json:"u16"`
	F32  float32 `json:"f32"`
	F    float64 `json:"f"`
	Name string
	Skip string `json:"-"`
	priv string
}

// unit is a named string type: decoded like a string.
type unit string

type flatNamed struct {
	U unit `json:"u"`
}

func TestFlatDecoderTakesOnlyFlatStructs(t *testing.T) {
	type embedded struct{ flatNamed }
	type withString struct {
		N int `json:"n,string"`
	}
	type nested struct {
		P struct{ X int } `json:"p"`
	}
	type pointer struct {
		P *int `json:"p"`
	}
	type folded struct {
		A int `json:"name"`
		B int `json:"Name"`
	}
	type custom struct {
		T time.Duration `json:"t"` // a plain int64: taken
	}
	type unmarshaler struct {
		T time.Time `json:"t"`
	}
	for _, c := range []struct {
		typ  reflect.Type
		want bool
	}{
		{reflect.TypeFor[flatArgs](), true},
		{reflect.TypeFor[flatNamed](), true},
		{reflect.TypeFor[custom](), true},
		{reflect.TypeFor[struct{}](), true},
		{reflect.TypeFor[embedded](), false},
		{reflect.TypeFor[withString](), false},
		{reflect.TypeFor[nested](), false},
		{reflect.TypeFor[pointer](), false},
		{reflect.TypeFor[folded](), false},
		{reflect.TypeFor[unmarshaler](), false},
		{reflect.TypeFor[map[string]any](), false},
		{reflect.TypeFor[*flatArgs](), false},
	} {
		if got := newFlatDecoder(c.typ) != nil; got != c.want {
			t.Errorf("%v: flat decoder %v, want %v", c.typ, got, c.want)
		}
	}
}

// What the flat decoder decides equals what encoding/json decodes, and it
// leaves to encoding/json what it does not decide.
func TestFlatDecoderAgreesWithEncodingJSON(t *testing.T) {
	d := newFlatDecoder(reflect.TypeFor[flatArgs]())
	for _, c := range []struct {
		in      string
		decided bool
	}{
		{`{}`, true},
		{` { } `, true},
		{`{"s":"héllo","b":true,"i":-42,"i8":127,"i64":9007199254740993,"u":7,"u16":65535,"f32":1.5,"f":-2.5e-3,"Name":"n"}`, true},
		{`{"b":true,"b":false}`, true},
		{`{"s":"a","s":null}`, true},
		{`{"f":1E+2,"i":-0}`, true},
		{"{\n\t\"i\" : 1 ,\r\n\"s\":\"x\"}", true},
		{`{"s":"a\"b"}`, false},     // an escape
		{`{"S":"x"}`, false},        // folds to s: encoding/json matches it
		{`{"other":1}`, false},      // unknown: encoding/json skips it
		{`{"Skip":"x"}`, false},     // a field json ignores
		{`{"i":1.0}`, false},        // not an int: encoding/json's error
		{`{"i8":128}`, false},       // overflows
		{`{"u":-1}`, false},         // negative for a uint
		{`{"f":1e999}`, false},      // out of range
		{`{"i":01}`, false},         // not JSON
		{`{"s":1}`, false},          // another type
		{"{\"s\":\"\xff\"}", false}, // invalid UTF-8: encoding/json replaces it
		{`{"i":1}x`, false},         // trailing bytes
		{`{"i":1,}`, false},         // not JSON
		{`{"i":1`, false},           // cut off
		{`[]`, false},
	} {
		var got flatArgs
		decided := d.decode([]byte(c.in), reflect.ValueOf(&got).Elem())
		if decided != c.decided {
			t.Errorf("%s: decided %v, want %v", c.in, decided, c.decided)
			continue
		}
		if !decided {
			continue
		}
		var want flatArgs
		if err := json.Unmarshal([]byte(c.in), &want); err != nil {
			t.Errorf("%s: decided, but encoding/json says %v", c.in, err)
			continue
		}
		if got != want {
			t.Errorf("%s: got %+v, encoding/json %+v", c.in, got, want)
		}
	}
}

// FuzzFlatDecoder: whenever the flat decoder decides an input, encoding/json
// accepts it and decodes the same value.
func FuzzFlatDecoder(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"s":"x","b":true,"i":1,"i8":-8,"i64":64,"u":1,"u16":16,"f32":0.5,"f":1e10,"Name":"é"}`,
		`{"s":"a\\u00e9"}`, `{"S":1}`, `{"i":1e2}`, `{"b":null,"f":-0.0}`, `{"u16":65536}`, `{"s":"` + strings.Repeat("x", 40) + `"}`,
	} {
		f.Add([]byte(s))
	}
	d := newFlatDecoder(reflect.TypeFor[flatArgs]())
	f.Fuzz(func(t *testing.T, in []byte) {
		var got flatArgs
		if !d.decode(in, reflect.ValueOf(&got).Elem()) {
			return
		}
		var want flatArgs
		if err := json.Unmarshal(in, &want); err != nil {
			t.Fatalf("%q: decided %+v, but encoding/json says %v", in, got, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %+v, encoding/json %+v", in, got, want)
		}
	})
}
