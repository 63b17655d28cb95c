package protogen

import (
	"encoding/json"
	"flag"
	"os"
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

func TestSchemasAreValidJSONWithoutRefs(t *testing.T) {
	for _, e := range Entries() {
		s, err := Schema(e.Value)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(s, &v); err != nil {
			t.Fatalf("%s: %v", e.Title, err)
		}
		if strings.Contains(string(s), `"$ref"`) {
			t.Errorf("%s: schema has $ref", e.Title)
		}
	}
}
