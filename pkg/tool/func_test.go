package tool

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestFuncValidatesBeforeRunning(t *testing.T) {
	var got json.RawMessage
	f, err := NewFunc("lookup", "Look a key up.", json.RawMessage(`{"type":"object","required":["key"],"properties":{"key":{"type":"string"}}}`),
		func(ctx context.Context, input json.RawMessage) (string, error) {
			got = input
			return "found", nil
		}, WithVersion("2"), WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.Execute(context.Background(), json.RawMessage(`{"key":"a","extra":1}`))
	if err != nil || out != "found" {
		t.Fatalf("out, err = %q, %v", out, err)
	}
	if string(got) != `{"key":"a","extra":1}` {
		t.Errorf("fn got %s, want the input unchanged", got)
	}
	got = nil
	_, err = f.Execute(context.Background(), json.RawMessage(`{"key":1}`))
	if want := `invalid arguments for tool "lookup": field "key" must be string, got number`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	if got != nil {
		t.Errorf("fn ran with invalid input")
	}
	if e := CatalogEntry(f); e.Version != "2" || e.TimeoutMS != 1000 {
		t.Errorf("entry = %+v", e)
	}
	if err := f.ValidateInput(json.RawMessage(`{}`)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("ValidateInput = %v", err)
	}
}

func TestFuncDefaultSchemaTakesAnyObject(t *testing.T) {
	f := MustFunc("any", "", nil, func(ctx context.Context, input json.RawMessage) (string, error) { return string(input), nil })
	if string(f.InputSchema()) != `{"type":"object"}` {
		t.Errorf("schema = %s", f.InputSchema())
	}
	out, err := f.Execute(context.Background(), nil)
	if err != nil || out != "{}" {
		t.Errorf("empty input: %q, %v; want {} passed on", out, err)
	}
	if _, err := f.Execute(context.Background(), json.RawMessage(`[1]`)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("array input: err = %v", err)
	}
}

func TestFuncWithSchemaOverrides(t *testing.T) {
	f := MustFunc("o", "", json.RawMessage(`{"type":"object"}`), func(context.Context, json.RawMessage) (string, error) { return "", nil },
		WithSchema(json.RawMessage(`{"type":"object","required":["x"]}`)))
	if _, err := f.Execute(context.Background(), json.RawMessage(`{}`)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("err = %v, want the WithSchema schema applied", err)
	}
}

func TestFuncInternalRefs(t *testing.T) {
	// User schemas may use $defs and $ref inside themselves.
	schema := json.RawMessage(`{"type":"object","$defs":{"pos":{"type":"integer","minimum":1}},
		"properties":{"page":{"$ref":"#/$defs/pos"}}}`)
	f := MustFunc("page", "", schema, func(context.Context, json.RawMessage) (string, error) { return "ok", nil })
	if _, err := f.Execute(context.Background(), json.RawMessage(`{"page":2}`)); err != nil {
		t.Error(err)
	}
	_, err := f.Execute(context.Background(), json.RawMessage(`{"page":0}`))
	var ia *InvalidArgumentError
	if !errors.As(err, &ia) || !equalProblems(ia.Problems, []Problem{{"page", "must be >= 1, got 0"}}) {
		t.Errorf("err = %v", err)
	}
}

func TestFuncErrorsAndPanics(t *testing.T) {
	fail := MustFunc("fail", "", nil, func(context.Context, json.RawMessage) (string, error) { return "", errBackend })
	if _, err := fail.Execute(context.Background(), nil); !errors.Is(err, errBackend) || !errors.Is(err, ErrExecutionFailed) {
		t.Errorf("err = %v", err)
	}
	boom := MustFunc("boom", "", nil, func(context.Context, json.RawMessage) (string, error) { panic("kaput") })
	_, err := boom.Execute(context.Background(), nil)
	if !errors.Is(err, ErrPanicked) || !strings.Contains(err.Error(), "kaput") {
		t.Errorf("err = %v", err)
	}
	bad := MustFunc("bad", "", nil, func(context.Context, json.RawMessage) (string, error) {
		return "", &InvalidArgumentError{Tool: "other", Problems: []Problem{{"q", "is too vague"}}}
	})
	_, err = bad.Execute(context.Background(), nil)
	var ia *InvalidArgumentError
	if !errors.As(err, &ia) || ia.Tool != "other" {
		t.Errorf("err = %v, want the function's own InvalidArgumentError unchanged", err)
	}
}

func TestNewFuncErrors(t *testing.T) {
	fn := func(context.Context, json.RawMessage) (string, error) { return "", nil }
	if _, err := NewFunc("x", "", nil, nil); !errors.Is(err, ErrInvalidTool) {
		t.Errorf("nil fn: %v", err)
	}
	if _, err := NewFunc("x.y", "", nil, fn); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad name: %v", err)
	}
	if _, err := NewFunc("x", "", json.RawMessage(`{"type":"array"}`), fn); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("array schema: %v", err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("MustFunc did not panic")
			}
		}()
		MustFunc("", "", nil, fn)
	}()
}
