package hookbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/llmworker/llmworker/internal/leaf/childenv"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// DefaultCommandTimeout bounds a command or HTTP hook whose registration
// has no timeout_ms (the turn's default hook timeout).
const DefaultCommandTimeout = 30 * time.Second

// Output limits of command hooks: a reply is small; a runaway process must
// not fill the bridge's memory.
const (
	maxStdout = 4 << 20
	maxStderr = 64 << 10
)

// CommandEnv are the variables of the bridge's environment a command hook
// inherits: what programs need to run (PATH, HOME, locale, time zone,
// temporary directory), nothing secret. Anything else a hook needs is set
// in its config's env.
var CommandEnv = childenv.Inherited

// CommandOptions configure a command hook.
type CommandOptions struct {
	// Argv is run directly (no shell): Argv[0] is looked up in $PATH.
	Argv []string
	// Shell is a command line the user wrote, run with /bin/sh -c. The
	// request still reaches it only on stdin and in the environment, never
	// inside the command line.
	Shell string
	// Env is added to the command's environment, which otherwise holds
	// only CommandEnv of the bridge's (no provider keys, no NATS
	// credentials: a hook script is not trusted with them).
	Env map[string]string
	// Dir is the working directory ("" = the bridge's).
	Dir string
}

// Command returns a handler that runs a program for each request of hook
// point ev, the convention of coding-agent hook scripts:
//
//   - the request (events.HookRequest JSON) is written to stdin; the
//     environment is CommandEnv, the config's env and LLMW_HOOK_NAME,
//     LLMW_HOOK_EVENT, LLMW_TURN_ID, LLMW_SESSION_ID, LLMW_STEP and
//     LLMW_TOOL_NAME (the last three only when they are plain tokens);
//   - exit code 0 with empty stdout continues (finish at on_turn_end);
//     exit code 0 with a JSON object on stdout is the reply
//     (events.HookResponse);
//   - exit code 2 blocks, with stderr as the reason: skip at
//     before_tool_call, cancel at on_message_send, abort at
//     after_tool_call; at on_turn_end (which cannot block) it answers
//     continue_with_messages with stderr as a user message, asking the model
//     to go on (the worker bounds these retries); at on_abort it is
//     ignored;
//   - any other exit code, a reply that is not JSON and a timeout are hook
//     failures (ErrCommand). A timeout (the ctx deadline: the hook's
//     timeout_ms, else DefaultCommandTimeout) kills the whole process group.
//
// The model's text and tool input are never put on a command line.
func Command(ev events.HookEvent, o CommandOptions) (hooknats.Handler, error) {
	if (len(o.Argv) == 0) == (o.Shell == "") {
		return nil, fmt.Errorf("%w: a command hook needs exactly one of argv or shell", hooknats.ErrInvalidHook)
	}
	if len(o.Argv) > 0 && o.Argv[0] == "" {
		return nil, fmt.Errorf("%w: empty program name", hooknats.ErrInvalidHook)
	}
	env := childenv.Build(os.LookupEnv, o.Env)
	return hooknats.HandlerFunc(func(ctx context.Context, req *events.HookRequest) (*events.HookResponse, error) {
		return runCommand(ctx, ev, o, env, req)
	}), nil
}

func runCommand(ctx context.Context, ev events.HookEvent, o CommandOptions, env []string, req *events.HookRequest) (*events.HookResponse, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCommandTimeout)
		defer cancel()
	}
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	if o.Shell != "" {
		cmd = exec.CommandContext(ctx, "/bin/sh", "-c", o.Shell)
	} else {
		cmd = exec.CommandContext(ctx, o.Argv[0], o.Argv[1:]...)
	}
	setProcessGroup(cmd)
	// A grandchild holding the pipes open must not keep us waiting.
	cmd.WaitDelay = time.Second
	cmd.Dir = o.Dir
	cmd.Env = append(env, requestEnv(req)...)
	// The trace context as the OpenTelemetry environment carrier
	// (TRACEPARENT, TRACESTATE), for a hook that traces itself.
	if tp, ts := telemetry.Parent(ctx); tp != "" {
		cmd.Env = append(cmd.Env, "TRACEPARENT="+tp)
		if ts != "" {
			cmd.Env = append(cmd.Env, "TRACESTATE="+ts)
		}
	}
	cmd.Stdin = bytes.NewReader(in)
	stdout := &capped{max: maxStdout}
	stderr := &capped{max: maxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr

	start := time.Now()
	err = cmd.Run()
	errText := strings.TrimSpace(stderr.String())
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, fmt.Errorf("%w: %s did not finish within %v (process group killed): %w", ErrCommand, name(o), time.Since(start).Round(time.Millisecond), ctxErr)
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		return blocked(ev, errText), nil
	case errors.As(err, &exit):
		return nil, fmt.Errorf("%w: %s exited with code %d%s", ErrCommand, name(o), exit.ExitCode(), colon(errText))
	default:
		return nil, fmt.Errorf("%w: %s: %w", ErrCommand, name(o), err)
	}
	out := bytes.TrimSpace(stdout.Bytes())
	if len(out) == 0 {
		return nil, nil
	}
	if stdout.truncated {
		return nil, fmt.Errorf("%w: %s printed more than %d bytes", ErrCommand, name(o), maxStdout)
	}
	resp, err := events.Decode[events.HookResponse](out)
	if err != nil {
		return nil, fmt.Errorf("%w: %s printed something that is not a JSON hook response: %w", ErrCommand, name(o), err)
	}
	return &resp, nil
}

