package tool

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func echoArgs(ctx context.Context, a ForecastArgs) (ForecastArgs, error) { return a, nil }

func TestTypedExecuteDecodesArgs(t *testing.T) {
	var got ForecastArgs
	tl := Must("forecast", "Forecast.", func(ctx context.Context, a ForecastArgs) (string, error) {
		got = a
		return "ok", nil
	})
	in := `{"location":{"city":"Tokyo","country":"JP"},"days":2,"unit":"celsius","stops":[{"city":"Osaka"}],
		"since":"2024-05-01T10:00:00Z","limit":5,"labels":{"k":"v"},"score":0.5,"force":true,"verbose":true,"note":null}`
	out, err := tl.Execute(context.Background(), json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	if out != "ok" {
		t.Errorf("out = %q", out)
	}
	if got.Location.City != "Tokyo" || got.Location.Country != "JP" || got.Days != 2 || got.Unit != "celsius" ||
		len(got.Stops) != 1 || got.Stops[0].City != "Osaka" || !got.Since.Equal(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)) ||
		got.Limit == nil || *got.Limit != 5 || got.Labels["k"] != "v" || got.Score != 0.5 || !got.Force || !got.Verbose || got.Note != nil {
		t.Errorf("decoded args = %+v", got)
	}
}

func TestTypedResultEncoding(t *testing.T) {
	ctx := context.Background()
	type point struct {
		X int `json:"x"`
		Y int `json:"y"`
	}
	cases := []struct {
		name string
		tool Tool
		want string
	}{
		{"string as is", Must("s", "", func(context.Context, struct{}) (string, error) { return `he said "hi"`, nil }), `he said "hi"`},
		{"bytes as string", Must("b", "", func(context.Context, struct{}) ([]byte, error) { return []byte("raw\ntext"), nil }), "raw\ntext"},
		{"struct as JSON", Must("p", "", func(context.Context, struct{}) (point, error) { return point{1, 2}, nil }), `{"x":1,"y":2}`},
		{"map as JSON", Must("m", "", func(context.Context, struct{}) (map[string]int, error) { return map[string]int{"b": 2, "a": 1}, nil }), `{"a":1,"b":2}`},
		{"int as JSON", Must("i", "", func(context.Context, struct{}) (int, error) { return 42, nil }), `42`},
		{"nil pointer as null", Must("n", "", func(context.Context, struct{}) (*point, error) { return nil, nil }), `null`},
		{"any holding a string", Must("a", "", func(context.Context, struct{}) (any, error) { return "plain", nil }), `plain`},
		{"raw JSON", Must("r", "", func(context.Context, struct{}) (json.RawMessage, error) { return json.RawMessage(`{"k": [1, 2]}`), nil }), `{"k":[1,2]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := c.tool.Execute(ctx, json.RawMessage(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if out != c.want {
				t.Errorf("out = %q, want %q", out, c.want)
			}
		})
	}
}

func TestTypedResultEncodingFails(t *testing.T) {
	tl := Must("ch", "", func(context.Context, struct{}) (chan int, error) { return make(chan int), nil })
	_, err := tl.Execute(context.Background(), nil)
	if !errors.Is(err, ErrExecutionFailed) || errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("err = %v, want ErrExecutionFailed only", err)
	}
	if !strings.Contains(err.Error(), "encoding the result") {
		t.Errorf("err = %q", err)
	}
}

// invalidCase is an input the model got wrong and the problems the error
// must report, as (field, message) pairs following the wording of doc.go.
type invalidCase struct {
	name  string
	input string
	want  []Problem
}

var forecastInvalid = []invalidCase{
	{"missing required", `{"score":1,"force":true}`, []Problem{{"location", "is required"}}},
	{"missing nested required", `{"location":{},"score":1,"force":true}`, []Problem{{"location.city", "is required"}}},
	{"wrong type", `{"location":{"city":"x"},"score":"high","force":true}`, []Problem{{"score", "must be number, got string"}}},
	{"wrong nested type", `{"location":{"city":7},"score":1,"force":true}`, []Problem{{"location.city", "must be string, got number"}}},
	{"array element", `{"location":{"city":"x"},"score":1,"force":true,"stops":[{"city":"a"},{"country":"JP"}]}`, []Problem{{"stops[1].city", "is required"}}},
	{"unknown property", `{"location":{"city":"x"},"score":1,"force":true,"colour":"red"}`,
		[]Problem{{"colour", "is not allowed (allowed: days, force, labels, limit, location, note, score, since, stops, tags, unit, verbose)"}}},
	{"unknown nested property", `{"location":{"city":"x","zip":"1"},"score":1,"force":true}`,
		[]Problem{{"location.zip", "is not allowed (allowed: city, country)"}}},
	{"enum", `{"location":{"city":"x"},"score":1,"force":true,"unit":"kelvin"}`, []Problem{{"unit", `must be one of "celsius", "fahrenheit"`}}},
	{"minimum", `{"location":{"city":"x"},"score":1,"force":true,"days":0}`, []Problem{{"days", "must be >= 1, got 0"}}},
	{"maximum", `{"location":{"city":"x"},"score":1,"force":true,"days":8}`, []Problem{{"days", "must be <= 7, got 8"}}},
	{"min length", `{"location":{"city":"x","country":"J"},"score":1,"force":true}`, []Problem{{"location.country", "must be at least 2 characters long, got 1"}}},
	{"max items", `{"location":{"city":"x"},"score":1,"force":true,"tags":["a","b","c","d"]}`, []Problem{{"tags", "must have at most 3 items, got 4"}}},
	{"format", `{"location":{"city":"x"},"score":1,"force":true,"since":"yesterday"}`, []Problem{{"since", `must be a valid date-time, got "yesterday"`}}},
	{"null for non-nullable", `{"location":{"city":"x"},"score":1,"force":true,"limit":null}`, []Problem{{"limit", "must be integer, got null"}}},
	{"nullable gets number", `{"location":{"city":"x"},"score":1,"force":true,"note":5}`, []Problem{{"note", "must be string or null, got number"}}},
	{"several at once", `{"location":{"city":1},"days":"3"}`, []Problem{
		{"days", "must be integer, got string"}, {"force", "is required"}, {"location.city", "must be string, got number"}, {"score", "is required"}}},
	{"malformed JSON", `{"location":`, []Problem{{"", "is not valid JSON (unexpected EOF); send a JSON object"}}},
	{"trailing garbage", `{} {}`, []Problem{{"", "is not valid JSON (invalid character after top-level value); send a JSON object"}}},
	{"not an object", `["Tokyo"]`, []Problem{{"", "must be object, got array"}}},
	{"null input", `null`, []Problem{{"", "must be object, got null"}}},
	{"fraction for int (decode)", `{"location":{"city":"x"},"score":1,"force":true,"days":2.5}`, []Problem{{"days", "must be integer, got number"}}},
	{"integral float for int (decode)", `{"location":{"city":"x"},"score":1,"force":true,"days":2.0}`, []Problem{{"days", "must be an integer, got JSON number 2.0"}}},
	{"overflow (decode)", `{"location":{"city":"x"},"score":1,"force":true,"limit":1e30}`, []Problem{{"limit", "must be an integer, got JSON number 1e30"}}},
}

func TestTypedInvalidArguments(t *testing.T) {
	var calls atomic.Int32
	tl := Must("forecast", "", func(ctx context.Context, a ForecastArgs) (string, error) {
		calls.Add(1)
		return "", nil
	})
	for _, c := range forecastInvalid {
		t.Run(c.name, func(t *testing.T) {
			_, err := tl.Execute(context.Background(), json.RawMessage(c.input))
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
			if errors.Is(err, ErrExecutionFailed) {
				t.Errorf("invalid input must not count as an execution failure")
			}
			var ia *InvalidArgumentError
			if !errors.As(err, &ia) {
				t.Fatalf("err is %T, want *InvalidArgumentError", err)
			}
			if ia.Tool != "forecast" {
				t.Errorf("Tool = %q", ia.Tool)
			}
			if !equalProblems(ia.Problems, c.want) {
				t.Errorf("problems\n got: %q\nwant: %q", ia.Problems, c.want)
			}
			for _, p := range c.want {
				if !strings.Contains(err.Error(), p.String()) {
					t.Errorf("message %q does not say %q", err, p.String())
				}
			}
		})
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("fn was called %d times with invalid input", n)
	}
}

func equalProblems(a, b []Problem) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestInvalidArgumentMessage(t *testing.T) {
	tl := Must("get_weather", "", func(ctx context.Context, a struct {
		City string `json:"city"`
		Unit string `json:"unit,omitempty" jsonschema:"enum=celsius,enum=fahrenheit"`
	}) (string, error) {
		return "", nil
	})
	_, err := tl.Execute(context.Background(), json.RawMessage(`{"unit":"kelvin"}`))
	want := `invalid arguments for tool "get_weather": field "city" is required; field "unit" must be one of "celsius", "fahrenheit"`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant  %s", err, want)
	}
}

func TestTypedEmptyInputIsEmptyObject(t *testing.T) {
	tl := Must("now", "", func(context.Context, struct{}) (string, error) { return "called", nil })
	for _, in := range []string{"", "  \n", "{}"} {
		out, err := tl.Execute(context.Background(), json.RawMessage(in))
		if err != nil || out != "called" {
			t.Errorf("Execute(%q) = %q, %v", in, out, err)
		}
	}
	// An empty input is still checked: {} lacks required fields.
	req := Must("req", "", func(context.Context, struct {
		A string `json:"a"`
	}) (string, error) {
		return "", nil
	})
	_, err := req.Execute(context.Background(), nil)
	var ia *InvalidArgumentError
	if !errors.As(err, &ia) || ia.Problems[0] != (Problem{"a", "is required"}) {
		t.Errorf("err = %v", err)
	}
}

var errBackend = errors.New("backend down")

func TestTypedFunctionError(t *testing.T) {
	tl := Must("f", "", func(context.Context, struct{}) (string, error) { return "ignored", errBackend })
	out, err := tl.Execute(context.Background(), nil)
	if out != "" {
		t.Errorf("out = %q, want nothing on error", out)
	}
	if !errors.Is(err, ErrExecutionFailed) || !errors.Is(err, errBackend) {
		t.Fatalf("err = %v, want ErrExecutionFailed wrapping errBackend", err)
	}
	if errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrPanicked) {
		t.Errorf("err = %v matches the wrong sentinels", err)
	}
	var ee *ExecutionError
	if !errors.As(err, &ee) || ee.Tool != "f" || ee.Stack != nil {
		t.Fatalf("err = %#v", err)
	}
	if err.Error() != `tool "f" failed: backend down` {
		t.Errorf("message = %q", err)
	}
}

func TestTypedFunctionInvalidArgumentPassesThrough(t *testing.T) {
	type args struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	tl := Must("range", "", func(ctx context.Context, a args) (string, error) {
		if a.From > a.To {
			return "", &InvalidArgumentError{Problems: []Problem{{"to", "must not be before from"}}}
		}
		return "ok", nil
	})
	_, err := tl.Execute(context.Background(), json.RawMessage(`{"from":"b","to":"a"}`))
	if !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrExecutionFailed) {
		t.Fatalf("err = %v", err)
	}
	if want := `invalid arguments for tool "range": field "to" must not be before from`; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
	// A plain error wrapping the sentinel passes through unchanged too.
	wrapped := Must("w", "", func(context.Context, struct{}) (string, error) {
		return "", errors.Join(errors.New("city unknown"), ErrInvalidArgument)
	})
	_, err = wrapped.Execute(context.Background(), nil)
	if !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrExecutionFailed) {
		t.Errorf("err = %v", err)
	}
}

func TestTypedPanicBecomesError(t *testing.T) {
	tl := Must("boom", "", func(context.Context, struct{}) (string, error) {
		var m map[string]int
		m["x"] = 1 // nil map write
		return "", nil
	})
	_, err := tl.Execute(context.Background(), nil)
	if !errors.Is(err, ErrPanicked) || !errors.Is(err, ErrExecutionFailed) {
		t.Fatalf("err = %v, want ErrPanicked and ErrExecutionFailed", err)
	}
	var ee *ExecutionError
	if !errors.As(err, &ee) || len(ee.Stack) == 0 {
		t.Fatalf("no stack: %#v", err)
	}
	if !strings.Contains(err.Error(), "assignment to entry in nil map") || strings.Contains(err.Error(), "goroutine") {
		t.Errorf("message = %q, want the panic value and no stack", err)
	}
	// panic(nil) is a *runtime.PanicNilError since Go 1.21: still an error.
	pn := Must("pn", "", func(context.Context, struct{}) (string, error) { panic(nil) })
	if _, err := pn.Execute(context.Background(), nil); !errors.Is(err, ErrPanicked) {
		t.Errorf("panic(nil): err = %v", err)
	}
}

func TestTypedTimeout(t *testing.T) {
	tl := Must("slow", "", func(ctx context.Context, _ struct{}) (string, error) {
		<-ctx.Done() // a well-behaved tool stops when its context ends
		return "", ctx.Err()
	}, WithTimeout(5*time.Millisecond))
	if tl.Timeout() != 5*time.Millisecond || TimeoutOf(tl) != 5*time.Millisecond {
		t.Errorf("Timeout = %v", tl.Timeout())
	}
	_, err := tl.Execute(context.Background(), nil)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrExecutionFailed) {
		t.Errorf("err = %v, want DeadlineExceeded as an execution failure", err)
	}
}

func TestTypedNoTimeoutKeepsContext(t *testing.T) {
	type key struct{}
	tl := Must("ctx", "", func(ctx context.Context, _ struct{}) (string, error) {
		if _, ok := ctx.Deadline(); ok {
			return "", errors.New("unexpected deadline")
		}
		return ctx.Value(key{}).(string), nil
	})
	out, err := tl.Execute(context.WithValue(context.Background(), key{}, "value"), nil)
	if err != nil || out != "value" {
		t.Errorf("out, err = %q, %v", out, err)
	}
}

func TestTypedCancel(t *testing.T) {
	started := make(chan struct{})
	tl := Must("wait", "", func(ctx context.Context, _ struct{}) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := tl.Execute(ctx, nil)
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestTypedMetadata(t *testing.T) {
	tl := Must("forecast", "Weather forecast.", echoArgs, WithVersion("1.2.0"), WithTimeout(1500*time.Millisecond))
	if tl.Name() != "forecast" || tl.Description() != "Weather forecast." || tl.Version() != "1.2.0" || VersionOf(tl) != "1.2.0" {
		t.Errorf("metadata = %q %q %q", tl.Name(), tl.Description(), tl.Version())
	}
	assertSchema(t, tl.InputSchema(), forecastSchema)

	d := Definition(tl)
	if d.Name != "forecast" || d.Description != "Weather forecast." {
		t.Errorf("definition = %+v", d)
	}
	assertSchema(t, d.InputSchema, forecastSchema)
	if err := d.Validate(); err != nil {
		t.Errorf("definition does not validate: %v", err)
	}
	if md := tl.Definition(); md.Name != d.Name || string(md.InputSchema) != string(d.InputSchema) {
		t.Errorf("method Definition = %+v", md)
	}

	e := CatalogEntry(tl)
	if e.Name != "forecast" || e.TimeoutMS != 1500 || e.Version != "1.2.0" || e.Description != "Weather forecast." {
		t.Errorf("catalog entry = %+v", e)
	}

	// The schema handed out is a copy.
	s := tl.InputSchema()
	s[0] = 'X'
	assertSchema(t, tl.InputSchema(), forecastSchema)

	plain := Must("plain", "", echoArgs)
	if TimeoutOf(plain) != 0 || VersionOf(plain) != "" {
		t.Errorf("defaults: %v %q", TimeoutOf(plain), VersionOf(plain))
	}
}

func TestTypedCall(t *testing.T) {
	tl := Must("forecast", "", echoArgs)
	got, err := tl.Call(context.Background(), ForecastArgs{Days: 3})
	if err != nil || got.Days != 3 {
		t.Errorf("Call = %+v, %v", got, err)
	}
}

func TestTypedWithSchema(t *testing.T) {
	// A recursive type cannot be inlined, but works with a schema by hand.
	schema := json.RawMessage(`{"type":"object","required":["name"],"properties":{
		"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}}}`)
	tl, err := New("tree", "", func(ctx context.Context, n recursiveNode) (int, error) {
		var count func(recursiveNode) int
		count = func(n recursiveNode) int {
			c := 1
			for _, ch := range n.Children {
				c += count(*ch)
			}
			return c
		}
		return count(n), nil
	}, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	if string(tl.InputSchema()) != string(schema) {
		t.Errorf("schema = %s", tl.InputSchema())
	}
	out, err := tl.Execute(context.Background(), json.RawMessage(`{"name":"a","children":[{"name":"b","children":[{"name":"c"}]}]}`))
	if err != nil || out != "3" {
		t.Errorf("out, err = %q, %v", out, err)
	}
	_, err = tl.Execute(context.Background(), json.RawMessage(`{"name":"a","children":[{"name":"b","children":[{}]}]}`))
	var ia *InvalidArgumentError
	if !errors.As(err, &ia) || !equalProblems(ia.Problems, []Problem{{"children[0].children[0].name", "is required"}}) {
		t.Errorf("err = %v", err)
	}
	// Without WithSchema the recursive type is refused.
	if _, err := New("tree", "", func(context.Context, recursiveNode) (int, error) { return 0, nil }); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("err = %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	fn := func(context.Context, struct{}) (string, error) { return "", nil }
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"empty name", second(New("", "", fn)), ErrInvalidName},
		{"name with space", second(New("get weather", "", fn)), ErrInvalidName},
		{"name too long", second(New(strings.Repeat("a", 65), "", fn)), ErrInvalidName},
		{"nil fn", second(New[struct{}, string]("x", "", nil)), ErrInvalidTool},
		{"non-object args", second(New("x", "", func(context.Context, string) (string, error) { return "", nil })), ErrInvalidSchema},
		{"schema not JSON", second(New("x", "", fn, WithSchema(json.RawMessage(`{`)))), ErrInvalidSchema},
		{"schema not object", second(New("x", "", fn, WithSchema(json.RawMessage(`true`)))), ErrInvalidSchema},
		{"schema of strings", second(New("x", "", fn, WithSchema(json.RawMessage(`{"type":"string"}`)))), ErrInvalidSchema},
		{"schema does not compile", second(New("x", "", fn, WithSchema(json.RawMessage(`{"type":"object","minimum":"one"}`)))), ErrInvalidSchema},
		{"schema refers to a file", second(New("x", "", fn, WithSchema(json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`)))), ErrInvalidSchema},
		{"schema refers to the network", second(New("x", "", fn, WithSchema(json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`)))), ErrInvalidSchema},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !errors.Is(c.err, c.want) {
				t.Errorf("err = %v, want %v", c.err, c.want)
			}
		})
	}
	if _, err := New(strings.Repeat("a", 64), "", fn); err != nil {
		t.Errorf("64-character name refused: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestMustPanics(t *testing.T) {
	defer func() {
		r := recover()
		err, ok := r.(error)
		if !ok || !errors.Is(err, ErrInvalidName) {
			t.Errorf("recovered %v, want ErrInvalidName", r)
		}
	}()
	Must("bad name", "", func(context.Context, struct{}) (string, error) { return "", nil })
}

// strictDate only accepts YYYY-MM-DD; its schema is a plain string, so the
// decoder is what refuses other strings.
type strictDate string

func (d *strictDate) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if _, err := time.Parse(time.DateOnly, s); err != nil {
		return errors.New("date must look like 2006-01-02")
	}
	*d = strictDate(s)
	return nil
}

func TestTypedDecodeErrors(t *testing.T) {
	type args struct {
		On strictDate `json:"on"`
	}
	tl := Must("day", "", func(context.Context, args) (string, error) { return "", nil })
	_, err := tl.Execute(context.Background(), json.RawMessage(`{"on":"tomorrow"}`))
	var ia *InvalidArgumentError
	if !errors.As(err, &ia) || !equalProblems(ia.Problems, []Problem{{"", "could not be decoded: date must look like 2006-01-02"}}) {
		t.Errorf("custom decoder: %v", err)
	}

	// A hand-written schema looser than the Go type: the decoder names the
	// field and the Go type it needed.
	type typedArgs struct {
		N     int             `json:"n"`
		U     uint            `json:"u"`
		F     float64         `json:"f"`
		B     bool            `json:"b"`
		S     string          `json:"s"`
		L     []int           `json:"l"`
		Inner struct{ X int } `json:"inner"`
	}
	loose := Must("loose", "", func(context.Context, typedArgs) (string, error) { return "", nil },
		WithSchema(json.RawMessage(`{"type":"object"}`)))
	cases := map[string]Problem{
		`{"n":"1"}`:            {"n", `must be an integer, got JSON string`},
		`{"u":-1}`:             {"u", `must be a non-negative integer, got JSON number -1`},
		`{"f":"x"}`:            {"f", `must be a number, got JSON string`},
		`{"b":1}`:              {"b", `must be a boolean, got JSON number`},
		`{"s":[]}`:             {"s", `must be a string, got JSON array`},
		`{"l":{}}`:             {"l", `must be an array, got JSON object`},
		`{"inner":"x"}`:        {"inner", `must be an object, got JSON string`},
		`{"inner":{"X":true}}`: {"inner.X", `must be an integer, got JSON bool`},
	}
	for in, want := range cases {
		_, err := loose.Execute(context.Background(), json.RawMessage(in))
		var ia *InvalidArgumentError
		if !errors.As(err, &ia) || !equalProblems(ia.Problems, []Problem{want}) {
			t.Errorf("%s: err = %v, want %q", in, err, want)
		}
	}
}
