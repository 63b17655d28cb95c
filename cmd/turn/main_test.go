package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/turnsvc"
	"github.com/llmworker/llmworker/pkg/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--nope"}, nil, "flag provided but not defined"},
		{[]string{"extra"}, nil, "unexpected arguments"},
		{nil, map[string]string{"LLMW_ACK_WAIT": "soon"}, "LLMW_ACK_WAIT"},
		{nil, map[string]string{"LLMW_MAX_CONCURRENT": "many"}, "LLMW_MAX_CONCURRENT"},
		{nil, map[string]string{"LLMW_RETRY_TIMEOUT": "soon"}, "LLMW_RETRY_TIMEOUT"},
		{[]string{"--log-format", "xml"}, nil, "--log-format"},
		{[]string{"--instance", "a.b"}, nil, "instance"},
	} {
		var out bytes.Buffer
		// Bounded: a setting the command does not refuse lets it try to
		// connect and serve instead of exiting.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		code := run(ctx, tc.args, env(tc.env), &out)
		cancel()
		if code != 2 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v %v: code %d, output %q; want 2 and %q", tc.args, tc.env, code, out.String(), tc.want)
		}
	}
}

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, env(nil), &out); code != 0 {
		t.Fatalf("code %d", code)
	}
	if !strings.Contains(out.String(), "ack-wait") {
		t.Fatalf("help does not list the flags: %s", out.String())
	}
}

// The command starts against a NATS server, serves, and drains on
// cancellation with exit code 0.
func TestRunAndDrain(t *testing.T) {
	e, err := natsutil.StartEmbedded(natsutil.EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"--nats-url", e.URL(), "--log-format", "text", "--drain-timeout", "5s"}, env(nil), &out)
	}()
	defer func() {
		if t.Failed() {
			t.Logf("output:\n%s", out.String())
		}
	}()
	natstest.EventuallyWithin(t, 20*time.Second, "the turn service started", func() bool {
		return strings.Contains(out.String(), "turn service started")
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit code %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "turn service stopped") {
		t.Fatalf("no drain: %s", out.String())
	}
}

// run is the command's main with its environment.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	return service.Main(ctx, &turnsvc.Service{}, args, service.IO{Getenv: getenv, Stdout: io.Discard, Stderr: stderr})
}
