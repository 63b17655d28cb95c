package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/toolexecsvc"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	env := map[string]string{"NATS_URL": "nats://env:4222", "LLMW_PREFIX": "acme"}
	getenv := func(k string) string { return env[k] }
	svc := &toolexecsvc.Service{}
	c, err := service.Parse(svc, nil, getenv, &bytes.Buffer{})
	if err != nil || c.NATSURL != "nats://env:4222" || c.Prefix != "acme" || svc.Root != "" {
		t.Fatalf("env defaults: %+v %+v %v", c, svc.Options, err)
	}
	svc = &toolexecsvc.Service{}
	c, err = service.Parse(svc, []string{"--nats-url", "nats://flag:4222", "--prefix", "p2", "--root", "/srv"}, getenv, &bytes.Buffer{})
	if err != nil || c.NATSURL != "nats://flag:4222" || c.Prefix != "p2" || svc.Root != "/srv" {
		t.Fatalf("flags: %+v %+v %v", c, svc.Options, err)
	}
	if _, err := service.Parse(&toolexecsvc.Service{}, []string{"extra"}, getenv, &bytes.Buffer{}); err == nil {
		t.Error("positional argument accepted")
	}
	env["LLMW_ACK_WAIT"] = "soon"
	if _, err := service.Parse(&toolexecsvc.Service{}, nil, getenv, &bytes.Buffer{}); !errors.Is(err, service.ErrUsage) {
		t.Errorf("bad $LLMW_ACK_WAIT: %v", err)
	}
}

// runReady is the command's main; ready receives the NATS URL once the
// tools are served.
func runReady(ctx context.Context, args []string, stderr io.Writer, ready func(url string)) error {
	code := service.Main(ctx, readyService{&toolexecsvc.Service{}, ready}, args, service.IO{Getenv: os.Getenv, Stdout: io.Discard, Stderr: stderr})
	if code != 0 {
		return fmt.Errorf("exit %d", code)
	}
	return nil
}

type readyService struct {
	*toolexecsvc.Service
	ready func(string)
}

func (r readyService) Start(ctx context.Context, env service.Env) (service.Stopper, error) {
	st, err := r.Service.Start(ctx, env)
	if err == nil {
		r.ready(env.NC.ConnectedUrl())
	}
	return st, err
}

// The command with an embedded server serves the built-in tools until its
// context ends, then drains and exits cleanly.
func TestRunEmbedded(t *testing.T) {
	t.Setenv("NATS_URL", "")
	t.Setenv("NATS_CREDS", "")
	t.Setenv("LLMW_PREFIX", "")
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "note.txt"), []byte("remember"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	urls := make(chan string, 1)
	done := make(chan error, 1)
	var logs bytes.Buffer
	go func() {
		done <- runReady(ctx, []string{"--root", root}, &syncWriter{w: &logs}, func(u string) { urls <- u })
	}()
	var url string
	select {
	case url = <-urls:
	case err := <-done:
		t.Fatalf("run ended: %v", err)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer ccancel()
	cat, err := toolexec.OpenCatalog(cctx, js)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cat.List(cctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != "calculator,current_time,list_dir,read_file" {
		t.Fatalf("catalog %v", names)
	}
	tc := toolexec.NewClient(nc, js, toolexec.ClientOptions{})
	for _, tcase := range []struct{ tool, in, want string }{
		{"calculator", `{"expression":"6*7"}`, "42"},
		{"read_file", `{"path":"note.txt"}`, "remember"},
	} {
		entry, _ := cat.Get(cctx, tcase.tool)
		out, err := tc.Tool(entry).Execute(tool.WithCall(cctx, tool.CallInfo{TurnID: "t", CallID: tcase.tool}), json.RawMessage(tcase.in))
		if err != nil || out != tcase.want {
			t.Errorf("%s = %q, %v; want %q", tcase.tool, out, err, tcase.want)
		}
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v", err)
	}
}

var mu sync.Mutex

type syncWriter struct {
	w interface{ Write([]byte) (int, error) }
}

func (s *syncWriter) Write(p []byte) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	return s.w.Write(p)
}
