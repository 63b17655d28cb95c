package hookbridge_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/hookbridge"
	"github.com/llmworker/llmworker/pkg/natstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The HTTP hooks' client keeps idle keep-alive connections to the
		// test servers; nothing else may be left blocked in a read.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}

type env struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// start runs an embedded server; nothing is provisioned, so the bridge
// creates LLMW_HOOKS itself.
func start(t testing.TB) env {
	t.Helper()
	s := natstest.Start(t, natstest.Options{})
	return env{nc: s.NC, js: s.JS}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// bridge starts a hooknats server for hooks and stops it at cleanup.
func (e env) bridge(t testing.TB, hooks ...hooknats.Hook) *hooknats.Server {
	t.Helper()
	b, err := hooknats.NewServer(e.nc, hooknats.ServerConfig{Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(ctx(t)); err != nil {
			t.Error(err)
		}
	})
	return b
}

// chain watches the registry into a fresh chain, in sync at return.
func (e env) chain(t testing.TB) (*hook.Chain, *hooknats.Watcher) {
	t.Helper()
	c := &hook.Chain{}
	w, err := hooknats.Watch(ctx(t), e.js, c, hooknats.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	if err := w.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	return c, w
}

// config parses a YAML config with a fixed clock.
func config(t testing.TB, yml string) *hookbridge.File {
	t.Helper()
	f, err := hookbridge.ParseConfig("test.yaml", []byte(yml), hookbridge.ParseOptions{Now: fixedNow, BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func fixedNow() time.Time { return time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC) }

// script writes an executable shell script into a temp dir.
func script(t testing.TB, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func call(id, name, input string) events.ToolCall {
	return events.ToolCall{ID: id, Name: name, Input: json.RawMessage(input)}
}
