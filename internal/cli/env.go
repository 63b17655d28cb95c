package cli

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	// Command is how the person runs this program, for the commands the
	// output suggests ("" = llmworker; see CommandName).
	Command string
}

// command is how to run this program again, in a suggested command line.
func (e *Env) command() string {
	if e.Command == "" {
		return "llmworker"
	}
	return e.Command
}

// CommandName is how a person runs the program started as arg0
// (os.Args[0]): "go run ./cmd/llmworker" for a binary `go run` built (the
// README runs it so from the repository's root), "llmworker" when that
// name on PATH is this binary, else arg0 itself.
func CommandName(arg0 string) string {
	if builtByGoRun(arg0) {
		return "go run ./cmd/llmworker"
	}
	if p, err := exec.LookPath("llmworker"); err == nil {
		a, errA := os.Stat(p)
		b, errB := os.Stat(arg0)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return "llmworker"
		}
	}
	if !strings.ContainsRune(arg0, filepath.Separator) {
		return "llmworker"
	}
	return arg0
}

// goRunCached is the directory of an executable `go run` keeps in the
// build cache: $GOCACHE/<xx>/<sha256>-d/<name>.
var goRunCached = regexp.MustCompile(`^[0-9a-f]{64}-d$`)

// builtByGoRun reports whether arg0 is where `go run` puts the binary it
// runs: the build cache, or a temporary $WORK/b001/exe/<name> ($WORK being
// go-build<random>) when it does not cache it.
func builtByGoRun(arg0 string) bool {
	dir := filepath.Dir(arg0)
	if goRunCached.MatchString(filepath.Base(dir)) {
		return true
	}
	return filepath.Base(dir) == "exe" && strings.HasPrefix(filepath.Base(filepath.Dir(filepath.Dir(dir))), "go-build")
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
