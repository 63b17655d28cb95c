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
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/events"
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
	maxSteps, maxTokens, think int
	replay                     bool
	pace                       time.Duration
	noticeAfter                time.Duration
	prompt                     string
	interactive                bool
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
	fs.StringVar(&o.root, "root", "", "embedded mode: directory the read_file/list_dir tools may read")
	fs.StringVar(&o.hooks, "hooks", "", "embedded mode: hookbridge config file (YAML) to serve")
	fs.StringVar(&o.logLevel, "log-level", "error", "embedded mode: log level of the services (debug, info, warn, error)")
	fs.DurationVar(&o.pace, "replay-pace", 4*time.Millisecond, "replay: pause between recorded stream events")
	o.noticeAfter = 5 * time.Second
	if err := parse(fs, args); err != nil {
		return err
	}
	o.prompt = strings.TrimSpace(strings.Join(fs.Args(), " "))
	o.interactive = o.prompt == ""
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
			fmt.Fprint(env.Stderr, missingCredentials())
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
		fmt.Fprint(env.Stderr, missingCredentials())
		return ErrNoCredentials
	}
	out := NewRenderer(env.Stdout, env.color())
	if isReplay {
		sc, err := replay.Lookup(strings.TrimPrefix(model, replay.Prefix+":"))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		out.line(out.style(ansiCyan, "▶ "+replay.Label+" · scenario "+sc.Name+" · tools run for real with demo data"))
		if o.prompt == "" && !env.Terminal {
			o.prompt, o.interactive = sc.Prompt, false
		}
		if o.prompt == sc.Prompt {
			out.line(out.style(ansiDim, "prompt: "+o.prompt))
		}
	}

	var nc *nats.Conn
	if embedded {
		level, err := parseLevel(o.logLevel)
		if err != nil {
			return err
		}
		st, err := StartStack(context.WithoutCancel(ctx), StackConfig{
			Creds: o.conn.creds, Prefix: o.conn.prefix, Root: o.root, HooksFile: o.hooks,
			Replay: isReplay, ReplayPace: o.pace, Getenv: env.Getenv,
			Logger: slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level})),
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
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	c := &chatter{env: env, o: o, nc: nc, js: js, subj: o.conn.subjects(), out: out, model: model}
	c.lines = newLineReader(env.Stdin)
	defer c.lines.stop()
	if !o.interactive {
		return c.turn(ctx, o.prompt)
	}
	if c.o.session == "" {
		c.o.session = "chat-" + nuid.Next()
	}
	out.line(out.style(ansiDim, "model "+model+" · session "+c.o.session+" · /exit to leave"))
	var last error
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
		last = c.turn(ctx, line)
		if errors.Is(last, context.Canceled) || ctx.Err() != nil {
			return last
		}
	}
}

// chatter runs turns of one chat.
type chatter struct {
	env   *Env
	o     *chatOptions
	nc    *nats.Conn
	js    jetstream.JetStream
	subj  events.Subjects
	out   *Renderer
	model string
	lines *lineReader
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
	if err := req.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	// Subscribe before submitting: the ordered consumer replays from the
	// first event of the turn whenever it is published.
	f, err := follow(ctx, c.js, c.subj.EventsOfTurn(turnID))
	if err != nil {
		return err
	}
	defer f.Stop()
	if err := publishEvent(ctx, c.js, c.subj.TurnSubmit(), events.TypeTurnSubmit, turnID, req.SessionID, turnID, req); err != nil {
		return err
	}
	return c.render(ctx, f, turnID, req.SessionID)
}

// render follows a submitted turn to its end, asking for approvals and
// cancelling it on interrupt.
func (c *chatter) render(ctx context.Context, f *follower, turnID, sessionID string) error {
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
			if it.err != nil {
				c.out.line(c.out.style(ansiRed, "(skipped an undecodable event: "+it.err.Error()+")"))
				continue
			}
			r, err := c.out.Render(it.env)
			if err != nil {
				c.out.line(c.out.style(ansiRed, "(skipped "+it.env.Type+": "+err.Error()+")"))
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
	e, err := events.NewEnvelope(events.Source("llmworker", "chat"), events.TypeTurnCancel, map[string]string{"turn_id": turnID})
	if err != nil {
		return
	}
	e.Subject, e.TurnID = turnID, turnID
	m := &nats.Msg{Subject: c.subj.TurnCancel(turnID), Header: nats.Header(e.BinaryHeader()), Data: e.Data}
	_ = c.nc.PublishMsg(m)
	_ = c.nc.Flush()
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
				return fmt.Errorf("no decision for paused call %s: the turn stays paused; settle it with `llmworker turn resume %s --approve/--deny ...`", call.ID, turnID)
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
	r := events.ResumeRequest{TurnID: turnID, Decisions: decisions}
	// A turn may pause more than once: every resume message needs its own
	// de-duplication id.
	return publishEvent(ctx, c.js, c.subj.TurnResume(), events.TypeTurnResume, turnID, "", turnID+"-resume-"+nuid.Next(), r)
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
// Nats-Msg-Id and waits for the stream's ack.
func publishEvent(ctx context.Context, js jetstream.JetStream, subject, typ, turnID, sessionID, msgID string, data any) error {
	e, err := events.NewEnvelope(events.Source("llmworker", "cli"), typ, data)
	if err != nil {
		return err
	}
	e.Subject, e.TurnID, e.SessionID = turnID, turnID, sessionID
	h := nats.Header(e.BinaryHeader())
	h.Set(events.HeaderMsgID, msgID)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = js.PublishMsg(pctx, &nats.Msg{Subject: subject, Header: h, Data: e.Data})
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%w: nothing captures %s (no %s stream; start `llmworker up`, or check --prefix)", ErrNotProvisioned, subject, events.StreamTurns)
	}
	if err != nil {
		return fmt.Errorf("publish %s: %w", subject, err)
	}
	return nil
}

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
