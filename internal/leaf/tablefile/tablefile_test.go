package tablefile_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmworker/llmworker/internal/leaf/tablefile"
)

type table struct {
	Models map[string]int `json:"models" yaml:"models"`
}

// A table file is read strictly: a field the table does not have is an
// error in JSON and in YAML, and so is a second JSON value; an empty YAML
// document is an empty table.
func TestDecode(t *testing.T) {
	for _, c := range []struct {
		name, data string
		yaml       bool
		want       map[string]int
		fails      bool
	}{
		{name: "json", data: `{"models":{"a:b":1}}`, want: map[string]int{"a:b": 1}},
		{name: "yaml", data: "models:\n  a:b: 2\n", yaml: true, want: map[string]int{"a:b": 2}},
		{name: "empty yaml", data: "", yaml: true},
		{name: "json unknown field", data: `{"modles":{}}`, fails: true},
		{name: "yaml unknown field", data: "modles: {}\n", yaml: true, fails: true},
		{name: "two json values", data: `{"models":{}} {}`, fails: true},
	} {
		var got table
		err := tablefile.Decode([]byte(c.data), c.yaml, &got)
		if (err != nil) != c.fails {
			t.Errorf("%s: err %v, want an error: %v", c.name, err, c.fails)
			continue
		}
		if !c.fails && len(got.Models) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got.Models, c.want)
		}
		for k, v := range c.want {
			if got.Models[k] != v {
				t.Errorf("%s: %v, want %v", c.name, got.Models, c.want)
			}
		}
	}
	if err := tablefile.Decode([]byte(`{} {}`), false, &table{}); !errors.Is(err, tablefile.ErrMoreThanOneValue) {
		t.Errorf("two JSON values: %v, want ErrMoreThanOneValue", err)
	}
}

// A File reads its table again only when the file changed, and keeps the
// last table it read when the new one does not load.
func TestFileReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.json")
	write := func(s string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	load := func(p string) (*table, error) {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var tb table
		return &tb, tablefile.Decode(b, false, &tb)
	}
	now := time.Now()
	write(`{"models":{"a":1}}`, now)
	f, err := tablefile.New(path, load)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path() != path || f.Current().Models["a"] != 1 {
		t.Fatalf("path %s, table %v", f.Path(), f.Current())
	}
	if changed, err := f.Reload(); changed || err != nil {
		t.Fatalf("reload of an unchanged file: %v %v", changed, err)
	}
	write(`{"models":{"a":2}} {}`, now.Add(time.Minute))
	if changed, err := f.Reload(); changed || err == nil || f.Current().Models["a"] != 1 {
		t.Fatalf("reload of a bad file: %v %v, table %v", changed, err, f.Current())
	}
	write(`{"models":{"a":3}}`, now.Add(2*time.Minute))
	if changed, err := f.Reload(); !changed || err != nil || f.Current().Models["a"] != 3 {
		t.Fatalf("reload: %v %v, table %v", changed, err, f.Current())
	}
	if _, err := tablefile.New(filepath.Join(t.TempDir(), "missing.json"), load); err == nil {
		t.Fatal("a missing file was read")
	}
}
