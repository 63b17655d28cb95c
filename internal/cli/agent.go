package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
)

const agentAbout = `
Manages the agent definitions of the KV bucket LLMW_AGENTS
(docs/protocol.md §5, "Agents"): a turn request that names an agent
("agent": "NAME" or "NAME@REV"; 'turn submit --agent') takes the
definition's model, system prompt, tools and options for every field it
does not set. Each put makes a new revision; the last 64 of each agent stay
resolvable as NAME@REV, after a delete too.

  agent put FILE [--force]   store a definition (JSON or YAML; "-" = stdin);
                             prints its name and revision. A sub-agent the
                             registry does not hold, or a cycle of
                             sub-agents, is refused unless --force.
  agent list                 name, revision, model and description of each
  agent show NAME[@REV]      the definition as JSON (--history: every
                             revision the bucket holds)
  agent rm NAME              delete the agent (its revisions stay readable
                             as NAME@REV)

Writing needs the provision role's identity (docs/security.md).`

func runAgentCmd(ctx context.Context, env *Env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(env.Stderr, "usage: llmworker agent put|list|show|rm [flags]\n%s\n", agentAbout)
		if len(args) == 0 {
			return fmt.Errorf("%w: agent needs a subcommand: put, list, show or rm", ErrUsage)
		}
		return nil
	}
	sub, rest := args[0], args[1:]
	var (
		conn    connFlags
		force   bool
		history bool
	)
	var usage string
	switch sub {
	case "put":
		usage = "agent put FILE [--force] [flags]"
	case "list":
		usage = "agent list [flags]"
	case "show":
		usage = "agent show NAME[@REV] [--history] [flags]"
	case "rm":
		usage = "agent rm NAME [flags]"
	default:
		return fmt.Errorf("%w: unknown agent subcommand %q (want put, list, show or rm)", ErrUsage, sub)
	}
	fs := newFlags(env, "agent "+sub, usage, agentAbout)
	conn.register(fs, env)
	if sub == "put" {
		fs.BoolVar(&force, "force", false, "store the definition although its sub-agents are unknown or form a cycle (printed as warnings)")
	}
	if sub == "show" {
		fs.BoolVar(&history, "history", false, "list every revision the bucket holds (deletes included)")
	}
	arg, err := agentArg(fs, rest, sub != "list")
	if err != nil {
		return err
	}
	var def events.AgentDefinition
	if sub == "put" {
		// Read and check the file before connecting: a wrong field is
		// reported without a server.
		b, err := readDefinition(env, arg)
		if err != nil {
			return err
		}
		if def, err = agents.ParseDefinition(b); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrUsage, arg, err)
		}
	}
	cl, err := conn.connect("agent " + sub)
	if err != nil {
		return err
	}
	defer cl.close()
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	reg := agents.New(cl.js)
	switch sub {
	case "put":
		err = putAgent(actx, env, reg, def, force)
	case "list":
		err = listAgents(actx, env, reg)
	case "show":
		err = showAgent(actx, env, reg, arg, history)
	case "rm":
		if err = reg.Delete(actx, arg); err == nil {
			fmt.Fprintf(env.Stdout, "deleted %s (its revisions stay readable as %s@REV)\n", arg, arg)
		}
	}
	if errors.Is(err, agents.ErrNotProvisioned) {
		return fmt.Errorf("%w: no bucket %s (run llmworker provision)", ErrNotProvisioned, events.BucketAgents)
	}
	return err
}

// agentArg parses the flags and returns the one argument (before or after
// the flags) a subcommand takes, or checks there is none.
func agentArg(fs interface {
	Parse([]string) error
	Args() []string
}, args []string, want bool) (string, error) {
	var arg string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") || len(args) > 0 && args[0] == "-" {
		arg, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	rest := fs.Args()
	if arg == "" && len(rest) > 0 {
		arg, rest = rest[0], rest[1:]
	}
	switch {
	case !want && arg != "":
		return "", fmt.Errorf("%w: unexpected arguments %q", ErrUsage, append([]string{arg}, rest...))
	case want && arg == "":
		return "", fmt.Errorf("%w: missing argument", ErrUsage)
	case len(rest) > 0:
		return "", fmt.Errorf("%w: unexpected arguments %q", ErrUsage, rest)
	}
	return arg, nil
}

func readDefinition(env *Env, name string) ([]byte, error) {
	var (
		b   []byte
		err error
	)
	if name == "-" {
		b, err = io.ReadAll(io.LimitReader(env.Stdin, 4<<20))
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %v", ErrUsage, name, err)
	}
	return b, nil
}

func putAgent(ctx context.Context, env *Env, reg *agents.Registry, def events.AgentDefinition, force bool) error {
	rev, warnings, err := reg.Put(ctx, def, agents.PutOptions{Force: force})
	if errors.Is(err, agents.ErrUnknownSubAgent) || errors.Is(err, agents.ErrCycle) {
		return fmt.Errorf("%s not stored: %w\n(put the sub-agents first, or --force to store it anyway)", def.Name, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// A put the server refuses for want of rights is never
		// acknowledged: say which identity writes the bucket.
		return fmt.Errorf("%w (no acknowledgement: may this identity write %s? the provision role does, docs/security.md)", err, events.BucketAgents)
	}
	if err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintln(env.Stderr, "warning:", w)
	}
	fmt.Fprintf(env.Stdout, "%s revision %d\n", def.Name, rev)
	return nil
}

func listAgents(ctx context.Context, env *Env, reg *agents.Registry) error {
	list, err := reg.List(ctx)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		fmt.Fprintln(env.Stdout, "no agents (llmworker agent put FILE stores one)")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tREVISION\tMODEL\tDESCRIPTION")
	for _, a := range list {
		model := a.Model
		if model == "" {
			model = "a2a " + a.A2AURL
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", a.Name, a.Revision, model, Truncate(a.Description, 100))
	}
	return tw.Flush()
}

func showAgent(ctx context.Context, env *Env, reg *agents.Registry, ref string, history bool) error {
	if history {
		name, _, err := events.ParseAgentRef(ref)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		revs, err := reg.History(ctx, name)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REVISION\tPUT\tMODEL\tDESCRIPTION")
		for _, a := range revs {
			if a.Deleted {
				fmt.Fprintf(tw, "%d\t%s\t(deleted)\t\n", a.Revision, a.Created.UTC().Format(time.RFC3339))
				continue
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", a.Revision, a.Created.UTC().Format(time.RFC3339), a.Model, Truncate(a.Description, 80))
		}
		return tw.Flush()
	}
	a, err := reg.Resolve(ctx, ref)
	if errors.Is(err, events.ErrInvalid) {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(a.AgentDefinition, "", "  ")
	if err != nil {
		return err
	}
	// The JSON alone on stdout: it can be edited and put again.
	fmt.Fprintf(env.Stderr, "%s, put %s\n", a.Ref(), a.Created.UTC().Format(time.RFC3339))
	fmt.Fprintf(env.Stdout, "%s\n", b)
	return nil
}
