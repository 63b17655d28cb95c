package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/internal/service/hookbridgesvc"
	"github.com/llmworker/llmworker/internal/service/ingestsvc"
	"github.com/llmworker/llmworker/internal/service/toolexecsvc"
	"github.com/llmworker/llmworker/internal/service/turnsvc"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/turn"
)

const chatAbout = `
Submits a turn and renders it live: text as it streams, thinking dimmed,
each tool call with its arguments, progress and result, hook decisions and
usage. Without a prompt it is an interactive session that keeps the
conversation (type /exit to leave). When a turn pauses for approval, chat
asks for each pending call. Ctrl-C during a turn cancels it.

With no NATS_URL everything (NATS, ingest, turn, toolexec, hookbridge with
--hooks) runs in this process. Provider keys come from ANTHROPIC_API_KEY,
OPENAI_API_KEY (OPENAI_BASE_URL for a local OpenAI-compatible server),
GEMINI_API_KEY / GOOGLE_API_KEY. --replay needs none: it plays recorded
provider streams through the real pipeline (not a live model).`

// chatOptions are chat's flags.
type chatOptions struct {
	conn                       connFlags
	model, session, system     string
	tools                      string
	root, hooks, logLevel      string
	models                     string
	maxSteps, maxTokens, think int
	replay                     bool
	pace                       time.Duration
	noticeAfter                time.Duration
	prompt                     string
	interactive                bool
	// attach are files for the first turn's message.
	attach stringList
}

func runChat(ctx context.Context, env *Env, args []string) error {
	var o chatOptions
	fs := newFlags(env, "chat", "chat [flags] [prompt]", chatAbout)
	o.conn.register(fs, env)
	fs.StringVar(&o.model, "model", "", "provider:model, e.g. anthropic:claude-sonnet-4-5 (default $LLMW_MODEL, else by the credentials set)")
	fs.BoolVar(&o.replay, "replay", false, "replay recorded provider streams instead of calling a model (model replay:anthropic|openai|openai-responses|gemini)")
	fs.StringVar(&o.session, "session", "", "session id: keeps the conversation across turns (interactive mode makes one)")
	fs.StringVar(&o.system, "system", "", "system prompt")
	fs.StringVar(&o.tools, "tools", "*", "comma-separated tool names the model may call (\"*\" = all, \"\" = none)")
	fs.IntVar(&o.maxSteps, "max-steps", 0, "bound on model calls per turn (0 = the turn service's default)")
	fs.IntVar(&o.maxTokens, "max-tokens", 0, "max output tokens per model call (0 = provider default)")
	fs.IntVar(&o.think, "thinking", 0, "thinking budget in tokens (0 = off)")
	fs.Var(&o.attach, "attach", "an image or file (PDF, text, JSON, audio) for the first message (repeatable); above 256 KiB it is uploaded to LLMW_MEDIA")
	fs.StringVar(&o.root, "root", "", "embedded mode: directory the read_file/list_dir tools may read")
	fs.StringVar(&o.hooks, "hooks", "", "embedded mode: hookbridge config file (YAML) to serve")
	fs.StringVar(&o.models, "models", env.getenv("LLMW_MODELS"), "embedded mode: models file (JSON, or YAML as *.yaml): per provider:model the context_window and max_output_tokens, over the shipped table (default $LLMW_MODELS)")
	fs.StringVar(&o.logLevel, "log-level", "error", "embedded mode: log level of the services (debug, info, warn, error)")
	fs.DurationVar(&o.pace, "replay-pace", replay.DefaultPace, "replay: time per streamed token, so that a replay streams as a live model writes (0 = as fast as possible)")
	o.noticeAfter = 5 * time.Second
	if err := parse(fs, args); err != nil {
		return err
	}
	o.prompt = strings.TrimSpace(strings.Join(fs.Args(), " "))
	o.interactive = o.prompt == ""
	// A file that cannot be sent is refused before anything starts.
	for _, p := range o.attach {
		if _, err := attachmentPart(p); err != nil {
			return err
		}
	}
	return chat(ctx, env, &o)
}

