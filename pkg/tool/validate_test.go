package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestNewValidator(t *testing.T) {
	v, err := NewValidator(json.RawMessage(` {"type":"object","properties":{"n":{"type":"integer","multipleOf":2}}} `))
	if err != nil {
		t.Fatal(err)
	}
	if string(v.Schema()) != `{"type":"object","properties":{"n":{"type":"integer","multipleOf":2}}}` {
		t.Errorf("Schema = %s", v.Schema())
	}
	if err := v.Validate(json.RawMessage(`{"n":4}`)); err != nil {
		t.Error(err)
	}
	err = v.Validate(json.RawMessage(`{"n":3}`))
	if want := `invalid arguments: field "n" must be a multiple of 2, got 3`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}

	for _, bad := range []string{``, `nope`, `[]`, `"object"`, `{"type":7}`} {
		if _, err := NewValidator(json.RawMessage(bad)); !errors.Is(err, ErrInvalidSchema) {
			t.Errorf("NewValidator(%q) = %v, want ErrInvalidSchema", bad, err)
		}
	}
	// A validator is not only for tools: any schema is fine.
	if _, err := NewValidator(json.RawMessage(`{"type":"string"}`)); err != nil {
		t.Errorf("string schema: %v", err)
	}
	// An explicit older draft is honoured.
	v7, err := NewValidator(json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"exclusiveMinimum":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := v7.Validate(json.RawMessage(`{"a":1}`)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("draft-07: %v", err)
	}
}

func TestFieldPaths(t *testing.T) {
	v, err := NewValidator(json.RawMessage(`{"type":"object","properties":{
		"m":{"type":"object","additionalProperties":{"type":"string"}},
		"a":{"type":"array","items":{"type":"array","items":{"type":"string"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.check(json.RawMessage(`{"m":{"0":1,"odd key":2,"a.b":3},"a":[["x"],["y",5]]}`))
	var ia *InvalidArgumentError
	if !errors.As(err, &ia) {
		t.Fatal(err)
	}
	want := []Problem{
		{"a[1][1]", "must be string, got number"},
		{`m["0"]`, "must be string, got number"},
		{`m["a.b"]`, "must be string, got number"},
		{`m["odd key"]`, "must be string, got number"},
	}
	if !equalProblems(ia.Problems, want) {
		t.Errorf("problems\n got: %q\nwant: %q", ia.Problems, want)
	}
}

func TestProblemsAreBounded(t *testing.T) {
	v, err := NewValidator(json.RawMessage(`{"type":"object","additionalProperties":{"type":"integer"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("{")
	for i := range 25 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%02d":"x"`, i)
	}
	b.WriteString("}")
	err = v.Validate(json.RawMessage(b.String()))
	var ia *InvalidArgumentError
	if !errors.As(err, &ia) {
		t.Fatal(err)
	}
	if len(ia.Problems) != maxProblems+1 {
		t.Fatalf("%d problems", len(ia.Problems))
	}
	if ia.Problems[0].Field != "k00" || ia.Problems[maxProblems] != (Problem{"", "has 15 more problems"}) {
		t.Errorf("problems = %q", ia.Problems)
	}
}

func TestOtherKeywordMessages(t *testing.T) {
	v, err := NewValidator(json.RawMessage(`{"type":"object","properties":{
		"c":{"const":"yes"},
		"p":{"type":"string","pattern":"^[a-z]+$"},
		"x":{"exclusiveMinimum":0,"exclusiveMaximum":10},
		"n":{"not":{"type":"string"}},
		"never":false,
		"u":{"type":"array","uniqueItems":true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]Problem{
		`{"c":"no"}`:  {"c", `must be "yes"`},
		`{"p":"ABC"}`: {"p", `must match the pattern "^[a-z]+$", got "ABC"`},
		`{"x":0}`:     {"x", "must be > 0, got 0"},
		`{"x":10.5}`:  {"x", "must be < 10, got 10.5"},
		`{"never":1}`: {"never", "is not allowed"},
		`{"n":"s"}`:   {"n", "'not' failed"},
		`{"u":[1,1]}`: {"u", "items at 0 and 1 are equal"},
		`{"x":1e400}`: {"x", "must be < 10, got 1e+400"},
	}
	for in, want := range cases {
		_, err := v.check(json.RawMessage(in))
		var ia *InvalidArgumentError
		if !errors.As(err, &ia) || !equalProblems(ia.Problems, []Problem{want}) {
			t.Errorf("%s: err = %v, want %q", in, err, want)
		}
	}
}

// foreign is a Tool from outside this package: Validate compiles its schema.
type foreign struct {
	schema string
	tags   []string // makes the type not comparable
}

func (f foreign) Name() string                 { return "foreign" }
func (f foreign) Description() string          { return "A tool implemented elsewhere." }
func (f foreign) InputSchema() json.RawMessage { return json.RawMessage(f.schema) }
func (f foreign) Execute(context.Context, json.RawMessage) (string, error) {
	return strings.Join(f.tags, ","), nil
}

func TestValidateAnyTool(t *testing.T) {
	ft := foreign{schema: `{"type":"object","required":["q"]}`}
	if err := Validate(ft, json.RawMessage(`{"q":1}`)); err != nil {
		t.Error(err)
	}
	err := Validate(ft, json.RawMessage(`{}`))
	if want := `invalid arguments for tool "foreign": field "q" is required`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	if err := Validate(foreign{schema: `{"type":`}, nil); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("bad schema: %v", err)
	}
	if e := CatalogEntry(ft); e.TimeoutMS != 0 || e.Version != "" || e.Name != "foreign" || string(e.InputSchema) != ft.schema {
		t.Errorf("catalog entry of a plain Tool = %+v", e)
	}
	typed := Must("forecast", "", echoArgs)
	err = Validate(typed, json.RawMessage(`{"score":1,"force":true}`))
	var ia *InvalidArgumentError
	if !errors.As(err, &ia) || ia.Tool != "forecast" || !equalProblems(ia.Problems, []Problem{{"location", "is required"}}) {
		t.Errorf("typed: %v", err)
	}
}

func TestValidatorConcurrent(t *testing.T) {
	tl := Must("forecast", "", func(ctx context.Context, a ForecastArgs) (int, error) { return a.Days, nil })
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				days := 1 + (g+i)%7
				out, err := tl.Execute(context.Background(), json.RawMessage(fmt.Sprintf(`{"location":{"city":"x"},"score":1,"force":true,"days":%d}`, days)))
				if err != nil || out != fmt.Sprint(days) {
					errs <- fmt.Errorf("valid call: %q, %v", out, err)
					return
				}
				_, err = tl.Execute(context.Background(), json.RawMessage(`{"location":{"city":1}}`))
				if !errors.Is(err, ErrInvalidArgument) {
					errs <- fmt.Errorf("invalid call: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
