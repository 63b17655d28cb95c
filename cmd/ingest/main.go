// Command ingest runs llmw-ingest, the micro service that calls LLM providers through
// their official SDKs and publishes their streams as CloudEvents on NATS
// (docs/protocol.md §3).
//
// The service and its flags are assembled in internal/service/ingestsvc,
// shared with `llmworker up --services=ingest`; `ingest -h` lists every
// flag with the environment variable it defaults to.
package main

import (
	"context"
	"os"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/ingestsvc"
)

func main() {
	service.Exit(func(ctx context.Context) int {
		return service.Main(ctx, &ingestsvc.Service{}, os.Args[1:], service.IO{Getenv: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr})
	})
}
