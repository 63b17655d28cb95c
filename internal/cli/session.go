package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/compact"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/turn"
)

const sessionAbout = `Reads a session's transcript: 'session show ID' prints every message of
it, the originals as the turns added them (turn.LoadSession), with each
message's position; --json prints the session as JSON.
'session compact ID' asks a running turn service to compact the session
now (P.session.compact.ID, turn.Client.CompactSession): the projection
its next turn would read is compacted for --model (default: the model of
its last turn) with the service's model table and compaction setting,
and the session keeps the compaction; the originals stay. It prints what
was compacted, the estimated tokens before and after, and the
summarizer's usage; --json prints the compaction.`

func runSessionCmd(ctx context.Context, env *Env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(env.Stderr, "usage: llmworker session show|compact <session_id> [flags]\n%s\n", sessionAbout)
		if len(args) == 0 {
			return fmt.Errorf("%w: session needs a subcommand: show or compact", ErrUsage)
		}
		return nil
	}
	switch args[0] {
	case "show":
		return runSessionShow(ctx, env, args[1:])
	case "compact":
		return runSessionCompact(ctx, env, args[1:])
	}
	return fmt.Errorf("%w: unknown session subcommand %q (want show or compact)", ErrUsage, args[0])
}

func runSessionCompact(ctx context.Context, env *Env, args []string) error {
	var (
		conn    connFlags
		model   string
		asJSON  bool
		timeout time.Duration
	)
	fs := newFlags(env, "session compact", "session compact <session_id> [flags]", sessionAbout)
	conn.register(fs, env)
	fs.StringVar(&model, "model", "", "the model (provider:model) to compact for and summarize with (default: the model of the session's last turn)")
	fs.BoolVar(&asJSON, "json", false, "print the compaction as JSON")
	fs.DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the turn service's answer, its summarizer's calls included")
	id, err := turnArg(flagSet{fs}, args)
	if errors.Is(err, ErrUsage) && strings.Contains(err.Error(), "<turn_id>") {
		return fmt.Errorf("%w: missing <session_id>", ErrUsage)
	}
	if err != nil {
		return err
	}
	if timeout <= 0 {
		return fmt.Errorf("%w: --timeout must be positive, got %s", ErrUsage, timeout)
	}
	cl, err := conn.connect("session compact")
	if err != nil {
		return err
	}
	defer cl.close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	subject := conn.subjects().SessionCompact(id)
	c, err := cl.tc.CompactSession(ctx, id, model)
	switch {
	case err == nil:
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("%w answers %s (a turn service of prefix %s runs in `llmworker up` or cmd/turn)", ErrNoTurnService, subject, conn.prefix)
	case errors.Is(err, turn.ErrNoSession):
		return fmt.Errorf("no session %q in %s (none of its turns completed, or it expired)", id, events.BucketSessions)
	case errors.Is(err, turn.ErrCompactionConflict):
		return fmt.Errorf("session %s is busy: %w; run the command again", id, err)
	case errors.Is(err, compact.ErrOverflow):
		return fmt.Errorf("session %s: nothing left to compact: %w", id, err)
	case errors.Is(err, turn.ErrSessionModel), errors.Is(err, events.ErrInvalid):
		return fmt.Errorf("%w: session %s: %w", ErrUsage, id, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("session %s: no answer from the turn service within --timeout %s; it may still store the compaction (`llmworker session show %s --json` shows it): %w", id, timeout, id, err)
	default:
		return fmt.Errorf("session %s: %w", id, err)
	}
	if asJSON {
		b, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(env.Stdout, "%s\n", b)
		return err
	}
	if c == nil {
		_, err = fmt.Fprintf(env.Stdout, "session %s: nothing to compact\n", id)
		return err
	}
	s := fmt.Sprintf("session %s compacted: positions [0, %d) read as %d messages (%s%s) · ~%d → ~%d tokens",
		id, c.To, len(c.Messages), c.Policy, summarizedBy(c), c.TokensBefore, c.TokensAfter)
	if c.Usage != nil {
		if us := FormatUsage(*c.Usage); us != "" {
			s += " · summarizer " + us
		}
	}
	_, err = fmt.Fprintln(env.Stdout, s)
	return err
}

// summarizedBy names a compaction's summarizer, if it has one.
func summarizedBy(c *events.Compaction) string {
	if c.Model == "" {
		return ""
	}
	return " by " + c.Model
}

func runSessionShow(ctx context.Context, env *Env, args []string) error {
	var (
		conn   connFlags
		asJSON bool
		limit  int
	)
	fs := newFlags(env, "session show", "session show <session_id> [flags]", sessionAbout)
	conn.register(fs, env)
	fs.BoolVar(&asJSON, "json", false, "print the session as JSON (session_id, messages, last_turn, updated)")
	fs.IntVar(&limit, "max-result", 0, "truncate tool inputs and results to this many characters (0 = 300)")
	id, err := turnArg(flagSet{fs}, args)
	if errors.Is(err, ErrUsage) && strings.Contains(err.Error(), "<turn_id>") {
		return fmt.Errorf("%w: missing <session_id>", ErrUsage)
	}
	if err != nil {
		return err
	}
	cl, err := conn.connect("session show")
	if err != nil {
		return err
	}
	defer cl.close()
	s, ok, err := turn.LoadSession(ctx, cl.js, id)
	if err != nil {
		return fmt.Errorf("session %s: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("no session %q in %s (none of its turns completed, or it expired)", id, events.BucketSessions)
	}
	if asJSON {
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(env.Stdout, "%s\n", b)
		return err
	}
	r := NewRenderer(env.Stdout, env.color())
	r.MaxResult = limit
	r.line(r.style(ansiDim, fmt.Sprintf("session %s · %d messages · last turn %s", s.SessionID, len(s.Messages), s.LastTurn)))
	for i, m := range s.Messages {
		r.transcriptMessage(i, m)
	}
	return nil
}

// transcriptMessage prints message i of a transcript: its role, then one
// line per part.
func (r *Renderer) transcriptMessage(i int, m events.Message) {
	r.line(r.style(ansiBold, fmt.Sprintf("[%d] %s", i, m.Role)))
	for _, p := range m.Content {
		switch p.Type {
		case events.PartText:
			r.line("  " + strings.ReplaceAll(p.Text, "\n", "\n  "))
		case events.PartThinking:
			r.line(r.style(ansiDim, "  (thinking) "+Truncate(p.Thinking, r.limit())))
		case events.PartToolUse:
			r.line(r.style(ansiCyan, "  → "+p.Name+" "+p.ID+" ") + Truncate(compactJSON(p.Input), r.limit()))
		case events.PartToolResult:
			s := "  ← " + p.ToolUseID + " "
			if p.IsError {
				s += "(error) "
			}
			r.line(r.style(ansiCyan, s) + Truncate(p.Content, r.limit()))
		default:
			what := string(p.Type) + " " + p.MediaType
			if p.Filename != "" {
				what += " " + p.Filename
			}
			if p.Ref != "" {
				what += " " + p.Ref
			}
			r.line(r.style(ansiDim, "  ["+what+"]"))
		}
	}
}
