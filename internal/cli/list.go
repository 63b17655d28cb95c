package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natsrt"
	"github.com/llmworker/llmworker/pkg/remotehook"
)

func runTools(ctx context.Context, env *Env, args []string) error {
	var (
		conn connFlags
		long bool
	)
	fs := newFlags(env, "tools", "tools [flags]", "Lists the tool catalog (KV LLMW_TOOLS): every tool a toolexec replica hosts, with its description.")
	conn.register(fs, env)
	fs.BoolVar(&long, "schema", false, "also print each tool's input schema")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: tools takes no arguments, got %q", ErrUsage, fs.Args())
	}
	cl, err := conn.connect("tools")
	if err != nil {
		return err
	}
	defer cl.close()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cat, err := natsrt.OpenCatalog(lctx, cl.js)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("%w: no bucket %s", ErrNotProvisioned, events.BucketTools)
	}
	if err != nil {
		return err
	}
	entries, err := cat.List(lctx)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		fmt.Fprintln(env.Stdout, "no tools in the catalog (is a toolexec running?)")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tTIMEOUT\tVERSION\tDESCRIPTION")
	for _, e := range entries {
		timeout := "-"
		if e.TimeoutMS > 0 {
			timeout = (time.Duration(e.TimeoutMS) * time.Millisecond).String()
		}
		ver := e.Version
		if ver == "" {
			ver = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, timeout, ver, Truncate(e.Description, 100))
		if long {
			fmt.Fprintf(tw, "\t\t\tschema: %s\n", compactJSON(e.InputSchema))
		}
	}
	return tw.Flush()
}

func runHooks(ctx context.Context, env *Env, args []string) error {
	var conn connFlags
	fs := newFlags(env, "hooks", "hooks [flags]", "Lists the registered hooks (KV LLMW_HOOKS) in chain order: per hook point, by priority, then registration.")
	conn.register(fs, env)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: hooks takes no arguments, got %q", ErrUsage, fs.Args())
	}
	cl, err := conn.connect("hooks")
	if err != nil {
		return err
	}
	defer cl.close()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	kv, err := remotehook.Bucket(lctx, cl.js)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("%w: no bucket %s", ErrNotProvisioned, events.BucketHooks)
	}
	if err != nil {
		return err
	}
	entries, err := remotehook.List(lctx, kv)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		fmt.Fprintln(env.Stdout, "no hooks registered")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tEVENT\tHOOK\tPRIORITY\tMATCHER\tSUBJECT\tTIMEOUT\tFAILURE")
	for i, e := range entries {
		matcher := e.Matcher
		if matcher == "" {
			matcher = "*"
		}
		timeout := "default"
		if e.TimeoutMS > 0 {
			timeout = (time.Duration(e.TimeoutMS) * time.Millisecond).String()
		}
		failure := string(e.Failure)
		if failure == "" {
			failure = string(events.FailClosed)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", i+1, e.Event, e.Name, e.Priority, matcher, e.Subject, timeout, failure)
	}
	return tw.Flush()
}

const turnAbout = `
turn cancel <turn_id>
    cancels a running or paused turn (it ends as aborted).
turn resume <turn_id> [--approve ID]... [--deny ID[=reason]]... [--edit ID='{"json":1}']... [--approve-all]
    settles a paused turn: approved calls run, denied calls reach the model
    as error results, edited calls run with the given input.`

func runTurnCmd(ctx context.Context, env *Env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(env.Stderr, "usage: llmworker turn cancel|resume <turn_id> [flags]\n%s\n", turnAbout)
		if len(args) == 0 {
			return fmt.Errorf("%w: turn needs a subcommand: cancel or resume", ErrUsage)
		}
		return nil
	}
	switch args[0] {
	case "cancel":
		return runTurnCancel(ctx, env, args[1:])
	case "resume":
		return runTurnResume(ctx, env, args[1:])
	}
	return fmt.Errorf("%w: unknown turn subcommand %q (want cancel or resume)", ErrUsage, args[0])
}

// turnArg takes the turn id from the arguments, before or after the flags.
func turnArg(fs interface {
	Parse([]string) error
	Args() []string
}, args []string) (string, error) {
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	rest := fs.Args()
	if id == "" && len(rest) > 0 {
		id, rest = rest[0], rest[1:]
	}
	if id == "" {
		return "", fmt.Errorf("%w: missing <turn_id>", ErrUsage)
	}
	if len(rest) > 0 {
		return "", fmt.Errorf("%w: unexpected arguments %q", ErrUsage, rest)
	}
	if !events.ValidToken(id) {
		return "", fmt.Errorf("%w: %q is not a turn id", ErrUsage, id)
	}
	return id, nil
}

func runTurnCancel(ctx context.Context, env *Env, args []string) error {
	var conn connFlags
	fs := newFlags(env, "turn cancel", "turn cancel <turn_id> [flags]", "Cancels a running or paused turn; it ends as llmw.turn.aborted.")
	conn.register(fs, env)
	id, err := turnArg(flagSet{fs}, args)
	if err != nil {
		return err
	}
	cl, err := conn.connect("turn cancel")
	if err != nil {
		return err
	}
	defer cl.close()
	e, err := events.NewEnvelope(events.Source("llmworker", "cli"), events.TypeTurnCancel, map[string]string{"turn_id": id})
	if err != nil {
		return err
	}
	e.Subject, e.TurnID = id, id
	if err := cl.nc.PublishMsg(natsMsg(conn.subjects().TurnCancel(id), e)); err != nil {
		return err
	}
	if err := cl.nc.FlushWithContext(ctx); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "cancel sent for turn %s\n", id)
	return nil
}

