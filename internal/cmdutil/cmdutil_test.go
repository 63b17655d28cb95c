package cmdutil_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/cmdutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestEnvHelpers(t *testing.T) {
	get := env(map[string]string{"S": "v", "N": "7", "BADN": "seven", "D": "90s", "BADD": "soon"})
	if got := cmdutil.Env(get, "S", "def"); got != "v" {
		t.Errorf("Env set = %q", got)
	}
	if got := cmdutil.Env(get, "UNSET", "def"); got != "def" {
		t.Errorf("Env unset = %q", got)
	}
	if n, err := cmdutil.EnvInt(get, "N", 1); n != 7 || err != nil {
		t.Errorf("EnvInt = %d, %v", n, err)
	}
	if n, err := cmdutil.EnvInt(get, "UNSET", 1); n != 1 || err != nil {
		t.Errorf("EnvInt unset = %d, %v", n, err)
	}
	if n, err := cmdutil.EnvInt(get, "BADN", 1); n != 1 || err == nil || !strings.HasPrefix(err.Error(), "$BADN: ") {
		t.Errorf("EnvInt bad = %d, %v", n, err)
	}
	if d, err := cmdutil.EnvDuration(get, "D", time.Second); d != 90*time.Second || err != nil {
		t.Errorf("EnvDuration = %v, %v", d, err)
	}
	if d, err := cmdutil.EnvDuration(get, "UNSET", time.Second); d != time.Second || err != nil {
		t.Errorf("EnvDuration unset = %v, %v", d, err)
	}
	if d, err := cmdutil.EnvDuration(get, "BADD", time.Second); d != time.Second || err == nil || !strings.HasPrefix(err.Error(), "$BADD: ") {
		t.Errorf("EnvDuration bad = %v, %v", d, err)
	}
}

func TestCommonFlags(t *testing.T) {
	parse := func(args []string, m map[string]string) (*cmdutil.Common, error) {
		var c cmdutil.Common
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.Register(fs, env(m), "host1")
		return &c, cmdutil.Parse(fs, args)
	}
	c, err := parse(nil, nil)
	want := cmdutil.Common{Prefix: "llmw", Instance: "host1", Log: cmdutil.LogFlags{Format: "json", Level: "info"}}
	if err != nil || *c != want {
		t.Errorf("defaults: %+v, %v; want %+v", *c, err, want)
	}
	c, err = parse([]string{"--prefix", "p2", "--log-level", "debug"}, map[string]string{
		"NATS_URL": "nats://x:4222", "NATS_CREDS": "c.creds", "LLMW_PREFIX": "p1", "LLMW_INSTANCE": "i9",
		"LLMW_STORE_DIR": "/st", "LLMW_LOG_FORMAT": "text", "LLMW_LOG_LEVEL": "warn",
	})
	want = cmdutil.Common{NATSURL: "nats://x:4222", Creds: "c.creds", Prefix: "p2", Instance: "i9", StoreDir: "/st",
		Log: cmdutil.LogFlags{Format: "text", Level: "debug"}}
	if err != nil || *c != want {
		t.Errorf("env+flags: %+v, %v; want %+v", *c, err, want)
	}
	_, err = parse([]string{"a", "b"}, nil)
	if err == nil || err.Error() != "unexpected arguments: a b" || !errors.Is(err, cmdutil.ErrUsage) {
		t.Errorf("positional: %v", err)
	}
	if _, err := parse([]string{"-h"}, nil); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

func TestNewLogger(t *testing.T) {
	var b bytes.Buffer
	log, err := cmdutil.NewLogger(&b, "json", "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	if s := b.String(); strings.Contains(s, "hidden") || !strings.Contains(s, `"msg":"shown"`) || !strings.Contains(s, `"k":1`) {
		t.Errorf("json warn: %s", s)
	}
	b.Reset()
	log, err = cmdutil.NewLogger(&b, "text", "debug")
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("dbg", "k", "v")
	if s := b.String(); !strings.Contains(s, "level=DEBUG msg=dbg k=v") {
		t.Errorf("text debug: %s", s)
	}
	for _, tc := range []struct{ format, level, want string }{
		{"xml", "info", `--log-format: want json or text, got "xml"`},
		{"json", "loud", "--log-level: "},
	} {
		_, err := cmdutil.NewLogger(io.Discard, tc.format, tc.level)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !errors.Is(err, cmdutil.ErrUsage) {
			t.Errorf("%s/%s: %v; want prefix %q", tc.format, tc.level, err, tc.want)
		}
	}
}

// Connect with no URL starts an embedded server and logs its URL; Drain
// waits for the signal, logs the shutdown and stops within the timeout.
func TestConnectAndDrain(t *testing.T) {
	t.Setenv("NATS_URL", "")
	t.Setenv("NATS_CREDS", "")
	var logs bytes.Buffer
	log, _ := cmdutil.NewLogger(&logs, "text", "info")
	c := cmdutil.Common{Instance: "i1"}
	conn, err := c.Connect("svc", log)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if conn.Embedded == nil || !strings.Contains(logs.String(), "msg=\"embedded NATS server\" url="+conn.Embedded.URL()) {
		t.Fatalf("embedded: %v, logs %s", conn.Embedded, logs.String())
	}
	if name := conn.NC.Opts.Name; name != "svc i1" {
		t.Errorf("client name %q", name)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var deadline time.Time
	err = cmdutil.Drain(ctx, log, 3*time.Second, func(ctx context.Context) error {
		if ctx.Err() != nil {
			t.Error("stop got an ended context")
		}
		deadline, _ = ctx.Deadline()
		return errors.New("partial")
	})
	if err == nil || err.Error() != "partial" {
		t.Errorf("Drain = %v", err)
	}
	if left := time.Until(deadline); left <= 0 || left > 3*time.Second {
		t.Errorf("stop deadline %v from now", left)
	}
	if !strings.Contains(logs.String(), "msg=\"shutting down\" drain_timeout=3s") {
		t.Errorf("no shutdown log: %s", logs.String())
	}
}

func TestConnectError(t *testing.T) {
	c := cmdutil.Common{NATSURL: "nats://127.0.0.1:1"}
	if _, err := c.Connect("svc", nil); err == nil {
		t.Fatal("connected to a closed port")
	}
}

type svcOptions struct {
	cmdutil.Common
}

func TestSetup(t *testing.T) {
	var errb bytes.Buffer
	if log, code := cmdutil.Setup("svc", &errb, (*svcOptions)(nil), flag.ErrHelp); log != nil || code != 0 || errb.Len() != 0 {
		t.Errorf("-h: %v %d %q", log, code, errb.String())
	}
	if _, code := cmdutil.Setup("svc", &errb, (*svcOptions)(nil), errors.New("$X: bad")); code != 2 || errb.String() != "svc: $X: bad\n" {
		t.Errorf("parse error: %d %q", code, errb.String())
	}
	errb.Reset()
	o := &svcOptions{Common: cmdutil.Common{Log: cmdutil.LogFlags{Format: "yaml", Level: "info"}}}
	if _, code := cmdutil.Setup("svc", &errb, o, nil); code != 2 || errb.String() != "svc: --log-format: want json or text, got \"yaml\"\n" {
		t.Errorf("log flags: %d %q", code, errb.String())
	}
	errb.Reset()
	o.Log.Format = "text"
	log, code := cmdutil.Setup("svc", &errb, o, nil)
	if code != -1 || log == nil {
		t.Fatalf("ok: %v %d", log, code)
	}
	log.Info("hi")
	if !strings.Contains(errb.String(), "level=INFO msg=hi") {
		t.Errorf("logger writes %q", errb.String())
	}
}
