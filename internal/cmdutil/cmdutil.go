package cmdutil

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/llmworker/llmworker/internal/natsutil"
	"github.com/llmworker/llmworker/pkg/events"
)

// Env returns getenv(k), or def when it is empty.
func Env(getenv func(string) string, k, def string) string {
	if v := getenv(k); v != "" {
		return v
	}
	return def
}

// EnvInt returns $k as an int, def when it is empty. A value that is no
// int returns def and an error "$k: ...".
func EnvInt(getenv func(string) string, k string, def int) (int, error) {
	v := getenv(k)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return def, fmt.Errorf("$%s: %w", k, err)
	}
	return n, nil
}

// EnvDuration returns $k as a time.Duration, def when it is empty. A value
// that is no duration returns def and an error "$k: ...".
func EnvDuration(getenv func(string) string, k string, def time.Duration) (time.Duration, error) {
	v := getenv(k)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return def, fmt.Errorf("$%s: %w", k, err)
	}
	return d, nil
}

// Hostname is the host name, or fallback when it is unknown: the default
// replica name of a service.
func Hostname(fallback string) string {
	if h, _ := os.Hostname(); h != "" {
		return h
	}
	return fallback
}

// Parse parses args into fs and refuses positional arguments, which no
// service takes (a stray word is more likely a typo than intent).
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{msg: "unexpected arguments: " + strings.Join(fs.Args(), " ")}
	}
	return nil
}

// LogFlags are --log-format and --log-level.
type LogFlags struct {
	Format, Level string
}

// Register adds --log-format ($LLMW_LOG_FORMAT, default defFormat) and
// --log-level ($LLMW_LOG_LEVEL, default info) to fs.
func (l *LogFlags) Register(fs *flag.FlagSet, getenv func(string) string, defFormat string) {
	fs.StringVar(&l.Format, "log-format", Env(getenv, "LLMW_LOG_FORMAT", defFormat), "json or text")
	fs.StringVar(&l.Level, "log-level", Env(getenv, "LLMW_LOG_LEVEL", "info"), "debug, info, warn or error")
}

// Logger is NewLogger(w, l.Format, l.Level).
func (l LogFlags) Logger(w io.Writer) (*slog.Logger, error) { return NewLogger(w, l.Format, l.Level) }

// NewLogger builds a logger writing to w in format "json" or "text" at
// level (debug, info, warn, error, as slog.Level parses it). The errors
// name the flag that is wrong and match ErrUsage.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, &usageError{msg: "--log-level: " + err.Error(), err: err}
	}
	ho := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	}
	return nil, &usageError{msg: fmt.Sprintf("--log-format: want json or text, got %q", format)}
}

// Common are the flags every NATS service shares.
type Common struct {
	NATSURL, Creds, Prefix, Instance, StoreDir string
	Log                                        LogFlags
}

// Register adds --nats-url ($NATS_URL), --nats-creds ($NATS_CREDS),
// --prefix ($LLMW_PREFIX, default llmw), --instance ($LLMW_INSTANCE,
// default instance), --store-dir ($LLMW_STORE_DIR) and the LogFlags
// (default json) to fs.
func (c *Common) Register(fs *flag.FlagSet, getenv func(string) string, instance string) {
	fs.StringVar(&c.NATSURL, "nats-url", getenv("NATS_URL"), "NATS server URL (empty: embedded server)")
	fs.StringVar(&c.Creds, "nats-creds", getenv("NATS_CREDS"), "NATS credentials file")
	fs.StringVar(&c.Prefix, "prefix", Env(getenv, "LLMW_PREFIX", events.DefaultPrefix), "subject prefix")
	fs.StringVar(&c.Instance, "instance", Env(getenv, "LLMW_INSTANCE", instance), "replica name in the CloudEvents source")
	fs.StringVar(&c.StoreDir, "store-dir", getenv("LLMW_STORE_DIR"), "JetStream store dir of the embedded server")
	c.Log.Register(fs, getenv, "json")
}

// Connect connects to NATS as the flags say, with the client name
// "<service> <instance>", starting an embedded server when no URL is set;
// the embedded server's URL is logged because other processes need it.
func (c *Common) Connect(service string, log *slog.Logger) (*natsutil.Conn, error) {
	conn, err := natsutil.Connect(natsutil.Config{URL: c.NATSURL, Creds: c.Creds, Name: service + " " + c.Instance, StoreDir: c.StoreDir})
	if err != nil {
		return nil, err
	}
	if conn.Embedded != nil {
		log.Info("embedded NATS server", "url", conn.Embedded.URL())
	}
	return conn, nil
}

// Main runs run with a context that SIGINT and SIGTERM cancel, then exits
// the process with run's code.
func Main(run func(ctx context.Context) int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx)
	stop()
	os.Exit(code)
}

// StopWithin calls stop with a context that ends after timeout. The
// context is fresh, not derived from the signalled one, so a drain gets its
// full time after the signal.
func StopWithin(timeout time.Duration, stop func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return stop(ctx)
}

// Drain waits until ctx ends, logs "shutting down" with the drain timeout
// and returns StopWithin(timeout, stop).
func Drain(ctx context.Context, log *slog.Logger, timeout time.Duration, stop func(context.Context) error) error {
	<-ctx.Done()
	log.Info("shutting down", "drain_timeout", timeout)
	return StopWithin(timeout, stop)
}

// Options is a service's parsed command line; it embeds Common, which
// implements it.
type Options interface{ CommonFlags() *Common }

// CommonFlags returns c: it makes every options struct that embeds Common
// an Options.
func (c *Common) CommonFlags() *Common { return c }

// Setup finishes a service's start-up from what its flag parsing returned
// (o is not used when err is set). It returns the logger the log flags ask
// for and code -1, or the exit code to return instead: 0 for -h (the flag
// package has printed the usage), 2 for any other error of the command
// line, environment or log flags, printed to stderr as "<name>: <err>".
func Setup(name string, stderr io.Writer, o Options, err error) (*slog.Logger, int) {
	if errors.Is(err, flag.ErrHelp) {
		return nil, 0
	}
	var log *slog.Logger
	if err == nil {
		log, err = o.CommonFlags().Log.Logger(stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return nil, 2
	}
	return log, -1
}
