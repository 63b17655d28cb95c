package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/llmworker/llmworker/pkg/tool"
)

// Defaults of Config.
const (
	DefaultMaxFileBytes  = 256 << 10
	DefaultMaxDirEntries = 1000
)

// ReadFileArgs is the input of read_file.
type ReadFileArgs struct {
	Path string `json:"path" description:"File path relative to the root directory, with / as separator, e.g. docs/README.md"`
}

// ListDirArgs is the input of list_dir.
type ListDirArgs struct {
	Path string `json:"path,omitempty" description:"Directory path relative to the root directory; empty or . for the root itself"`
}

// files serves read_file and list_dir inside one root.
type files struct {
	root       string
	maxBytes   int64
	maxEntries int
}

// FileTools returns read_file and list_dir confined to cfg.Root: paths are
// relative with / separators; absolute paths and ".." are rejected, and the
// files are opened through os.Root, so a symlink that points outside the
// root is rejected too (ErrOutsideRoot). ErrNoRoot when cfg.Root is empty.
func FileTools(cfg Config) ([]tool.Tool, error) {
	if cfg.Root == "" {
		return nil, ErrNoRoot
	}
	abs, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("builtin: root %q: %w", cfg.Root, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("builtin: root %q: %w", cfg.Root, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("builtin: root %q is not a directory", cfg.Root)
	}
	f := &files{root: abs, maxBytes: cfg.MaxFileBytes, maxEntries: cfg.MaxDirEntries}
	if f.maxBytes <= 0 {
		f.maxBytes = DefaultMaxFileBytes
	}
	if f.maxEntries <= 0 {
		f.maxEntries = DefaultMaxDirEntries
	}
	read := tool.Must("read_file",
		fmt.Sprintf("Reads a UTF-8 text file inside the configured directory and returns its content (at most %d bytes; longer files are cut off with a note). Paths are relative to that directory.", f.maxBytes),
		f.readFile, tool.WithVersion("1"))
	list := tool.Must("list_dir",
		"Lists a directory inside the configured directory: one entry per line, directories end with /, files show their size. Paths are relative to that directory.",
		f.listDir, tool.WithVersion("1"))
	return []tool.Tool{read, list}, nil
}

// clean checks a model-supplied path and returns it in os.Root form.
func clean(p string) (string, error) {
	if p == "" || p == "." {
		return ".", nil
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%w: the path contains a NUL byte", ErrOutsideRoot)
	}
	if path.IsAbs(p) || filepath.IsAbs(p) || filepath.VolumeName(p) != "" || strings.HasPrefix(p, `\`) {
		return "", fmt.Errorf("%w: %q is absolute; give a path relative to the root directory", ErrOutsideRoot, p)
	}
	for _, el := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if el == ".." {
			return "", fmt.Errorf("%w: %q contains \"..\"; paths must stay inside the root directory", ErrOutsideRoot, p)
		}
	}
	return filepath.FromSlash(path.Clean(p)), nil
}

func (f *files) open() (*os.Root, error) {
	r, err := os.OpenRoot(f.root)
	if err != nil {
		return nil, fmt.Errorf("builtin: open root: %w", err)
	}
	return r, nil
}

// rootError turns os.Root's escape error into ErrOutsideRoot and names the
// path the model gave.
func rootError(p string, err error) error {
	if strings.Contains(err.Error(), "escapes from parent") || strings.Contains(err.Error(), "path escapes") {
		return fmt.Errorf("%w: %q leads outside the root directory (through a symlink)", ErrOutsideRoot, p)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%q does not exist (list_dir shows what there is)", p)
	}
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%q is not readable", p)
	}
	return fmt.Errorf("%q: %w", p, err)
}

func (f *files) readFile(ctx context.Context, a ReadFileArgs) (string, error) {
	p, err := clean(a.Path)
	if err != nil {
		return "", err
	}
	r, err := f.open()
	if err != nil {
		return "", err
	}
	defer r.Close()
	fh, err := r.Open(p)
	if err != nil {
		return "", rootError(a.Path, err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return "", rootError(a.Path, err)
	}
	if st.IsDir() {
		return "", fmt.Errorf("%q is a directory; use list_dir", a.Path)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%q is not a regular file", a.Path)
	}
	buf, err := io.ReadAll(io.LimitReader(fh, f.maxBytes))
	if err != nil {
		return "", rootError(a.Path, err)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	truncated := st.Size() > int64(len(buf))
	if truncated {
		// Do not cut a UTF-8 sequence in half.
		for i := 0; i < utf8.UTFMax-1 && len(buf) > 0 && !utf8.Valid(buf); i++ {
			buf = buf[:len(buf)-1]
		}
	}
	if !utf8.Valid(buf) || slices.Contains(buf, 0) {
		return "", fmt.Errorf("%q is a binary file, not UTF-8 text", a.Path)
	}
	out := string(buf)
	if truncated {
		out += fmt.Sprintf("\n[truncated: the file has %d bytes, shown are the first %d]", st.Size(), len(buf))
	}
	return out, nil
}

func (f *files) listDir(ctx context.Context, a ListDirArgs) (string, error) {
	p, err := clean(a.Path)
	if err != nil {
		return "", err
	}
	r, err := f.open()
	if err != nil {
		return "", err
	}
	defer r.Close()
	dh, err := r.Open(p)
	if err != nil {
		return "", rootError(a.Path, err)
	}
	defer dh.Close()
	st, err := dh.Stat()
	if err != nil {
		return "", rootError(a.Path, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%q is a file, not a directory; use read_file", a.Path)
	}
	ents, err := dh.ReadDir(f.maxEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", rootError(a.Path, err)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	more := len(ents) > f.maxEntries
	if more {
		ents = ents[:f.maxEntries]
	}
	slices.SortFunc(ents, func(x, y fs.DirEntry) int { return strings.Compare(x.Name(), y.Name()) })
	var b strings.Builder
	for _, e := range ents {
		switch {
		case e.IsDir():
			fmt.Fprintf(&b, "%s/\n", e.Name())
		case e.Type()&fs.ModeSymlink != 0:
			fmt.Fprintf(&b, "%s@\n", e.Name())
		default:
			if info, err := e.Info(); err == nil {
				fmt.Fprintf(&b, "%s (%d bytes)\n", e.Name(), info.Size())
			} else {
				fmt.Fprintf(&b, "%s\n", e.Name())
			}
		}
	}
	if len(ents) == 0 {
		b.WriteString("(empty directory)\n")
	}
	if more {
		fmt.Fprintf(&b, "[only the first %d entries are shown]\n", f.maxEntries)
	}
	return b.String(), nil
}
