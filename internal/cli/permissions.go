package cli

import (
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/permissions"
)

const permissionsAbout = `
Prints the authorization block of a nats-server configuration with one
user per llmworker role — ingest, turn, toolexec, hookbridge, mcp, submitter,
reader, provision — each allowed the subjects it uses and nothing else
(docs/security.md). Passwords are read by nats-server from the variables
$LLMW_<ROLE>_PASSWORD. Run the services with --nats-user llmw-<role>,
NATS_PASSWORD and --provision-verify, after "llmworker provision" as
llmw-provision.`

func runPermissions(env *Env, args []string) error {
	var prefix string
	fs := newFlags(env, "permissions", "permissions [flags]", permissionsAbout)
	def := env.getenv("LLMW_PREFIX")
	if def == "" {
		def = events.DefaultPrefix
	}
	fs.StringVar(&prefix, "prefix", def, "subject prefix ($LLMW_PREFIX)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: permissions takes no arguments, got %q", ErrUsage, fs.Args())
	}
	_, err := fmt.Fprint(env.Stdout, permissions.Config(prefix, permissions.DefaultUsers()))
	return err
}
