// Command turn runs the llmworker turn service: turn requests from LLMW_TURNS,
// model calls through ingest, tools through toolexec, worker events for
// UIs, checkpoints in LLMW_TURN_STATE (docs/protocol.md §5, §8).
//
// The service and its flags are assembled in internal/service/turnsvc,
// shared with `llmworker up --services=turn`; `turn -h` lists every
// flag with the environment variable it defaults to.
package main

import (
	"context"
	"os"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/turnsvc"
)

func main() {
	service.Exit(func(ctx context.Context) int {
		return service.Main(ctx, &turnsvc.Service{}, os.Args[1:], service.IO{Getenv: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr})
	})
}