func chat(ctx context.Context, env *Env, o *chatOptions) error {
	creds := readCredentials(env)
	model := pickModel(o.model, env, creds)
	if o.replay {
		model = replayModel(model)
	}
	embedded := o.conn.url == ""
	if model == "" {
		if embedded {
			fmt.Fprint(env.Stderr, missingCredentials(env.command()))
			return ErrNoCredentials
		}
		return fmt.Errorf("%w: no model: pass --model provider:model or set LLMW_MODEL", ErrUsage)
	}
	provider, _ := events.SplitModel(model)
	if provider == "" {
		return fmt.Errorf("%w: --model %q: want provider:model, e.g. %s", ErrUsage, model, DefaultAnthropicModel)
	}
	isReplay := provider == replay.Prefix
	if embedded && !creds.has(provider) {
		fmt.Fprintf(env.Stderr, "model %s needs credentials that are not set.\n", model)
		fmt.Fprint(env.Stderr, missingCredentials(env.command()))
		return ErrNoCredentials
	}
	out := NewRenderer(env.Stdout, env.color())
	recorded := "" // the replayed scenario's question
	if isReplay {
		sc, _, err := replayScenario(model)
		if err != nil {
			return err
		}
		recorded = sc.Prompt
		switch {
		case o.prompt == "" && o.replay:
			// The demo (--replay): the recorded question first; then, for
			// a person at a terminal, the choice of the other recordings.
			o.prompt = sc.Prompt
			o.interactive = env.Terminal && env.StdinTerminal
		case o.prompt == "" && !env.Terminal:
			o.prompt, o.interactive = sc.Prompt, false
		}
		replayNotice(out, sc, o.prompt)
	}
	menu := isReplay && o.replay

	var nc *nats.Conn
	if embedded {
		level, err := parseLevel(o.logLevel)
		if err != nil {
			return err
		}
		st, err := StartStack(context.WithoutCancel(ctx), StackConfig{
			Prefix: o.conn.prefix, Getenv: env.Getenv,
			// No gateway: chat renders in the terminal.
			Services:   []string{SvcIngest, SvcToolexec, SvcHookbridge, SvcTurn},
			Ingest:     ingestsvc.Options{Replay: isReplay, ReplayPace: o.pace},
			Toolexec:   toolexecsvc.Options{Root: o.root, Replay: isReplay},
			Hookbridge: hookbridgesvc.Options{Config: o.hooks},
			Turn:       turnsvc.Options{Models: o.models},
			Logger:     slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level})),
		})
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = st.Stop(sctx)
		}()
		if env.Started != nil {
			env.Started(st)
		}
		nc = st.NC
	} else {
		cl, err := o.conn.connect("chat")
		if err != nil {
			return err
		}
		defer cl.close()
		nc = cl.nc
	}
	tc, err := turn.NewClient(nc, turn.ClientOptions{Prefix: o.conn.prefix, Source: events.Source("llmworker", "chat")})
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	c := &chatter{env: env, o: o, tc: tc, js: js, subj: o.conn.subjects(), out: out, model: model, attach: o.attach}
	c.lines = newLineReader(env.Stdin)
	defer c.lines.stop()
	if o.interactive && c.o.session == "" {
		c.o.session = "chat-" + nuid.Next()
	}
	var last error
	if o.prompt != "" {
		if o.prompt == recorded {
			out.line(out.style(ansiDim, "prompt: "+o.prompt))
		}
		last = c.turn(ctx, o.prompt)
		if !o.interactive || errors.Is(last, context.Canceled) || ctx.Err() != nil {
			return last
		}
	}
	if menu {
		c.replayMenu()
	} else {
		out.line(out.style(ansiDim, "model "+model+" · session "+c.o.session+" · /exit to leave"))
	}
	for {
		if env.Terminal {
			out.write(out.style(ansiBold, "> "))
		}
		line, ok := c.lines.read(ctx, env.Interrupt)
		if !ok {
			out.midLine = false
			return last
		}
		line = strings.TrimSpace(line)
		switch line {
		case "":
			continue
		case "/exit", "/quit":
			return last
		}
		if menu {
			sc, ok := c.pickScenario(line)
			if !ok {
				c.replayMenu()
				continue
			}
			c.model = sc.ModelString()
			out.line(out.style(ansiCyan, "▶ scenario "+sc.Name) + out.style(ansiDim, " · prompt: "+sc.Prompt))
			line = sc.Prompt
		}
		last = c.turn(ctx, line)
		if errors.Is(last, context.Canceled) || ctx.Err() != nil {
			return last
		}
	}
}