// blocked is the reply of exit code 2 at hook point ev.
func blocked(ev events.HookEvent, reason string) *events.HookResponse {
	switch ev {
	case events.HookBeforeToolCall:
		return hooknats.Respond(events.HookSkip, reason)
	case events.HookOnMessageSend:
		return hooknats.Respond(events.HookCancel, reason)
	case events.HookAfterToolCall:
		return hooknats.Respond(events.HookAbort, reason)
	case events.HookOnTurnEnd:
		msg := reason
		if msg == "" {
			msg = "A check of your answer failed. Please continue."
		}
		return &events.HookResponse{Result: events.HookContinueWithMessages, Reason: reason, Messages: []events.Message{events.UserText(msg)}}
	}
	return &events.HookResponse{Reason: reason}
}

// requestEnv describes the request in environment variables; values the
// model can influence are only included when they are plain tokens.
func requestEnv(req *events.HookRequest) []string {
	env := []string{
		"LLMW_HOOK_NAME=" + req.Hook,
		"LLMW_HOOK_EVENT=" + string(req.Event),
		"LLMW_STEP=" + strconv.Itoa(req.Step),
	}
	if events.ValidToken(req.TurnID) {
		env = append(env, "LLMW_TURN_ID="+req.TurnID)
	}
	if events.ValidToken(req.SessionID) {
		env = append(env, "LLMW_SESSION_ID="+req.SessionID)
	}
	var toolName string
	switch {
	case req.ToolCall != nil:
		toolName = req.ToolCall.Name
	case req.Tool != nil:
		toolName = req.Tool.Name
	}
	if events.ValidToolName(toolName) {
		env = append(env, "LLMW_TOOL_NAME="+toolName)
	}
	return env
}

func name(o CommandOptions) string {
	if o.Shell != "" {
		return "shell command"
	}
	return "command " + strconv.Quote(o.Argv[0])
}

func colon(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// capped is a buffer that keeps at most max bytes and drops the rest.
type capped struct {
	bytes.Buffer
	max       int
	truncated bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room < len(p) {
		c.truncated = true
		if room > 0 {
			c.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return c.Buffer.Write(p)
}

// command parses a command: block.
func (d *decoder) command(n *yaml.Node, path string, reg *events.HookRegistration) (hooknats.Handler, error) {
	m, err := d.mapping(n, path, "argv", "shell", "env", "dir")
	if err != nil {
		return nil, err
	}
	var o CommandOptions
	an, hasArgv := m["argv"]
	sn, hasShell := m["shell"]
	switch {
	case hasArgv && hasShell:
		return nil, d.errAt(sn, path+".shell", "give argv or shell, not both")
	case hasArgv:
		if o.Argv, err = d.strings(an, path+".argv"); err != nil {
			return nil, err
		}
		if len(o.Argv) == 0 || o.Argv[0] == "" {
			return nil, d.errAt(an, path+".argv", "needs a program name")
		}
		if _, err := exec.LookPath(o.Argv[0]); err != nil {
			return nil, d.errAt(an, path+".argv", "program %q not found: %v", o.Argv[0], errors.Unwrap(err))
		}
	case hasShell:
		if o.Shell, err = d.str(sn, path+".shell"); err != nil {
			return nil, err
		}
		if strings.TrimSpace(o.Shell) == "" {
			return nil, d.errAt(sn, path+".shell", "is empty")
		}
	default:
		return nil, d.errAt(n, path+".argv", "is required (or shell)")
	}
	if v, ok := m["env"]; ok {
		if o.Env, _, err = d.stringMap(v, path+".env"); err != nil {
			return nil, err
		}
	}
	if v, ok := m["dir"]; ok {
		if o.Dir, err = d.str(v, path+".dir"); err != nil {
			return nil, err
		}
	}
	if reg.Event == "" {
		return nil, d.errAt(n, strings.TrimSuffix(path, ".command")+".event", "is required for command hooks")
	}
	return Command(reg.Event, o)
}
