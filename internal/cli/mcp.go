package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/mcp"
	"github.com/llmworker/llmworker/pkg/permissions"
)

const mcpAbout = `Serves the tool catalog (KV LLMW_TOOLS) as an MCP server: an MCP client
lists the tools and calls them; each call runs on a toolexec replica behind
the installation's before_tool_call and after_tool_call hooks. A denied call
is an MCP error result naming the hook; a call a hook pauses waits for
'llmworker turn resume <turn>' (its turn id is in the log and in
llmw.turn.paused) up to --pause-timeout.

Without --http it speaks MCP on stdin/stdout (an MCP client starts it as a
command) and logs to stderr; with --http ADDR it serves the streamable HTTP
transport on ADDR (path /), until Ctrl-C or SIGTERM. Bind it to 127.0.0.1,
or set --http-token: anyone who reaches it can call the catalog's tools.`

func runMCP(ctx context.Context, env *Env, args []string) error {
	var (
		conn         connFlags
		addr         string
		session      string
		instance     string
		pauseTimeout time.Duration
		logLevel     string
		token        string
	)
	fs := newFlags(env, "mcp", "mcp [flags]", mcpAbout)
	conn.register(fs, env)
	fs.StringVar(&addr, "http", "", "serve the streamable HTTP transport on this address (e.g. 127.0.0.1:8091) instead of stdio")
	fs.StringVar(&session, "session", events.NoSession, "session id of the calls' events (llmworker tail --session)")
	fs.StringVar(&instance, "instance", "", "name of this gateway in its events' source (default: random)")
	fs.DurationVar(&pauseTimeout, "pause-timeout", mcp.DefaultPauseTimeout, "how long a call paused by a hook waits for its resume")
	fs.StringVar(&token, "http-token", env.getenv("LLMW_MCP_TOKEN"), "with --http: require 'Authorization: Bearer TOKEN' ($LLMW_MCP_TOKEN)")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error (logs go to stderr)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: mcp takes no arguments, got %q", ErrUsage, fs.Args())
	}
	if conn.url == "" {
		return fmt.Errorf("%w: mcp needs a running llmworker: set NATS_URL or --nats-url (`llmworker up` prints it)", ErrUsage)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("%w: --log-level %q: %v", ErrUsage, logLevel, err)
	}
	// Never stdout: on stdio it carries the protocol.
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
	auth, err := conn.auth.Options()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	opts := append([]nats.Option{nats.Name("llmworker mcp"), nats.MaxReconnects(-1),
		nats.CustomInboxPrefix(permissions.InboxPrefix(permissions.MCP, conn.prefix))}, natsutil.Liveness()...)
	nc, err := nats.Connect(conn.url, append(opts, auth...)...)
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w", conn.url, err)
	}
	defer func() { _ = nc.Drain() }()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	g, err := mcp.NewGateway(ctx, nc, js, mcp.GatewayConfig{
		Prefix: conn.prefix, Instance: instance, SessionID: session, PauseTimeout: pauseTimeout, Logger: log,
	})
	if err != nil {
		if errors.Is(err, mcp.ErrConfig) {
			return fmt.Errorf("%w: %w", ErrUsage, err)
		}
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := g.Close(sctx); err != nil {
			log.Warn("mcp gateway stopped with calls running", "err", err)
		}
	}()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	if env.Interrupt != nil {
		go func() {
			select {
			case <-env.Interrupt:
				stop()
			case <-ctx.Done():
			}
		}()
	}
	if addr == "" {
		log.Info("mcp gateway serving on stdio", "nats", conn.url)
		return g.ServeStdio(ctx, io.NopCloser(env.Stdin), nopWriteCloser{env.Stdout})
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mcp: listen on %s: %w", addr, err)
	}
	h := g.Handler()
	if token != "" {
		h = mcp.BearerAuth(token, h)
	} else if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() {
		log.Warn("mcp gateway serves every tool of the catalog without authentication beyond this host; set --http-token", "addr", ln.Addr().String())
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Info("mcp gateway serving streamable HTTP", "url", "http://"+ln.Addr().String()+"/", "nats", conn.url)
	fmt.Fprintf(env.Stderr, "MCP endpoint: http://%s/\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