func runTurnResume(ctx context.Context, env *Env, args []string) error {
	var (
		conn                   connFlags
		approve, deny, editArg stringList
		approveAll             bool
	)
	fs := newFlags(env, "turn resume", "turn resume <turn_id> [--approve ID]... [--deny ID[=reason]]... [--edit ID='{...}']... [--approve-all]",
		"Settles the calls of a paused turn and resumes it (llmw.turn.resume).")
	conn.register(fs, env)
	fs.Var(&approve, "approve", "approve the call with this id (repeatable)")
	fs.Var(&deny, "deny", "deny the call: ID or ID=reason (repeatable)")
	fs.Var(&editArg, "edit", "run the call with this input: ID='{\"json\":1}' (repeatable)")
	fs.BoolVar(&approveAll, "approve-all", false, "approve every pending call not otherwise decided")
	id, err := turnArg(flagSet{fs}, args)
	if err != nil {
		return err
	}
	decisions := map[string]events.Decision{}
	set := func(call string, d events.Decision) error {
		if call == "" {
			return fmt.Errorf("%w: empty call id", ErrUsage)
		}
		if _, dup := decisions[call]; dup {
			return fmt.Errorf("%w: call %s decided twice", ErrUsage, call)
		}
		decisions[call] = d
		return nil
	}
	for _, c := range approve {
		if err := set(c, events.Decision{Kind: events.DecisionApprove}); err != nil {
			return err
		}
	}
	for _, c := range deny {
		call, reason, _ := strings.Cut(c, "=")
		if err := set(call, events.Decision{Kind: events.DecisionDeny, Reason: reason}); err != nil {
			return err
		}
	}
	for _, c := range editArg {
		call, in, ok := strings.Cut(c, "=")
		in = strings.TrimSpace(in)
		if !ok || !strings.HasPrefix(in, "{") || !jsonValid(in) {
			return fmt.Errorf("%w: --edit %q: want ID='{\"field\":...}' with a JSON object", ErrUsage, c)
		}
		if err := set(call, events.Decision{Kind: events.DecisionEdit, Input: []byte(in)}); err != nil {
			return err
		}
	}
	if len(decisions) == 0 && !approveAll {
		return fmt.Errorf("%w: nothing to resume with: give --approve, --deny, --edit or --approve-all", ErrUsage)
	}
	cl, err := conn.connect("turn resume")
	if err != nil {
		return err
	}
	defer cl.close()
	if approveAll {
		pending, err := pendingCalls(ctx, cl, conn.subjects(), id)
		if err != nil {
			return err
		}
		for _, c := range pending {
			if _, ok := decisions[c]; !ok {
				decisions[c] = events.Decision{Kind: events.DecisionApprove}
			}
		}
	}
	req := events.ResumeRequest{TurnID: id, Decisions: decisions}
	if err := publishEvent(ctx, cl.js, conn.subjects().TurnResume(), events.TypeTurnResume, id, "", id+"-resume-"+events.NewID(), req); err != nil {
		return err
	}
	var parts []string
	for c, d := range decisions {
		parts = append(parts, c+"="+string(d.Kind))
	}
	fmt.Fprintf(env.Stdout, "resume sent for turn %s: %s\n", id, strings.Join(sorted(parts), " "))
	return nil
}

// pendingCalls reads the calls of the turn's last llmw.turn.paused event.
func pendingCalls(ctx context.Context, cl *client, subj events.Subjects, turnID string) ([]string, error) {
	st, err := cl.js.Stream(ctx, events.StreamEvents)
	if err != nil {
		return nil, fmt.Errorf("%w: stream %s: %v", ErrNotProvisioned, events.StreamEvents, err)
	}
	m, err := st.GetLastMsgForSubject(ctx, subj.Events(events.NoSession, turnID, events.ChannelTurn))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// The turn may have a session: search every session.
		m, err = lastTurnEventAnySession(ctx, cl, subj, turnID)
	}
	if err != nil {
		return nil, fmt.Errorf("find the pause of turn %s: %w", turnID, err)
	}
	e, err := events.DecodeEnvelope(m.Header, m.Data)
	if err != nil {
		return nil, err
	}
	if e.Type != events.TypeTurnPaused {
		return nil, fmt.Errorf("turn %s is not paused (its last turn event is %s)", turnID, e.Type)
	}
	p, err := events.DecodeData[events.TurnPaused](e)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(p.Pending))
	for _, c := range p.Pending {
		ids = append(ids, c.ID)
	}
	return ids, nil
}

func lastTurnEventAnySession(ctx context.Context, cl *client, subj events.Subjects, turnID string) (*jetstream.RawStreamMsg, error) {
	st, err := cl.js.Stream(ctx, events.StreamEvents)
	if err != nil {
		return nil, err
	}
	filter := strings.Replace(subj.EventsOfTurn(turnID), ".>", "."+string(events.ChannelTurn), 1)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, err
	}
	for s := range info.State.Subjects {
		return st.GetLastMsgForSubject(ctx, s)
	}
	return nil, fmt.Errorf("no events of turn %s (it never ran, or LLMW_EVENTS expired them)", turnID)
}
