package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/gatewaysvc"
	"github.com/llmworker/llmworker/internal/service/servicetest"
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
		{nil, map[string]string{"LLMW_CHAT_MAX_STEPS": "many"}, "LLMW_CHAT_MAX_STEPS"},
	} {
		var out bytes.Buffer
		code := run(context.Background(), tc.args, env(tc.env), &out)
		if code != 2 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v %v: code %d, output %q; want 2 and %q", tc.args, tc.env, code, out.String(), tc.want)
		}
	}
}

// A short token is refused before anything serves.
func TestShortToken(t *testing.T) {
	if _, err := gatewaysvc.ParseTokens("short"); err == nil || !strings.Contains(err.Error(), "16 characters") {
		t.Fatalf("short token: %v", err)
	}
	toks, err := gatewaysvc.ParseTokens("0123456789abcdef=alice-,fedcba9876543210")
	if err != nil || toks["0123456789abcdef"] != "alice-" || toks["fedcba9876543210"] != "" {
		t.Fatalf("%v %v", toks, err)
	}
}

// The command serves the UI and the API against a NATS server, and
// drains on cancellation with exit code 0.
func TestRunAndDrain(t *testing.T) {
	e, err := natsutil.StartEmbedded(natsutil.EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	ctx, cancel := context.WithCancel(context.Background())
	var out servicetest.SyncBuffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"--nats-url", e.URL(), "--http", "127.0.0.1:0", "--log-format", "text", "--drain-timeout", "5s"}, env(nil), &out)
	}()
	re := regexp.MustCompile(`url=(http://[0-9.:]+)`)
	defer func() {
		if t.Failed() {
			t.Logf("output:\n%s", out.String())
		}
	}()
	var url string
	natstest.EventuallyWithin(t, 20*time.Second, "the gateway serving", func() bool {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	resp, err := http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "<title>llmworker</title>") {
		t.Fatalf("UI: %d %.200s", resp.StatusCode, body)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit code %d: %s", code, out.String())
	}
	http.DefaultClient.CloseIdleConnections()
}

// run is the command's main with its environment.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	return service.Main(ctx, &gatewaysvc.Service{}, args, service.IO{Getenv: getenv, Stdout: io.Discard, Stderr: stderr})
}
