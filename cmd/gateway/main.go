// Command gateway runs the llmworker HTTP gateway: the AI SDK UI message
// stream protocol over HTTP for turns on the turn service, resumable
// streams from LLMW_EVENTS, and the web UI (docs/protocol.md, "Gateway").
//
// The service and its flags are assembled in internal/service/gatewaysvc,
// shared with `llmworker up --services=gateway`; `gateway -h` lists every
// flag with the environment variable it defaults to.
package main

import (
	"context"
	"os"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/gatewaysvc"
)

func main() {
	service.Exit(func(ctx context.Context) int {
		return service.Main(ctx, &gatewaysvc.Service{}, os.Args[1:], service.IO{Getenv: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr})
	})
}
