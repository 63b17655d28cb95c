package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/llmworker/llmworker/internal/leaf/version"
)

const mainUsage = `llmworker — LLM agent turns distributed over NATS

usage: llmworker <command> [flags] [args]

commands:
  chat [prompt]         submit a turn and render it live (interactive without a prompt)
  up                    run NATS (embedded unless --nats-url) and every service in one process
  tail                  follow worker events (--session S | --turn T), replaying from the start
  tools                 list the tool catalog (KV LLMW_TOOLS)
  hooks                 list the registered hooks (KV LLMW_HOOKS) in chain order
  agent put <file>      store an agent definition (KV LLMW_AGENTS), JSON or YAML
  agent list|show|rm    list the agents, show one (NAME[@REV]), delete one
  mcp                   serve the tool catalog to MCP clients (stdio, or --http) behind the hooks
  turn cancel <id>      cancel a running or paused turn
  turn resume <id>      settle a paused turn (--approve/--deny/--edit/--approve-all)
  session show <id>     print a session's whole transcript (--json)
  session compact <id>  have the turn service compact a session now; its next turn reads the compaction
  provision             create the streams and buckets (--replicas 3 on a cluster)
  permissions           print a nats-server authorization block: one identity per role
  version               print the version

Run 'llmworker <command> --help' for a command's flags.
First run without any account:  %s chat --replay
`

// Main runs the llmworker command line and returns the exit code: 0 on
// success, 1 when something failed (including a failed or aborted turn),
// 2 for bad usage.
func Main(ctx context.Context, args []string, env Env) int {
	env.defaults()
	err := run(ctx, &env, args)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errPrinted):
		return 2
	case errors.Is(err, ErrUsage):
		fmt.Fprintln(env.Stderr, "llmworker:", strings.TrimPrefix(err.Error(), "usage: "))
		return 2
	case errors.Is(err, ErrNoCredentials):
		// The message is printed where the problem was found.
		return 2
	case errors.Is(err, ErrTurnFailed), errors.Is(err, ErrTurnAborted):
		// The renderer showed the reason already.
		return 1
	}
	fmt.Fprintln(env.Stderr, "llmworker:", err)
	return 1
}

func run(ctx context.Context, env *Env, args []string) error {
	if len(args) == 0 {
		fmt.Fprintf(env.Stderr, mainUsage, env.command())
		return fmt.Errorf("%w: no command", ErrUsage)
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "chat":
		return runChat(ctx, env, rest)
	case "up":
		return runUp(ctx, env, rest)
	case "tail":
		return runTail(ctx, env, rest)
	case "tools":
		return runTools(ctx, env, rest)
	case "hooks":
		return runHooks(ctx, env, rest)
	case "agent":
		return runAgentCmd(ctx, env, rest)
	case "mcp":
		return runMCP(ctx, env, rest)
	case "provision":
		return runProvision(ctx, env, rest)
	case "permissions":
		return runPermissions(env, rest)
	case "turn":
		return runTurnCmd(ctx, env, rest)
	case "session":
		return runSessionCmd(ctx, env, rest)
	case "version", "--version":
		fmt.Fprintln(env.Stdout, "llmworker", version.String())
		return nil
	case "help", "-h", "--help", "-help":
		fmt.Fprintf(env.Stdout, mainUsage, env.command())
		return nil
	}
	fmt.Fprintf(env.Stderr, mainUsage, env.command())
	return fmt.Errorf("%w: unknown command %q", ErrUsage, cmd)
}
