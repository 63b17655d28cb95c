// Command llmworker is the llmworker command line: `chat` (the way to run
// the system: with no NATS_URL it starts everything in-process), `up` (NATS
// and every service in one process), `tail`, `tools`, `hooks`,
// `agent put|list|show|rm` and `turn submit|cancel|resume`. The behaviour lives in internal/cli; this main only
// wires the process to it.
//
//	go run ./cmd/llmworker chat --replay      # no account needed
//	go run ./cmd/llmworker chat "hello"       # with ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY
//	go run ./cmd/llmworker --help
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/llmworker/llmworker/internal/cli"
)

func main() {
	// SIGTERM ends the process (services drain); SIGINT is a Ctrl-C the
	// commands handle themselves (chat cancels the running turn first).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	code := cli.Main(ctx, os.Args[1:], cli.Env{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Interrupt:     interrupts,
		Terminal:      isTerminal(os.Stdout),
		StdinTerminal: isTerminal(os.Stdin),
		Command:       cli.CommandName(os.Args[0]),
	})
	stop()
	os.Exit(code)
}

// isTerminal reports whether f is a terminal. A character device is not
// enough: /dev/null is one, and output sent there must not wait at a
// prompt or carry colours.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
