package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/natsrt"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	t.Setenv("NATS_URL", "nats://env:4222")
	t.Setenv("LLMW_PREFIX", "acme")
	t.Setenv("LLMW_TOOL_ROOT", "")
	o, err := parse(nil, &bytes.Buffer{})
	if err != nil || o.natsURL != "nats://env:4222" || o.prefix != "acme" || o.root != "" {
		t.Fatalf("env defaults: %+v %v", o, err)
	}
	o, err = parse([]string{"--nats-url", "nats://flag:4222", "--prefix", "p2", "--root", "/srv"}, &bytes.Buffer{})
	if err != nil || o.natsURL != "nats://flag:4222" || o.prefix != "p2" || o.root != "/srv" {
		t.Fatalf("flags: %+v %v", o, err)
	}
	if _, err := parse([]string{"extra"}, &bytes.Buffer{}); err == nil {
		t.Error("positional argument accepted")
	}
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
	cat, err := natsrt.OpenCatalog(cctx, js)
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
	tc := natsrt.NewToolClient(nc, js, natsrt.ToolClientOptions{})
	for _, tcase := range []struct{ tool, in, want string }{
		{"calculator", `{"expression":"6*7"}`, "42"},
		{"read_file", `{"path":"note.txt"}`, "remember"},
	} {
		entry, _ := cat.Get(cctx, tcase.tool)
		out, err := tc.Tool(entry).Execute(natsrt.WithCall(cctx, natsrt.CallInfo{TurnID: "t", CallID: tcase.tool}), json.RawMessage(tcase.in))
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
