package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
)

func noop(name string) *Typed[struct{}, string] {
	return Must(name, "The "+name+" tool.", func(context.Context, struct{}) (string, error) { return name, nil })
}

func names(defs []Tool) []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.Name()
	}
	return out
}

func TestRegistryZeroValue(t *testing.T) {
	var r Registry
	if _, ok := r.Get("x"); ok {
		t.Error("empty registry found a tool")
	}
	if r.Len() != 0 || len(r.Names()) != 0 || len(r.List()) != 0 || r.Unregister("x") {
		t.Error("empty registry is not empty")
	}
	defs, err := r.Definitions("*")
	if err != nil || len(defs) != 0 {
		t.Errorf("Definitions(*) = %v, %v", defs, err)
	}
	if err := r.Register(noop("b"), noop("a")); err != nil {
		t.Fatal(err)
	}
	if got := r.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Names = %v", got)
	}
}

func TestRegistryLookup(t *testing.T) {
	ft := foreign{schema: `{"type":"object"}`}
	r, err := NewRegistry(noop("web_search"), noop("get_weather"), ft, noop("calc"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"calc", "foreign", "get_weather", "web_search"}
	if got := r.Names(); !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	if got := names(r.List()); !slices.Equal(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}
	if r.Len() != 4 {
		t.Errorf("Len = %d", r.Len())
	}
	tl, ok := r.Get("get_weather")
	if !ok {
		t.Fatal("get_weather not found")
	}
	if out, err := tl.Execute(context.Background(), nil); err != nil || out != "get_weather" {
		t.Errorf("Execute = %q, %v", out, err)
	}
	if _, ok := r.Get("GET_WEATHER"); ok {
		t.Error("names are case-sensitive")
	}
	if !r.Unregister("calc") || r.Unregister("calc") {
		t.Error("Unregister reported wrongly")
	}
	if _, ok := r.Get("calc"); ok {
		t.Error("calc still there")
	}
	// A name can be registered again once removed.
	if err := r.Register(noop("calc")); err != nil {
		t.Error(err)
	}
}

func TestRegistryRegisterErrors(t *testing.T) {
	r, err := NewRegistry(noop("a"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		tools []Tool
		want  error
		msg   string
	}{
		{"already registered", []Tool{noop("b"), noop("a")}, ErrDuplicateTool, `"a" is already registered`},
		{"twice in one call", []Tool{noop("c"), noop("c")}, ErrDuplicateTool, `"c" is given twice`},
		{"invalid name", []Tool{noop("d"), foreignNamed{"bad name"}}, ErrInvalidName, `"bad name"`},
		{"nil", []Tool{noop("e"), nil}, ErrInvalidTool, "tool 2 of 2 is nil"},
		{"schema not an object", []Tool{foreign{schema: `[]`}}, ErrInvalidSchema, `"foreign"`},
		{"schema without type object", []Tool{foreign{schema: `{"type":"string"}`}}, ErrInvalidSchema, `"foreign"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := r.Register(c.tools...)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("err = %q, want it to say %q", err, c.msg)
			}
			// All or nothing: the valid tools of the call were not added.
			if got := r.Names(); !slices.Equal(got, []string{"a"}) {
				t.Errorf("Names after failed Register = %v", got)
			}
		})
	}
	if _, err := NewRegistry(noop("x"), noop("x")); !errors.Is(err, ErrDuplicateTool) {
		t.Errorf("NewRegistry: %v", err)
	}
}

type foreignNamed struct{ name string }

func (f foreignNamed) Name() string                 { return f.name }
func (f foreignNamed) Description() string          { return "" }
func (f foreignNamed) InputSchema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (f foreignNamed) Execute(context.Context, json.RawMessage) (string, error) {
	return "", nil
}

func TestRegistryMustRegister(t *testing.T) {
	var r Registry
	r.MustRegister(noop("a"))
	defer func() {
		if err, ok := recover().(error); !ok || !errors.Is(err, ErrDuplicateTool) {
			t.Errorf("recovered %v", err)
		}
	}()
	r.MustRegister(noop("a"))
}

func defNames(defs []events.ToolDefinition) []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.Name
	}
	return out
}

func TestRegistryDefinitions(t *testing.T) {
	ft := foreign{schema: `{"type":"object","required":["q"]}`, tags: []string{"x"}} // not comparable
	r, err := NewRegistry(noop("web_search"), noop("get_weather"), ft, noop("calc"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		patterns []string
		want     []string
		unknown  []string
	}{
		{nil, []string{}, nil},
		{[]string{"*"}, []string{"calc", "foreign", "get_weather", "web_search"}, nil},
		{[]string{"web_search", "calc"}, []string{"calc", "web_search"}, nil},
		{[]string{"calc", "calc", "*", "calc", "*"}, []string{"calc", "foreign", "get_weather", "web_search"}, nil},
		{[]string{"calc", "nope", "zzz", "nope"}, []string{"calc"}, []string{"nope", "zzz"}},
		{[]string{"*", "nope"}, []string{"calc", "foreign", "get_weather", "web_search"}, []string{"nope"}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.patterns), func(t *testing.T) {
			defs, err := r.Definitions(c.patterns...)
			if got := defNames(defs); !slices.Equal(got, c.want) {
				t.Errorf("names = %v, want %v", got, c.want)
			}
			if c.unknown == nil {
				if err != nil {
					t.Errorf("err = %v", err)
				}
				return
			}
			var ue *UnknownToolError
			if !errors.Is(err, ErrUnknownTool) || !errors.As(err, &ue) || !slices.Equal(ue.Names, c.unknown) {
				t.Errorf("err = %v, want unknown %v", err, c.unknown)
			}
		})
	}
	_, err = r.Definitions("nope")
	if err == nil || err.Error() != `unknown tool "nope"` {
		t.Errorf("message = %v", err)
	}
	_, err = r.Definitions("nope", "zzz")
	if err == nil || err.Error() != `unknown tools "nope", "zzz"` {
		t.Errorf("message = %v", err)
	}

	defs, _ := r.Definitions("foreign", "calc")
	if defs[1].Description != "A tool implemented elsewhere." || string(defs[1].InputSchema) != `{"type":"object","required":["q"]}` {
		t.Errorf("foreign definition = %+v", defs[1])
	}
	if defs[0].Description != "The calc tool." {
		t.Errorf("calc definition = %+v", defs[0])
	}
	assertSchema(t, defs[0].InputSchema, `{"type":"object","properties":{},"additionalProperties":false}`)
}

// Registering, looking up, listing and executing from many goroutines at
// once; run with -race.
func TestRegistryConcurrent(t *testing.T) {
	var r Registry
	r.MustRegister(noop("shared"))
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				name := fmt.Sprintf("t%d_%d", g, i)
				if err := r.Register(noop(name)); err != nil {
					errs <- err
					return
				}
				if err := r.Register(noop("shared")); !errors.Is(err, ErrDuplicateTool) {
					errs <- fmt.Errorf("duplicate shared: %v", err)
					return
				}
				tl, ok := r.Get(name)
				if !ok {
					errs <- fmt.Errorf("%s not found", name)
					return
				}
				if out, err := tl.Execute(context.Background(), nil); err != nil || out != name {
					errs <- fmt.Errorf("%s: %q %v", name, out, err)
					return
				}
				if _, err := r.Definitions("*", name); err != nil {
					errs <- err
					return
				}
				_ = r.List()
				if i%5 == 0 && !r.Unregister(name) {
					errs <- fmt.Errorf("unregister %s", name)
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
	// 8 goroutines × 25 tools, a fifth of them removed, plus "shared".
	if n := r.Len(); n != 8*20+1 {
		t.Errorf("Len = %d, want %d", n, 8*20+1)
	}
	if !slices.IsSorted(r.Names()) {
		t.Error("Names not sorted")
	}
}
