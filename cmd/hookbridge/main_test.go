package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/hookbridgesvc"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

var example = filepath.Join("..", "..", "deploy", "hooks.example.yaml")

func TestCheckListsHooks(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--config", example, "--check"}, env(nil), &out, &errb, nil)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 11 || !strings.HasPrefix(lines[0], "current-date\ton_message_send\t") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestInvalidConfigExits2WithLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte("hooks:\n  - name: a\n    builtin: {type: deny_tools, pattern: '('}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--config", p}, env(nil), &out, &errb, nil)
	if code != 2 || !strings.Contains(errb.String(), "bad.yaml:3:") || !strings.Contains(errb.String(), "hooks[0].builtin.pattern") {
		t.Errorf("exit %d stderr %q", code, errb.String())
	}
	if code := run(context.Background(), nil, env(nil), &out, &errb, nil); code != 2 {
		t.Errorf("without --config: exit %d", code)
	}
}

// The command serves its config against a NATS server and drains on
// cancel; the hooks are in LLMW_HOOKS in file order.
func TestServesAndStops(t *testing.T) {
	srv, err := natsutil.StartEmbedded(natsutil.EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	p := filepath.Join(t.TempDir(), "hooks.yaml")
	if err := os.WriteFile(p, []byte("hooks:\n  - name: b-second\n    builtin: {type: deny_tools, pattern: x}\n  - name: a-first\n    builtin: {type: deny_tools, pattern: y}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *hooknats.Server, 1)
	done := make(chan int, 1)
	var errb bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--config", p, "--log-format", "text"}, env(map[string]string{"NATS_URL": srv.URL()}), &bytes.Buffer{}, &errb,
			func(b *hooknats.Server) { ready <- b })
	}()
	select {
	case <-ready:
	case code := <-done:
		t.Fatalf("exited %d: %s", code, errb.String())
	case <-time.After(20 * time.Second):
		t.Fatal("not ready")
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := hooknats.Bucket(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	l, err := hooknats.List(context.Background(), kv)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 2 || l[0].Name != "b-second" || l[1].Name != "a-first" {
		t.Errorf("registry %+v", l)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

// run is the command's main with its environment; ready (when not nil) is
// called once the hooks are served.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, ready func(*hooknats.Server)) int {
	return service.Main(ctx, readyService{&hookbridgesvc.Service{}, ready}, args, service.IO{Getenv: getenv, Stdout: stdout, Stderr: stderr})
}

// readyService reports the started server to a test.
type readyService struct {
	*hookbridgesvc.Service
	ready func(*hooknats.Server)
}

func (r readyService) Start(ctx context.Context, env service.Env) (service.Stopper, error) {
	st, err := r.Service.Start(ctx, env)
	if err == nil && r.ready != nil {
		r.ready(r.Server)
	}
	return st, err
}
