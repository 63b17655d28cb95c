package turn_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/worker"
)

// stringConsts returns the string constants of file whose names start
// with prefix.
func stringConsts(t *testing.T, file, prefix string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, prefix) || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					out[n.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s constants in %s", prefix, file)
	}
	return out
}

// Every code a turn can end with is in the schema's enum
// (events.TurnEndCodes): the codes of the turn loop and the turn service,
// the kinds of a failed model call, the declines of a model. A code added
// to one of those lists without the enum fails here.
func TestTurnEndCodesAreTheEnum(t *testing.T) {
	sources := []struct{ file, prefix string }{
		{"../worker/result.go", "Code"},
		{"errors.go", "Code"},
		{"../llm/provider_error.go", "Kind"},
		{"../ingest/errors.go", "Kind"},
	}
	for _, src := range sources {
		for name, code := range stringConsts(t, src.file, src.prefix) {
			if name == "CodeDetached" {
				continue // never published: the turn goes on elsewhere
			}
			if !slices.Contains(events.TurnEndCodes, code) {
				t.Errorf("%s %s = %q is not in events.TurnEndCodes", src.file, name, code)
			}
		}
	}
	for _, code := range worker.StreamFailureCodes {
		if !slices.Contains(events.TurnEndCodes, code) {
			t.Errorf("worker.StreamFailureCodes %q is not in events.TurnEndCodes", code)
		}
	}
	f, _ := reflect.TypeFor[events.TurnEnded]().FieldByName("Code")
	var enum []string
	for part := range strings.SplitSeq(f.Tag.Get("jsonschema"), ",") {
		if v, ok := strings.CutPrefix(part, "enum="); ok {
			enum = append(enum, v)
		}
	}
	if !slices.Equal(enum, events.TurnEndCodes) {
		t.Errorf("the schema enum of TurnEnded.Code %v differs from events.TurnEndCodes %v", enum, events.TurnEndCodes)
	}
}
