package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec/builtin"
)

func TestEval(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want float64
	}{
		{"1+2", 3},
		{"2 + 3 * 4", 14},
		{"(2 + 3) * 4", 20},
		{"10 / 4", 2.5},
		{"10 % 4", 2},
		{"-7 % 3", -1},
		{"2 ^ 10", 1024},
		{"2 ^ 3 ^ 2", 512}, // right-associative
		{"-2 ^ 2", -4},     // ^ binds tighter than unary minus, as in mathematics
		{"--3", 3},
		{"+4", 4},
		{"1.5e3 + .5", 1500.5},
		{"((((1))))", 1},
		{" 6 /\t3 ", 2},
		{"2 * -3", -6},
		{"2^-1", 0.5},
	} {
		got, err := builtin.Eval(tc.expr)
		if err != nil {
			t.Errorf("Eval(%q): %v", tc.expr, err)
			continue
		}
		if math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Eval(%q) = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

func TestEvalRejectsJunk(t *testing.T) {
	for _, expr := range []string{
		"", "   ", "1 +", "(1", "1)", "1 / 0", "5 % 0", "2 ** 3", "abc", "os.Exit(1)",
		"1; 2", "1e", "(-1) ^ 0.5", "10 ^ 400", strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100),
		strings.Repeat("1+", 600) + "1", "1 2", "$x", "0x10",
	} {
		if v, err := builtin.Eval(expr); !errors.Is(err, builtin.ErrExpression) {
			t.Errorf("Eval(%q) = %v, %v; want ErrExpression", expr, v, err)
		}
	}
}

func FuzzEval(f *testing.F) {
	for _, s := range []string{"1+2*3", "(1", "2^3^2", "-(-1)", "1e308*10", "%%", ".", "1..2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := builtin.Eval(s)
		if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Fatalf("Eval(%q) = %v without error", s, v)
		}
		if err != nil && !errors.Is(err, builtin.ErrExpression) {
			t.Fatalf("Eval(%q): %v does not match ErrExpression", s, err)
		}
	})
}

func exec(t *testing.T, tl tool.Tool, input string) (string, error) {
	t.Helper()
	return tl.Execute(context.Background(), json.RawMessage(input))
}

func TestCalculatorTool(t *testing.T) {
	c := builtin.Calculator()
	if out, err := exec(t, c, `{"expression":"(1+2)*3"}`); err != nil || out != "9" {
		t.Errorf("calculator = %q, %v", out, err)
	}
	if _, err := exec(t, c, `{"expression":"1/0"}`); err == nil || !strings.Contains(err.Error(), "division by zero") {
		t.Errorf("1/0: %v", err)
	}
	if _, err := exec(t, c, `{}`); !errors.Is(err, tool.ErrInvalidArgument) {
		t.Errorf("missing expression: %v", err)
	}
}

func TestCurrentTime(t *testing.T) {
	fixed := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	ct := builtin.CurrentTime(func() time.Time { return fixed })
	out, err := exec(t, ct, `{"timezone":"Asia/Tokyo"}`)
	if err != nil {
		t.Fatal(err)
	}
	var r builtin.CurrentTimeResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	// 15:09 UTC is 00:09 the next day in Tokyo (UTC+9, no DST).
	if r.Time != "2025-03-15T00:09:26+09:00" || r.Weekday != "Saturday" || r.Unix != fixed.Unix() || r.Timezone != "Asia/Tokyo" {
		t.Errorf("result %+v", r)
	}
	out, err = exec(t, ct, `{}`)
	if err != nil || !strings.Contains(out, `"2025-03-14T15:09:26Z"`) {
		t.Errorf("default UTC: %s %v", out, err)
	}
	if _, err := exec(t, ct, `{"timezone":"Mars/Olympus"}`); !errors.Is(err, tool.ErrInvalidArgument) || !strings.Contains(err.Error(), "timezone") {
		t.Errorf("bad zone: %v", err)
	}
}