// replayMenu lists what a replay can play: its recordings answer only
// their own questions, so the prompt offers those.
func (c *chatter) replayMenu() {
	c.out.line(c.out.style(ansiDim, "A replay plays recorded conversations, so it answers only their questions. Type a number to play one, /exit to leave:"))
	for i, sc := range replay.Scenarios() {
		c.out.line(c.out.style(ansiDim, fmt.Sprintf("  %d  %-16s %s", i+1, sc.Name, sc.Prompt)))
	}
	c.out.line(c.out.style(ansiDim, "For answers to your own questions, set a provider key (ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY) and run chat without --replay."))
}

// pickScenario reads a menu choice: a number or a scenario name.
func (c *chatter) pickScenario(line string) (replay.Scenario, bool) {
	all := replay.Scenarios()
	if n, err := strconv.Atoi(line); err == nil && n >= 1 && n <= len(all) {
		return all[n-1], true
	}
	if sc, err := replay.Lookup(strings.TrimPrefix(line, replay.Prefix+":")); err == nil {
		return sc, true
	}
	return replay.Scenario{}, false
}

// chatter runs turns of one chat.
type chatter struct {
	env  *Env
	o    *chatOptions
	tc   *turn.Client
	js   jetstream.JetStream
	subj events.Subjects
	// attach are the files of the next turn's message (--attach: the
	// first).
	attach []string
	out    *Renderer
	model  string
	lines  *lineReader
}

func (c *chatter) request(turnID, prompt string) events.TurnRequest {
	r := events.TurnRequest{
		TurnID: turnID, SessionID: c.o.session, Model: c.model, System: c.o.system,
		Messages: []events.Message{events.UserText(prompt)}, MaxSteps: c.o.maxSteps, MaxTokens: c.o.maxTokens,
		Tools: []string{},
	}
	for t := range strings.SplitSeq(c.o.tools, ",") {
		if t = strings.TrimSpace(t); t != "" {
			r.Tools = append(r.Tools, t)
		}
	}
	if c.o.think > 0 {
		r.Thinking = &events.ThinkingConfig{BudgetTokens: c.o.think}
	}
	return r
}

// turn submits one turn and renders it to its end.
func (c *chatter) turn(ctx context.Context, prompt string) error {
	turnID := nuid.Next()
	req := c.request(turnID, prompt)
	var err error
	if req.Messages, err = attachTo(req.Messages, c.attach); err != nil {
		return err
	}
	c.attach = nil
	if err := req.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if err := uploadLarge(ctx, c.js, req.Messages); err != nil {
		return err
	}
	// Subscribe before submitting: the ordered consumer replays from the
	// first event of the turn whenever it is published; its sub-agents'
	// child turns are followed as it names them.
	f, err := followTree(ctx, c.tc, c.subj, turnID)
	if err != nil {
		return err
	}
	defer f.Stop()
	if err := c.tc.Submit(ctx, &req); err != nil {
		return err
	}
	return c.render(ctx, f, turnID, req.SessionID)
}

// render follows a submitted turn to its end, its sub-agents' child
// turns indented, asking for approvals (a child's too) and cancelling it
// on interrupt.
func (c *chatter) render(ctx context.Context, f *treeFollower, turnID, sessionID string) error {
	out := newTreeRenderer(c.out, c.out.w, c.out.color)
	notice := time.NewTimer(c.o.noticeAfter)
	defer notice.Stop()
	cancelled := false
	var stopWait <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			c.cancel(turnID)
			return ctx.Err()
		case <-c.env.Interrupt:
			if cancelled {
				return fmt.Errorf("%w: interrupted while waiting for turn %s to abort", ErrTurnAborted, turnID)
			}
			cancelled = true
			c.out.line(c.out.style(ansiDim, "^C cancelling turn "+turnID+" (Ctrl-C again to stop waiting)"))
			c.cancel(turnID)
			stopWait = time.After(30 * time.Second)
		case <-stopWait:
			return fmt.Errorf("%w: turn %s did not confirm the cancel", ErrTurnAborted, turnID)
		case <-notice.C:
			c.out.line(c.out.style(ansiDim, "(no events yet for turn "+turnID+": is a turn service running on this NATS server with prefix "+c.o.conn.prefix+"?)"))
		case it := <-f.C():
			notice.Stop()
			r, ok := out.render(it)
			if !ok {
				continue
			}
			if it.Depth > 0 {
				// A child paused for approval: the resume goes to the
				// child's turn; its parent goes on once it ends.
				if r.State == StatePaused {
					if err := c.approve(ctx, it.Turn, r.Paused); err != nil {
						return err
					}
				}
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
				if err := c.approve(ctx, turnID, r.Paused); err != nil {
					return err
				}
			}
		}
	}
}

