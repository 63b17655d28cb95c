package cli

import (
	"io"
	"os"
	"strings"
)

// Env is the process environment of a command, injected so that tests run
// commands in-process.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads environment variables (nil = os.Getenv).
	Getenv func(string) string
	// Interrupt delivers Ctrl-C presses (nil = none). chat cancels the
	// running turn on the first one; up and tail stop.
	Interrupt <-chan os.Signal
	// Terminal says stdout is a terminal: colours (unless NO_COLOR is set)
	// and prompts. Plain output otherwise.
	Terminal bool
	// StdinTerminal says stdin is a terminal: a person can answer prompts.
	// chat --replay without a prompt offers more recordings only then.
	StdinTerminal bool
	// Started, when set, is called with every stack a command starts, once
	// it serves and, for up, has printed its banner (tests use it to reach
	// the embedded NATS server).
	Started func(*Stack)
}

func (e *Env) getenv(k string) string {
	if e.Getenv == nil {
		return os.Getenv(k)
	}
	return e.Getenv(k)
}

func (e *Env) defaults() {
	if e.Stdin == nil {
		e.Stdin = strings.NewReader("")
	}
	if e.Stdout == nil {
		e.Stdout = io.Discard
	}
	if e.Stderr == nil {
		e.Stderr = io.Discard
	}
}

// color reports whether output may use ANSI escapes.
func (e *Env) color() bool {
	_, noColor := lookup(e, "NO_COLOR")
	return e.Terminal && !noColor
}

func lookup(e *Env, k string) (string, bool) {
	if e.Getenv == nil {
		return os.LookupEnv(k)
	}
	v := e.Getenv(k)
	return v, v != ""
}

func osGetenv(k string) string { return os.Getenv(k) }
