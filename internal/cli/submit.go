package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/worker"
)

const submitAbout = `
Publishes a turn request (llmw.turn.submit) and prints its turn id, so that
scripts need not build CloudEvents by hand. The request comes from --file
(a "Turn request" JSON object, docs/protocol.md; "-" reads stdin), from the
flags, or both (flags override the file). --agent names an agent
definition ('llmworker agent list') whose fields fill in what the
request does not set. --prompt adds a user message;
without --id a new turn id is made. --attach adds an image or a file
(PDF, text, JSON, audio) to the last user message: files above 256 KiB
are uploaded to LLMW_MEDIA and sent as refs, smaller ones inline.
--schema asks for JSON output fitting a JSON Schema (named after the
file), --json for any JSON object. With --follow the turn is rendered to
its end, with its output when it has one (a paused turn is left paused:
resume it with 'turn resume'), and the child turns of its sub-agents,
any depth, indented under the calls that run them. A request the turn
service does not run is reported with its code.`

func runTurnSubmit(ctx context.Context, env *Env, args []string) error {
	var (
		conn                     connFlags
		file, id, model, session string
		agent                    string
		system, tools, fallback  string
		prompts, attach          stringList
		schema                   string
		asJSON                   bool
		maxSteps, maxTokens      int
		follow                   bool
	)
	fs := newFlags(env, "turn submit", "turn submit [--file req.json|-] [--prompt TEXT]... [flags]", submitAbout)
	conn.register(fs, env)
	fs.StringVar(&file, "file", "", `turn request JSON file ("-" = stdin)`)
	fs.StringVar(&id, "id", "", "turn id (default: the file's, else a new one)")
	fs.StringVar(&model, "model", "", "provider:model (default: the file's, else the agent's, else $LLMW_MODEL)")
	fs.StringVar(&agent, "agent", "", "NAME or NAME@REV of an agent definition (llmworker agent list): its model, system prompt, tools and options for what the request does not set")
	fs.StringVar(&session, "session", "", "session id")
	fs.StringVar(&fallback, "fallback", "", `fallback models, comma-separated provider:model, tried in order when the model fails before answering; "none" = none (default: the file's, else the service's)`)
	fs.StringVar(&system, "system", "", "system prompt")
	fs.StringVar(&tools, "tools", "", `tools offered: names or patterns, comma-separated; "*" = every tool; "none" = no tools`)
	fs.Var(&prompts, "prompt", "a user message (repeatable)")
	fs.Var(&attach, "attach", "an image or file for the last user message (repeatable); above 256 KiB it is uploaded to LLMW_MEDIA")
	fs.StringVar(&schema, "schema", "", "JSON Schema file: the answer is JSON fitting it (response_format json_schema, named after the file)")
	fs.BoolVar(&asJSON, "json", false, "the answer is a JSON object (response_format json)")
	fs.IntVar(&maxSteps, "max-steps", 0, "bound on model calls (0 = the service's default)")
	fs.IntVar(&maxTokens, "max-tokens", 0, "max output tokens per model call (0 = the provider's default)")
	fs.BoolVar(&follow, "follow", false, "render the turn until it ends")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q (a prompt goes in --prompt)", ErrUsage, fs.Args())
	}
	var req events.TurnRequest
	if file != "" {
		b, err := readRequestFile(env, file)
		if err != nil {
			return err
		}
		// The file is a request the flags complete (--id, --model, …):
		// it is checked whole once they are applied, below.
		if err := json.Unmarshal(b, &req); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrUsage, file, err)
		}
	}
	if id != "" {
		req.TurnID = id
	}
	if req.TurnID == "" {
		req.TurnID = worker.NewTurnID()
	}
	if agent != "" {
		req.Agent = agent
	}
	switch {
	case model != "":
		req.Model = model
	case req.Model == "" && req.Agent == "":
		req.Model = env.getenv("LLMW_MODEL")
	}
	if session != "" {
		req.SessionID = session
	}
	if system != "" {
		req.System = system
	}
	switch tools {
	case "":
	case "none":
		req.Tools = []string{}
	default:
		req.Tools = nil
		for t := range strings.SplitSeq(tools, ",") {
			if t = strings.TrimSpace(t); t != "" {
				req.Tools = append(req.Tools, t)
			}
		}
	}
	switch fallback {
	case "":
	case "none":
		req.FallbackModels = []string{}
	default:
		req.FallbackModels = nil
		for m := range strings.SplitSeq(fallback, ",") {
			if m = strings.TrimSpace(m); m != "" {
				req.FallbackModels = append(req.FallbackModels, m)
			}
		}
	}
	for _, p := range prompts {
		req.Messages = append(req.Messages, events.UserText(p))
	}
	var err error
	if req.Messages, err = attachTo(req.Messages, attach); err != nil {
		return err
	}
	switch {
	case schema != "" && asJSON:
		return fmt.Errorf("%w: --schema and --json: pick one (--schema asks for JSON fitting the schema)", ErrUsage)
	case schema != "":
		if req.ResponseFormat, err = schemaFormat(schema); err != nil {
			return err
		}
	case asJSON:
		req.ResponseFormat = &events.ResponseFormat{Type: events.FormatJSON}
	}
	if maxSteps > 0 {
		req.MaxSteps = maxSteps
	}
	if maxTokens > 0 {
		req.MaxTokens = maxTokens
	}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if sc, ok, err := replayScenario(req.Model); err != nil {
		return err
	} else if ok {
		// On stderr: stdout is the turn id a script reads.
		replayNotice(NewRenderer(env.Stderr, env.color()), sc, lastUserText(req.Messages))
	}

	cl, err := conn.connect("turn submit")
	if err != nil {
		return err
	}
	defer cl.close()
	if err := uploadLarge(ctx, cl.js, req.Messages); err != nil {
		return err
	}
	// A follower replays the id's stored events: an id that has some names
	// an existing turn, which this request cannot become.
	if n, err := storedCount(ctx, cl, conn.subjects().EventsOfTurn(req.TurnID)); err == nil && n > 0 {
		return fmt.Errorf("%w: turn %s exists (%d events stored): a turn id names one turn, so choose a new --id or leave it out (%s)",
			ErrTurnRejected, req.TurnID, n, events.RejectTurnExists)
	}
	// Both before the submit: neither answer is waited for after it.
	rejected, stopRejected, err := cl.tc.Rejections(req.TurnID)
	if err != nil {
		return err
	}
	defer stopRejected()
	// The turn and its sub-agents' child turns, indented under the calls
	// that run them.
	f, err := followTree(ctx, cl.tc, conn.subjects(), req.TurnID)
	if err != nil {
		return err
	}
	defer f.Stop()
	if err := cl.tc.Submit(ctx, &req); err != nil {
		return err
	}
	fmt.Fprintln(env.Stdout, req.TurnID)
	if !follow {
		return nil
	}
	out := newTreeRenderer(NewRenderer(env.Stdout, env.color()), env.Stdout, env.color())
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case rj := <-rejected:
			return fmt.Errorf("%w: turn %s was not run: %s (%s)", ErrTurnRejected, req.TurnID, rj.Reason, rj.Code)
		case it := <-f.C():
			r, ok := out.render(it)
			if !ok || it.Depth > 0 {
				continue
			}
			switch r.State {
			case StateCompleted:
				return nil
			case StateFailed:
				return fmt.Errorf("%w: %s", ErrTurnFailed, r.Reason)
			case StateAborted:
				return fmt.Errorf("%w: %s", ErrTurnAborted, r.Reason)
			case StatePaused:
				fmt.Fprintf(env.Stdout, "turn %s is paused: settle it with `%s turn resume %s --approve ID` (or --deny, --edit, --approve-all)\n", req.TurnID, env.command(), req.TurnID)
				return nil
			}
		}
	}
}

// readRequestFile reads a request file, "-" being stdin.
func readRequestFile(env *Env, name string) ([]byte, error) {
	var (
		b   []byte
		err error
	)
	if name == "-" {
		b, err = io.ReadAll(io.LimitReader(env.Stdin, 64<<20))
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %v", ErrUsage, name, err)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("%w: %s is not valid JSON", ErrUsage, name)
	}
	return b, nil
}

// lastUserText is the text of the last user message: the prompt a model
// answers.
func lastUserText(msgs []events.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == events.RoleUser {
			return msgs[i].Text()
		}
	}
	return ""
}
