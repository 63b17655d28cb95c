// Command callwalk follows a package's static call graph from one
// function, as a reader following the code does: depth first, calls in
// source order, each function of the package once (calls into other
// packages are not followed; a method value or function value counts as
// a call). It prints, per file, how often the walk entered it by a call
// from another file ("entered") and how often the reader is in it again
// after being elsewhere, returns from a call included ("read"):
//
//	go run ./scripts/callwalk -dir pkg/turn -from Service.handle
//	go run ./scripts/callwalk -dir pkg/turn -from Service.handle -v   # the walk itself
//
// It type-checks the package's non-test files against the export data
// that go list -export builds.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	dir := flag.String("dir", ".", "the package's directory")
	start := flag.String("from", "Service.handle", "where the walk starts: Type.method or func")
	verbose := flag.Bool("v", false, "print the walk, a function a line")
	flag.Parse()

	// export data of the dependencies
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}} {{.Export}}", ".")
	cmd.Dir = *dir
	out, err := cmd.Output()
	if err != nil {
		panic(err)
	}
	exports := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 {
			exports[f[0]] = f[1]
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(exports[path])
	})
	matches, _ := filepath.Glob(filepath.Join(*dir, "*.go"))
	var files []*ast.File
	for _, m := range matches {
		if strings.HasSuffix(m, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, m, nil, 0)
		if err != nil {
			panic(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: imp, Error: func(error) {}}
	pkg, _ := conf.Check(files[0].Name.Name, fset, files, info)

	decls := map[*types.Func]*ast.FuncDecl{}
	var from *types.Func
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			fn, _ := info.Defs[fd.Name].(*types.Func)
			if fn == nil {
				continue
			}
			decls[fn] = fd
			if name(fn) == *start {
				from = fn
			}
		}
	}
	if from == nil {
		panic("no " + *start)
	}
	_ = pkg
	fileOf := func(fn *types.Func) string { return filepath.Base(fset.Position(decls[fn].Pos()).Filename) }

	seen := map[*types.Func]bool{}
	entries := map[string]int{} // entered from another file, by a call
	reads := map[string]int{}   // read as a stretch, returns included
	var seq []string
	cur := ""
	read := func(file string) {
		if file != cur {
			reads[file]++
			seq = append(seq, file)
			cur = file
		}
	}
	depth := 0
	var visit func(fn *types.Func, caller string)
	visit = func(fn *types.Func, caller string) {
		seen[fn] = true
		file := fileOf(fn)
		if file != caller {
			entries[file]++
		}
		read(file)
		if *verbose {
			fmt.Printf("%s%s (%s)\n", strings.Repeat("  ", depth), name(fn), file)
		}
		depth++
		ast.Inspect(decls[fn].Body, func(n ast.Node) bool {
			var id *ast.Ident
			switch x := n.(type) {
			case *ast.SelectorExpr:
				id = x.Sel
			case *ast.Ident:
				id = x
			default:
				return true
			}
			callee, ok := info.Uses[id].(*types.Func)
			if ok {
				callee = callee.Origin()
			}
			if !ok || decls[callee] == nil || seen[callee] {
				return true
			}
			visit(callee, file)
			read(file)
			return true
		})
		depth--
	}
	visit(from, "")
	type kv struct {
		f    string
		e, r int
	}
	var rows []kv
	for f := range reads {
		rows = append(rows, kv{f, entries[f], reads[f]})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].r > rows[j].r || rows[i].r == rows[j].r && rows[i].f < rows[j].f })
	fmt.Printf("%d functions reached from %s\n", len(seen), *start)
	fmt.Printf("%-22s %8s %8s\n", "file", "entered", "read")
	for _, r := range rows {
		fmt.Printf("%-22s %8d %8d\n", r.f, r.e, r.r)
	}
}

func name(fn *types.Func) string {
	sig := fn.Type().(*types.Signature)
	if r := sig.Recv(); r != nil {
		t := r.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := t.(*types.Named); ok {
			return n.Obj().Name() + "." + fn.Name()
		}
	}
	return fn.Name()
}