func (c *chatter) cancel(turnID string) {
	_ = c.tc.Cancel(context.Background(), turnID)
}

// approve asks the person about each pending call and publishes the resume.
func (c *chatter) approve(ctx context.Context, turnID string, p *events.TurnPaused) error {
	decisions := map[string]events.Decision{}
	for _, call := range p.Pending {
		for {
			c.out.write(fmt.Sprintf("approve %s %s? [a]pprove / [d]eny[:reason] / [e]dit: ", call.Name, call.ID))
			line, ok := c.lines.read(ctx, c.env.Interrupt)
			if !ok {
				c.out.line("")
				return fmt.Errorf("no decision for paused call %s: the turn stays paused; settle it with `%s turn resume %s --approve/--deny ...`", call.ID, c.env.command(), turnID)
			}
			if !c.env.Terminal {
				c.out.write(line + "\n")
			}
			d, ok := c.decide(ctx, strings.TrimSpace(line), call)
			if ok {
				decisions[call.ID] = d
				break
			}
		}
	}
	return c.tc.Resume(ctx, &events.ResumeRequest{TurnID: turnID, Decisions: decisions})
}

func (c *chatter) decide(ctx context.Context, line string, call events.ToolCall) (events.Decision, bool) {
	word, reason, _ := strings.Cut(line, ":")
	switch strings.ToLower(strings.TrimSpace(word)) {
	case "a", "approve", "y", "yes":
		return events.Decision{Kind: events.DecisionApprove}, true
	case "d", "deny", "n", "no":
		return events.Decision{Kind: events.DecisionDeny, Reason: strings.TrimSpace(reason)}, true
	case "e", "edit":
		c.out.write("input as JSON [" + compactJSON(call.Input) + "]: ")
		in, ok := c.lines.read(ctx, c.env.Interrupt)
		if !ok {
			return events.Decision{}, false
		}
		if !c.env.Terminal {
			c.out.write(in + "\n")
		}
		in = strings.TrimSpace(in)
		if in == "" {
			in = string(call.Input)
		}
		if !json.Valid([]byte(in)) || !strings.HasPrefix(in, "{") {
			c.out.line(c.out.style(ansiRed, "not a JSON object; try again"))
			return events.Decision{}, false
		}
		return events.Decision{Kind: events.DecisionEdit, Input: json.RawMessage(in)}, true
	}
	c.out.line("please answer a, d (optionally d:reason) or e")
	return events.Decision{}, false
}

// publishEvent publishes a CloudEvent to a JetStream subject with msgID as
// lineReader reads stdin lines in the background so that reading can be
// interrupted.
type lineReader struct {
	ch   chan string
	done chan struct{}
}

func newLineReader(r io.Reader) *lineReader {
	l := &lineReader{ch: make(chan string), done: make(chan struct{})}
	go func() {
		defer close(l.ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case l.ch <- sc.Text():
			case <-l.done:
				return
			}
		}
	}()
	return l
}

// read returns the next line; false at EOF, on interrupt or when ctx ends.
func (l *lineReader) read(ctx context.Context, interrupt <-chan os.Signal) (string, bool) {
	select {
	case s, ok := <-l.ch:
		return s, ok
	case <-interrupt:
		return "", false
	case <-ctx.Done():
		return "", false
	}
}

func (l *lineReader) stop() {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("%w: --log-level %q: want debug, info, warn or error", ErrUsage, s)
	}
	return l, nil
}
