// Package toolexecsvc is the toolexec service as cmd/toolexec and
// `llmworker up` run it: the safe built-in tools of pkg/toolexec/builtin
// (with --replay, the demo tools of internal/replay; with --mcp, the
// tools of MCP servers through pkg/mcp) on pkg/toolexec.
package toolexecsvc

import (
	"context"
	"fmt"
	"time"

	"github.com/llmworker/llmworker/internal/leaf/version"
	"github.com/llmworker/llmworker/internal/replay/demotools"
	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/pkg/mcp"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/toolexec/builtin"
)

// Options configure the service; zero values are pkg/toolexec's defaults.
type Options struct {
	// Root enables read_file and list_dir, confined to this directory.
	Root        string
	Concurrency int
	AckWait     time.Duration
	// CatalogTTL: how long a replica that died stays in the tool catalog.
	CatalogTTL time.Duration
	// Replay also hosts the tools of the replay scenarios.
	Replay bool
	// ReplayDelay makes every demo tool call take this long (demos of a
	// slow tool, failover tests).
	ReplayDelay time.Duration
	// Extra tools hosted beside the built-in ones (tests, embedding).
	Extra []tool.Tool
	// MCP servers whose tools are hosted too: --mcp specs
	// (mcp.ParseSpec) and a --mcp-config file (mcp.ParseFile).
	MCP       []string
	MCPConfig string
}

// Service is the toolexec service.
type Service struct {
	Options
	// Tools are the names of the hosted tools once started.
	Tools []string
}

var _ service.Service = (*Service)(nil)

func (*Service) Name() string { return "toolexec" }

func (*Service) About() string {
	return `Hosts llmworker's built-in tools on NATS: current_time, calculator and,
with --root, read_file and list_dir confined to that directory; with
--mcp or --mcp-config, the tools of MCP servers as mcp__NAME__TOOL. Every
replica pulls from the same durable consumers, so more replicas scale the
tools horizontally. SIGINT or SIGTERM drains: running calls finish and are
acknowledged before the process exits.`
}

// Flags registers the service's flags.
func (s *Service) Flags(f *service.Flags) {
	f.String(&s.Root, "root", "LLMW_TOOL_ROOT", "", "directory read_file and list_dir may read (empty disables them)")
	f.Int(&s.Concurrency, "concurrency", "LLMW_TOOL_CONCURRENCY", 0, "calls of one tool run at once by this replica (0 = 8)")
	f.Duration(&s.AckWait, "ack-wait", "LLMW_ACK_WAIT", 0, "how long a dead replica's call waits before another replica runs it (0 = 30s)")
	f.Duration(&s.CatalogTTL, "catalog-ttl", "LLMW_CATALOG_TTL", 0, "how long the tool catalog still lists a replica that died (0 = 30s; at least 1s)")
	f.Bool(&s.Replay, "replay", "LLMW_REPLAY", false, "also host the tools of the replay scenarios")
	f.Duration(&s.ReplayDelay, "replay-delay", "LLMW_REPLAY_DELAY", 0, "replay: every demo tool call takes this long (demos of a slow tool, failover tests)")
	f.Strings(&s.MCP, "mcp", "LLMW_MCP", "host the tools of an MCP server as mcp__NAME__TOOL: NAME=COMMAND ARGS… (stdio) or NAME=https://… (streamable HTTP)")
	f.String(&s.MCPConfig, "mcp-config", "LLMW_MCP_CONFIG", "", "YAML file of MCP servers (servers: [{name, command|url, env, headers, timeout}])")
}

// Start starts toolexec with its tools.
func (s *Service) Start(ctx context.Context, env service.Env) (service.Stopper, error) {
	tools, err := builtin.Tools(builtin.Config{Root: s.Root})
	if err != nil {
		return nil, err
	}
	if s.Replay {
		for _, t := range demotools.Tools() {
			tools = append(tools, demotools.Slow(t, s.ReplayDelay))
		}
	}
	tools = append(tools, s.Extra...)
	servers, err := mcp.Load(s.MCPConfig, s.MCP)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", service.ErrUsage, err)
	}
	var host *mcp.Host
	if len(servers) > 0 {
		if host, err = mcp.Connect(ctx, servers, mcp.Options{Logger: env.Log, Version: version.String()}); err != nil {
			return nil, err
		}
		tools = append(tools, host.Tools()...)
	}
	closeHost := func() {
		if host != nil {
			_ = host.Close()
		}
	}
	if s.Root == "" {
		env.Log.Info("file tools disabled: pass --root DIR (or $LLMW_TOOL_ROOT) to enable read_file and list_dir")
	}
	srv, err := toolexec.New(env.NC, toolexec.Config{
		Prefix: env.Prefix, Instance: env.Instance, Logger: env.Log, Concurrency: s.Concurrency, AckWait: s.AckWait,
		CatalogTTL: s.CatalogTTL,
		Provision:  env.Provision(),
	})
	if err != nil {
		closeHost()
		return nil, fmt.Errorf("%w: %w", service.ErrUsage, err)
	}
	if err := srv.Register(tools...); err != nil {
		closeHost()
		return nil, err
	}
	if err := srv.Start(ctx); err != nil {
		closeHost()
		return nil, err
	}
	s.Tools = s.Tools[:0]
	for _, t := range tools {
		s.Tools = append(s.Tools, t.Name())
	}
	// The MCP servers' tools follow the servers (tools/list_changed, a
	// restart after a crash) until the drain ends; the sessions end after
	// it, so that running calls finish first.
	followed := make(chan struct{})
	if host != nil {
		go func() {
			defer close(followed)
			host.Run(context.WithoutCancel(ctx), srv)
		}()
	} else {
		close(followed)
	}
	return service.StopFunc(func(ctx context.Context) error {
		err := srv.Stop(ctx)
		closeHost()
		<-followed
		return err
	}), nil
}
