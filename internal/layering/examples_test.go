package layering

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// natsExamples are the packages whose runnable Examples run against a NATS
// server: a reader copies them into a program of their own, so they must
// build outside this module.
var natsExamples = []string{"pkg/turn", "pkg/emit", "pkg/gateway", "pkg/a2a", "pkg/toolexec", "pkg/ingest", "pkg/hook/hooknats", "pkg/hookbridge"}

// exampleFiles returns the files of dir holding runnable Examples.
func exampleFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"example_test.go", "example_*_test.go"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	return out
}

// An Example is code to copy: what it imports from internal/ cannot be
// imported from any other module.
func TestExamplesImportNothingInternal(t *testing.T) {
	root := filepath.Join("..", "..")
	n := 0
	err := filepath.WalkDir(filepath.Join(root, "pkg"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		for _, f := range exampleFiles(t, path) {
			n++
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range file.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if strings.HasPrefix(p, module+"internal/") {
					rel, _ := filepath.Rel(root, f)
					t.Errorf("%s imports %s: an Example must build in another module (use pkg/natstest.New for a server)", rel, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no example files found under pkg/")
	}
}

// The NATS-side Examples, copied as they are into a module of their own
// that uses this one (through a workspace with this checkout), and the
// README's Go client type-check with go vet: what a reader pastes into
// their program compiles there.
func TestExamplesBuildInAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, pkg := range natsExamples {
		files := exampleFiles(t, filepath.Join(root, pkg))
		if len(files) == 0 {
			t.Fatalf("%s has no example files", pkg)
		}
		dst := filepath.Join(dir, filepath.Base(pkg))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			copyFile(t, f, filepath.Join(dst, filepath.Base(f)))
		}
	}
	// The README's Go blocks, each as the body of a program.
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, blk := range []struct {
		marker, dir string
		imports     []string // "" separates groups
	}{
		{"go-client", "readmeclient", []string{"context", "fmt", "", "github.com/nats-io/nats.go", "", module + "pkg/events", module + "pkg/turn"}},
		{"go-a2a", "readmea2a", []string{"context", "fmt", "", "github.com/a2aproject/a2a-go/v2/a2a", "github.com/a2aproject/a2a-go/v2/a2aclient", "github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"}},
		{"go-media", "readmemedia", []string{"context", "encoding/json", "fmt", "os", "", "github.com/nats-io/nats.go", "", module + "pkg/events", module + "pkg/turn"}},
	} {
		_, snippet, ok := strings.Cut(string(readme), "<!-- readme-test: "+blk.marker+" -->\n```go\n")
		if snippet, _, ok = strings.Cut(snippet, "\n```"); !ok {
			t.Fatalf("README.md has no %s block", blk.marker)
		}
		if err := os.MkdirAll(filepath.Join(dir, blk.dir), 0o755); err != nil {
			t.Fatal(err)
		}
		var imports strings.Builder
		for _, imp := range blk.imports {
			if imp != "" {
				imports.WriteString("\t" + strconv.Quote(imp))
			}
			imports.WriteString("\n")
		}
		prog := "package main\n\nimport (\n" + imports.String() + ")\n\nfunc main() {\n\tctx := context.Background()\n" + snippet + "\n}\n"
		if err := os.WriteFile(filepath.Join(dir, blk.dir, "main.go"), []byte(prog), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The module and this checkout form a workspace (go.work), as a
	// require of this module replaced by the checkout would: the examples
	// import only what this module exports, its internal/ stays out of
	// reach, and its dependencies resolve to the versions of its go.mod,
	// whose go.sum covers them (the build needs the module cache only,
	// never the checksum database). In a workspace this module's packages
	// build as in this checkout, so the build reuses, from the build
	// cache, .ci/run's go vet of it: static with paths trimmed, as the
	// images build (deploy/build-images.sh), whatever the test's own build
	// is (the -race build of `go test -race ./...` needs cgo). No package
	// of this module uses cgo, so the examples type-check alike either way.
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := "go 1.26"
	for l := range strings.Lines(string(gomod)) {
		if strings.HasPrefix(l, "go ") {
			goLine = strings.TrimSpace(l) // the workspace's go is at least each module's
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/myclient\n\n"+goLine+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gowork := filepath.Join(dir, "go.work")
	if err := os.WriteFile(gowork, []byte(goLine+"\n\nuse (\n\t.\n\t"+strconv.Quote(root)+"\n)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goCmd, "vet", "./...")
	cmd.Dir = dir
	// CI's GOFLAGS say -mod=readonly, which a workspace takes as it is.
	flags := []string{"-trimpath"}
	for f := range strings.FieldsSeq(os.Getenv("GOFLAGS")) {
		if f != "-trimpath" && f != "-race" {
			flags = append(flags, f)
		}
	}
	cmd.Env = append(os.Environ(), "GOWORK="+gowork, "CGO_ENABLED=0", "GOFLAGS="+strings.Join(flags, " "))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go vet of the examples in another module: %v\n%s", err, out)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
