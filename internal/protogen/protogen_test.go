package protogen

import (
	"encoding/json"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated section of docs/protocol.md")

const docPath = "../../docs/protocol.md"

func TestProtocolDocUpToDate(t *testing.T) {
	gen, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	out, ok := Splice(string(doc), gen)
	if !ok {
		t.Fatalf("%s lacks the markers %q … %q", docPath, Begin, End)
	}
	if *update {
		if err := os.WriteFile(docPath, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if out != string(doc) {
		t.Fatalf("%s is out of date with pkg/events: run go test ./internal/protogen -update", docPath)
	}
}

// Every schema is JSON whose references all point into its own $defs, so
// that each schema in the document stands alone.
func TestSchemasAreValidJSONWithLocalRefs(t *testing.T) {
	for _, e := range Entries() {
		s, err := Schema(e.Value)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Defs map[string]json.RawMessage `json:"$defs"`
		}
		if err := json.Unmarshal(s, &v); err != nil {
			t.Fatalf("%s: %v", e.Title, err)
		}
		for _, m := range regexp.MustCompile(`"\$ref": "([^"]*)"`).FindAllStringSubmatch(string(s), -1) {
			name, ok := strings.CutPrefix(m[1], "#/$defs/")
			if _, def := v.Defs[name]; !ok || !def {
				t.Errorf("%s: $ref %q is not one of its $defs", e.Title, m[1])
			}
		}
	}
}
