package service_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/pkg/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// fake is a service with one flag of each kind.
type fake struct {
	s       string
	n       int
	d       time.Duration
	b       bool
	started chan service.Env
	stopped chan struct{}
}

func (*fake) Name() string  { return "fake" }
func (*fake) About() string { return "A fake service." }
func (f *fake) Flags(fl *service.Flags) {
	fl.String(&f.s, "str", "FAKE_STR", "def", "a string")
	fl.Int(&f.n, "num", "FAKE_NUM", 7, "a number")
	fl.Duration(&f.d, "dur", "FAKE_DUR", time.Second, "a duration")
	fl.Bool(&f.b, "on", "FAKE_ON", false, "a switch")
}
func (f *fake) Start(_ context.Context, e service.Env) (service.Stopper, error) {
	f.started <- e
	return service.StopFunc(func(context.Context) error { close(f.stopped); return nil }), nil
}

// Defaults come from the environment, flags override it, and an
// environment value of the wrong type is refused, naming the variable.
func TestFlagsEnvironmentThenFlags(t *testing.T) {
	f := &fake{}
	c, err := service.Parse(f, []string{"--num", "9"}, env(map[string]string{"FAKE_STR": "env", "FAKE_NUM": "3", "FAKE_DUR": "2m", "FAKE_ON": "true", "LLMW_PREFIX": "acme"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.s != "env" || f.n != 9 || f.d != 2*time.Minute || !f.b || c.Prefix != "acme" || c.Drain != service.DefaultDrainTimeout || c.Replicas != 1 {
		t.Errorf("parsed %+v %+v", f, c)
	}
	for k, v := range map[string]string{"FAKE_NUM": "many", "FAKE_DUR": "soon", "FAKE_ON": "perhaps", "LLMW_DRAIN_TIMEOUT": "later"} {
		_, err := service.Parse(&fake{}, nil, env(map[string]string{k: v}), io.Discard)
		if !errors.Is(err, service.ErrUsage) || !strings.Contains(err.Error(), "$"+k) {
			t.Errorf("$%s=%s: %v", k, v, err)
		}
	}
	// The NATS authentication and TLS settings: the nats CLI's variables,
	// overridden by flags.
	c, err = service.Parse(&fake{}, []string{"--nats-ca", "ca.pem", "--nats-user", "turn"},
		env(map[string]string{"NATS_USER": "other", "NATS_PASSWORD": "pw", "NATS_CERT": "c.pem", "NATS_KEY": "k.pem"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := (natsutil.Auth{CA: "ca.pem", User: "turn", Password: "pw", Cert: "c.pem", Key: "k.pem"}); c.Auth != want {
		t.Errorf("auth %+v, want %+v", c.Auth, want)
	}
	if _, err := service.Parse(&fake{}, []string{"stray"}, env(nil), io.Discard); !errors.Is(err, service.ErrUsage) {
		t.Errorf("positional argument: %v", err)
	}
}

// --help says what the command does and names each flag's variable.
func TestHelp(t *testing.T) {
	var out bytes.Buffer
	if _, err := service.Parse(&fake{}, []string{"-h"}, env(nil), &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	for _, want := range []string{"A fake service.", "-num", "$FAKE_NUM", "-nats-url", "$NATS_URL", "$LLMW_DRAIN_TIMEOUT",
		"-nats-creds", "$NATS_CREDS", "-nats-user", "-nats-password", "$NATS_PASSWORD", "-nats-nkey", "-nats-ca", "$NATS_CA", "-nats-cert", "-nats-key", "$NATS_KEY"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

// In one process with several services, --<flag> sets every service's flag
// of that name and --<service>-<flag> only that service's.
func TestMultiFlags(t *testing.T) {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := service.NewMultiFlags(fs, env(map[string]string{"FAKE_NUM": "4"}))
	var a, b fake
	a.Flags(f.For("a"))
	b.Flags(f.For("b"))
	if err := fs.Parse([]string{"--str", "both", "--b-num", "5", "--on"}); err != nil {
		t.Fatal(err)
	}
	if a.s != "both" || b.s != "both" || a.n != 4 || b.n != 5 || !a.b || !b.b {
		t.Errorf("a %+v b %+v", a, b)
	}
}

// Main connects (an embedded server without a URL), starts the service
// with the shared settings, and drains it when its context ends.
func TestMainRunsAndDrains(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	f := &fake{started: make(chan service.Env, 1), stopped: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var logs bytes.Buffer
	go func() {
		done <- service.Main(ctx, f, []string{"--instance", "r1", "--replicas", "3"},
			service.IO{Getenv: env(map[string]string{"NATS_URL": srv.URL()}), Stdout: io.Discard, Stderr: io.Discard})
	}()
	e := <-f.started
	if e.Instance != "r1" || e.Replicas != 3 || e.Prefix != "llmw" || e.NC == nil || !e.NC.IsConnected() {
		t.Errorf("env %+v", e)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, logs.String())
	}
	select {
	case <-f.stopped:
	default:
		t.Error("not drained")
	}
	if code := service.Main(context.Background(), &fake{}, []string{"--log-format", "xml"}, service.IO{Getenv: env(nil), Stdout: io.Discard, Stderr: io.Discard}); code != 2 {
		t.Errorf("bad log format: exit %d", code)
	}
}

// JSON logs write durations as the flags take them ("1.5s"), not as
// nanosecond integers.
func TestLoggerDurations(t *testing.T) {
	var b strings.Builder
	log, err := service.NewLogger(&b, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("x", "wait", 1500*time.Millisecond)
	if !strings.Contains(b.String(), `"wait":"1.5s"`) {
		t.Errorf("log line %s: want \"wait\":\"1.5s\"", b.String())
	}
}

// flaky fails its first starts with the given errors.
type flaky struct {
	fake
	errs  []error
	calls int
}

func (f *flaky) Start(ctx context.Context, e service.Env) (service.Stopper, error) {
	f.calls++
	if f.calls <= len(f.errs) {
		return nil, f.errs[f.calls-1]
	}
	return service.StopFunc(func(context.Context) error { return nil }), nil
}

// A replica started while its JetStream cluster has no leader waits for
// the cluster instead of exiting; a usage error or a refusal is not
// retried.
func TestStartRetriesTransientErrors(t *testing.T) {
	var logs bytes.Buffer
	e := service.Env{Log: slog.New(slog.NewTextHandler(&logs, nil))}
	unavailable := fmt.Errorf("toolexec: provision: stream LLMW_TOOL_CALLS: %w",
		&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"})
	f := &flaky{errs: []error{unavailable, fmt.Errorf("catalog: %w", context.DeadlineExceeded)}}
	st, err := service.Start(context.Background(), context.Background(), f, e, time.Minute)
	if err != nil || st == nil {
		t.Fatalf("Start = %v, %v; want it started on the third attempt", st, err)
	}
	if f.calls != 3 {
		t.Errorf("Start called %d times, want 3", f.calls)
	}
	if got := strings.Count(logs.String(), "cannot start yet"); got != 2 {
		t.Errorf("logged %d retries, want 2:\n%s", got, logs.String())
	}

	for _, permanent := range []error{
		fmt.Errorf("%w: --concurrency 0", service.ErrUsage),
		&jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use with a different configuration"},
	} {
		f := &flaky{errs: []error{permanent}}
		if _, err := service.Start(context.Background(), context.Background(), f, e, time.Minute); !errors.Is(err, permanent) || f.calls != 1 {
			t.Errorf("Start = %v after %d calls, want %v at once", err, f.calls, permanent)
		}
	}

	// A signal during the retries ends them.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f = &flaky{errs: []error{unavailable, unavailable, unavailable}}
	if _, err := service.Start(ctx, context.Background(), f, e, time.Minute); !errors.Is(err, context.Canceled) || f.calls != 1 {
		t.Errorf("Start = %v after %d calls, want cancelled after the first", err, f.calls)
	}
}
