package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/turn"
)

// newFlags returns a flag set whose --help prints usage and a description.
func newFlags(env *Env, name, usage, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: llmworker %s\n\n%s\n\nflags:\n", usage, strings.TrimSpace(about))
		fs.PrintDefaults()
	}
	return fs
}

// connFlags are the NATS flags every command has.
type connFlags struct {
	url, prefix string
	auth        natsutil.Auth
}

func (c *connFlags) register(fs *flag.FlagSet, env *Env) {
	fs.StringVar(&c.url, "nats-url", env.getenv("NATS_URL"), "NATS server URL ($NATS_URL)")
	for _, af := range c.auth.Flags() {
		fs.StringVar(af.Value, af.Name, env.getenv(af.Env), af.Usage+" ($"+af.Env+")")
	}
	prefix := env.getenv("LLMW_PREFIX")
	if prefix == "" {
		prefix = events.DefaultPrefix
	}
	fs.StringVar(&c.prefix, "prefix", prefix, "subject prefix ($LLMW_PREFIX)")
}

func (c *connFlags) subjects() events.Subjects { return events.NewSubjects(c.prefix) }

// client is a connection of a client command to a running system.
type client struct {
	nc *nats.Conn
	js jetstream.JetStream
	tc *turn.Client
}

func (c *client) close() {
	if c.nc != nil {
		_ = c.nc.Drain()
		c.nc.Close()
	}
}

// connect connects to the running system; it needs a URL, since an empty
// embedded server has nothing to list or follow.
func (c *connFlags) connect(cmd string) (*client, error) {
	if c.url == "" {
		return nil, fmt.Errorf("%w: %s needs a running llmworker: set NATS_URL or --nats-url (`llmworker up` prints it)", ErrUsage, cmd)
	}
	auth, err := c.auth.Options()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	nc, err := nats.Connect(c.url, append([]nats.Option{nats.Name("llmworker " + cmd)}, auth...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", c.url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	tc, err := turn.NewClient(nc, turn.ClientOptions{Prefix: c.prefix, Source: events.Source("llmworker", "cli")})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &client{nc: nc, js: js, tc: tc}, nil
}

// parse parses args and turns flag errors into ErrUsage (help is not an
// error: it returns flag.ErrHelp).
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return fmt.Errorf("%w: %w: %v", ErrUsage, errPrinted, err)
	}
	return nil
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

var _ flag.Value = (*stringList)(nil)

// errPrinted marks an error the flag package already printed with the usage.
var errPrinted = errors.New("printed")
