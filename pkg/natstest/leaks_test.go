package natstest_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// ObjectStore.Put of nats.go leaves its publisher's reconnect watcher
// waiting on a nil channel when the watcher starts only after Put
// returned (NotOurGoroutines ignores it). The test builds
// testdata/putleak against a copy of nats.go whose watcher starts late,
// as one whose thread the system runs late does, and waits for the
// watcher to leak. On a nats.go release that does not leak it, the test
// fails: NotOurGoroutines' entry for the watcher can go.
func TestObjectStorePutLeavesItsReconnectWatcher(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with the go command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(goCmd, "list", "-m", "-f", "{{.Dir}} {{.Version}}", "github.com/nats-io/nats.go").Output()
	if err != nil {
		t.Fatalf("go list -m nats.go: %v", err)
	}
	natsDir, version, _ := strings.Cut(strings.TrimSpace(string(out)), " ")

	dir := t.TempDir()
	copyTree(t, natsDir, filepath.Join(dir, "nats.go"))
	publish := filepath.Join(dir, "nats.go", "jetstream", "publish.go")
	src, err := os.ReadFile(publish)
	if err != nil {
		t.Fatal(err)
	}
	const watcher = "func (js *jetStream) resetPendingAcksOnReconnect() {\n"
	if !strings.Contains(string(src), watcher) {
		t.Fatalf("nats.go %s has no resetPendingAcksOnReconnect: see whether ObjectStore.Put still leaves a goroutine behind, and update NotOurGoroutines", version)
	}
	late := strings.Replace(string(src), watcher, watcher+"\ttime.Sleep(200 * time.Millisecond) // starts after Put returned\n", 1)
	if err := os.WriteFile(publish, []byte(late), 0o644); err != nil {
		t.Fatal(err)
	}

	// A module of its own with this one's requirements (so go.sum covers
	// them and nothing is downloaded) and the copy in nats.go's place.
	repro := filepath.Join(dir, "repro")
	if err := os.MkdirAll(repro, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod := regexp.MustCompile(`(?m)^module .*$`).ReplaceAllString(string(gomod), "module putleak") +
		"\nreplace github.com/nats-io/nats.go => ../nats.go\n"
	if err := os.WriteFile(filepath.Join(repro, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(root, "go.sum"), filepath.Join(repro, "go.sum"))
	copyFile(t, filepath.Join("testdata", "putleak", "main.go"), filepath.Join(repro, "main.go"))

	cmd := exec.Command(goCmd, "run", ".")
	cmd.Dir = repro
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("putleak: %v\n%s", err, b)
	}
	switch got := strings.TrimSpace(string(b)); got {
	case "leaked 0":
		t.Fatalf("nats.go %s: ObjectStore.Put leaves no resetPendingAcksOnReconnect waiting on a nil channel; remove its entry from NotOurGoroutines (pkg/natstest/leaks.go) and this test", version)
	case "leaked 1":
		t.Logf("nats.go %s: ObjectStore.Put leaves its reconnect watcher behind when the watcher starts late; NotOurGoroutines still needs its entry", version)
	default:
		t.Fatalf("putleak printed %q, want \"leaked 1\"", got)
	}
}

// copyTree copies the files under from to to, writable (the module cache
// holds them read-only, and the test's temporary directory is removed).
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		copyFile(t, path, dst)
		return nil
	})
	if err != nil {
		t.Fatal(err)
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