// tree makes root/{a.txt, sub/b.txt, big.txt, bin.dat, link-out -> outside, link-in -> a.txt}
// next to an outside/secret.txt.
func tree(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{root, filepath.Join(root, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "a.txt"), "hello\n")
	write(filepath.Join(root, "sub", "b.txt"), "bee")
	write(filepath.Join(root, "big.txt"), strings.Repeat("x", 100))
	write(filepath.Join(root, "bin.dat"), "\x00\x01\x02")
	write(filepath.Join(outside, "secret.txt"), "TOP SECRET")
	if err := os.Symlink(outside, filepath.Join(root, "link-out")); err != nil {
		t.Skip("symlinks not supported:", err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "secret-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(root, "link-in")); err != nil {
		t.Fatal(err)
	}
	return root, outside
}

func fileTools(t *testing.T, root string) (read, list tool.Tool) {
	t.Helper()
	ts, err := builtin.FileTools(builtin.Config{Root: root, MaxFileBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	return ts[0], ts[1]
}

func TestReadFileConfined(t *testing.T) {
	root, outside := tree(t)
	read, _ := fileTools(t, root)
	for _, tc := range []struct{ path, want string }{
		{"a.txt", "hello\n"},
		{"sub/b.txt", "bee"},
		{"./sub//b.txt", "bee"},
		{"link-in", "hello\n"},
		{"big.txt", "xxxxxxxxxx\n[truncated: the file has 100 bytes, shown are the first 10]"},
	} {
		out, err := exec(t, read, `{"path":"`+tc.path+`"}`)
		if err != nil || out != tc.want {
			t.Errorf("read_file(%q) = %q, %v; want %q", tc.path, out, err, tc.want)
		}
	}
	for _, p := range []string{
		"../outside/secret.txt", "sub/../../outside/secret.txt", "..", filepath.Join(outside, "secret.txt"),
		"/etc/passwd", "link-out/secret.txt", "secret-link", `..\\outside\\secret.txt`,
	} {
		in, _ := json.Marshal(map[string]string{"path": p})
		out, err := exec(t, read, string(in))
		if !errors.Is(err, builtin.ErrOutsideRoot) {
			t.Errorf("read_file(%q) = %q, %v; want ErrOutsideRoot", p, out, err)
		}
		if strings.Contains(out, "SECRET") {
			t.Errorf("read_file(%q) leaked the secret", p)
		}
	}
	for _, tc := range []struct{ path, want string }{
		{"missing.txt", "does not exist"},
		{"sub", "is a directory"},
		{"bin.dat", "binary"},
	} {
		if _, err := exec(t, read, `{"path":"`+tc.path+`"}`); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("read_file(%q): %v, want %q", tc.path, err, tc.want)
		}
	}
}

func TestListDirConfined(t *testing.T) {
	root, _ := tree(t)
	_, list := fileTools(t, root)
	out, err := exec(t, list, `{}`)
	want := "a.txt (6 bytes)\nbig.txt (100 bytes)\nbin.dat (3 bytes)\nlink-in@\nlink-out@\nsecret-link@\nsub/\n"
	if err != nil || out != want {
		t.Errorf("list_dir root = %q, %v; want %q", out, err, want)
	}
	if out, err := exec(t, list, `{"path":"sub"}`); err != nil || out != "b.txt (3 bytes)\n" {
		t.Errorf("list_dir sub = %q, %v", out, err)
	}
	for _, p := range []string{"..", "link-out", "/", "sub/../.."} {
		if _, err := exec(t, list, `{"path":"`+p+`"}`); !errors.Is(err, builtin.ErrOutsideRoot) {
			t.Errorf("list_dir(%q) = %v, want ErrOutsideRoot", p, err)
		}
	}
}

func TestToolsSafeByDefault(t *testing.T) {
	ts, err := builtin.Tools(builtin.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range ts {
		names = append(names, x.Name())
	}
	if strings.Join(names, ",") != "current_time,calculator" {
		t.Errorf("default tools %v: file tools must need a root", names)
	}
	if _, err := builtin.FileTools(builtin.Config{}); !errors.Is(err, builtin.ErrNoRoot) {
		t.Errorf("FileTools without root: %v", err)
	}
}
