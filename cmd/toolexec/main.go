// Command toolexec hosts llmworker's built-in tools on NATS (docs/protocol.md §6);
// replicas share durable consumers, so more replicas scale the tools.
//
// The service and its flags are assembled in internal/service/toolexecsvc,
// shared with `llmworker up --services=toolexec`; `toolexec -h` lists every
// flag with the environment variable it defaults to.
package main

import (
	"context"
	"os"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/toolexecsvc"
)

func main() {
	service.Exit(func(ctx context.Context) int {
		return service.Main(ctx, &toolexecsvc.Service{}, os.Args[1:], service.IO{Getenv: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr})
	})
}
