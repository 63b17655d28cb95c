// Command hookbridge serves the hooks of a YAML config file (built-in, command
// and HTTP hooks) as NATS responders (docs/protocol.md §7).
//
// The service and its flags are assembled in internal/service/hookbridgesvc,
// shared with `llmworker up --services=hookbridge`; `hookbridge -h` lists every
// flag with the environment variable it defaults to.
package main

import (
	"context"
	"os"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/hookbridgesvc"
)

func main() {
	service.Exit(func(ctx context.Context) int {
		return service.Main(ctx, &hookbridgesvc.Service{}, os.Args[1:], service.IO{Getenv: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr})
	})
}
