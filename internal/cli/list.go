package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/mcp"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

func runTools(ctx context.Context, env *Env, args []string) error {
	var (
		conn connFlags
		long bool
	)
	fs := newFlags(env, "tools", "tools [flags] [name...]", "Lists the tool catalog (KV LLMW_TOOLS): every tool a toolexec replica hosts, with its description. With names, shows those tools whole: description, input schema and call subject.")
	conn.register(fs, env)
	fs.BoolVar(&long, "schema", false, "also print each tool's input schema")
	if err := parse(fs, args); err != nil {
		return err
	}
	names := fs.Args()
	cl, err := conn.connect("tools")
	if err != nil {
		return err
	}
	defer cl.close()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cat, err := toolexec.OpenCatalog(lctx, cl.js)
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
	if len(names) > 0 {
		return showTools(env, conn.subjects(), entries, names)
	}
	cut := false
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
		desc := Truncate(e.Description, 100)
		cut = cut || desc != e.Description
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, timeout, ver, desc)
		if long {
			fmt.Fprintf(tw, "\t\t\tschema: %s\n", compactJSON(e.InputSchema))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if cut {
		fmt.Fprintln(env.Stdout, "(descriptions cut at 100 characters: `llmworker tools <name>` shows a tool whole)")
	}
	return nil
}

// showTools prints the named tools whole.
func showTools(env *Env, subj events.Subjects, entries []events.ToolCatalogEntry, names []string) error {
	byName := map[string]events.ToolCatalogEntry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	var missing []string
	for i, n := range names {
		e, ok := byName[n]
		if !ok {
			missing = append(missing, n)
			continue
		}
		if i > 0 {
			fmt.Fprintln(env.Stdout)
		}
		fmt.Fprintf(env.Stdout, "%s\n  description: %s\n", e.Name, e.Description)
		if e.TimeoutMS > 0 {
			fmt.Fprintf(env.Stdout, "  timeout:     %s\n", time.Duration(e.TimeoutMS)*time.Millisecond)
		}
		if e.Version != "" {
			fmt.Fprintf(env.Stdout, "  version:     %s\n", e.Version)
		}
		fmt.Fprintf(env.Stdout, "  calls:       %s\n", subj.ToolCall(e.Name))
		var schema bytes.Buffer
		if json.Indent(&schema, e.InputSchema, "  ", "  ") == nil {
			fmt.Fprintf(env.Stdout, "  input schema:\n  %s\n", schema.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: no tool %s in the catalog", ErrUsage, strings.Join(missing, ", "))
	}
	return nil
}

func runHooks(ctx context.Context, env *Env, args []string) error {
	var conn connFlags
	fs := newFlags(env, "hooks", "hooks [flags]", "Lists the registered hooks (KV LLMW_HOOKS) in chain order: per hook point, by priority, then registration; a registration that is not valid is listed as broken, with what it does to turns and why.")
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
	kv, err := hooknats.Bucket(lctx, cl.js)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("%w: no bucket %s", ErrNotProvisioned, events.BucketHooks)
	}
	if err != nil {
		return err
	}
	entries, err := hooknats.List(lctx, kv)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		fmt.Fprintln(env.Stdout, "no hooks registered")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tEVENT\tHOOK\tPRIORITY\tMATCHER\tSUBJECT\tTIMEOUT\tFAILURE\tSTATUS")
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
		status := "ok"
		if e.Err != nil {
			// What the turns do with it, then why: the reason names the field.
			b := hooknats.BrokenOf(e.HookRegistration, e.Err)
			failure = string(b.Failure)
			status = "broken: " + b.Effect() + ": " + e.Err.Error()
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", i+1, orDash(string(e.Event)), e.Name, e.Priority, matcher,
			orDash(e.Subject), timeout, failure, status)
	}
	return tw.Flush()
}

// orDash shows an empty field of a broken registration as "-", so that the
// columns stay in place.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

const turnAbout = `
turn submit [--file req.json|-] [--prompt TEXT]... [--follow]
    publishes a turn request and prints its turn id.
turn cancel <turn_id>
    cancels a running or paused turn (it ends as aborted).
turn resume <turn_id> [--approve ID]... [--deny ID[=reason]]... [--edit ID='{"json":1}']... [--approve-all]
    settles a paused turn: approved calls run, denied calls reach the model
    as error results, edited calls run with the given input.`

func runTurnCmd(ctx context.Context, env *Env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(env.Stderr, "usage: llmworker turn submit|cancel|resume [flags]\n%s\n", turnAbout)
		if len(args) == 0 {
			return fmt.Errorf("%w: turn needs a subcommand: submit, cancel or resume", ErrUsage)
		}
		return nil
	}
	switch args[0] {
	case "submit":
		return runTurnSubmit(ctx, env, args[1:])
	case "cancel":
		return runTurnCancel(ctx, env, args[1:])
	case "resume":
		return runTurnResume(ctx, env, args[1:])
	}
	return fmt.Errorf("%w: unknown turn subcommand %q (want submit, cancel or resume)", ErrUsage, args[0])
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
	var (
		conn connFlags
		wait time.Duration
	)
	fs := newFlags(env, "turn cancel", "turn cancel <turn_id> [flags]", "Cancels a running or paused turn; it ends as llmw.turn.aborted. Waits for that (or for the answer that there is no such turn) up to --wait.")
	conn.register(fs, env)
	fs.DurationVar(&wait, "wait", 10*time.Second, "how long to wait for the turn's llmw.turn.aborted (0 = do not wait)")
	id, err := turnArg(flagSet{fs}, args)
	if err != nil {
		return err
	}
	cl, err := conn.connect("turn cancel")
	if err != nil {
		return err
	}
	defer cl.close()
	// Both answers are live only: subscribe before the cancel goes out.
	rejected, stopRejected, err := cl.tc.Rejections(id)
	if err != nil {
		return err
	}
	defer stopRejected()
	ended := make(chan *nats.Msg, 16)
	sub, err := cl.nc.ChanSubscribe(strings.TrimSuffix(conn.subjects().EventsOfTurn(id), ">")+string(events.ChannelTurn), ended)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := cl.tc.Cancel(ctx, id); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "cancel sent for turn %s\n", id)
	if wait <= 0 {
		return nil
	}
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			fmt.Fprintf(env.Stdout, "no answer within %s: the turn may have ended before the cancel reached it\n", wait)
			return nil
		case rj := <-rejected:
			return fmt.Errorf("%w: %s (%s)", ErrTurnRejected, rj.Reason, rj.Code)
		case m := <-ended:
			e, err := events.DecodeEnvelope(m.Header, m.Data)
			if err != nil || e.Type != events.TypeTurnAborted {
				continue
			}
			d, _ := events.DecodeData[events.TurnEnded](e)
			fmt.Fprintf(env.Stdout, "turn %s aborted: %s\n", id, d.Reason)
			return nil
		}
	}
}

func runTurnResume(ctx context.Context, env *Env, args []string) error {
	var (
		conn                   connFlags
		approve, deny, editArg stringList
		approveAll             bool
	)
	fs := newFlags(env, "turn resume", "turn resume <turn_id> [--approve CALL]... [--deny CALL[=reason]]... [--edit CALL='{...}']... [--approve-all]",
		"Settles the calls of a paused turn and resumes it (llmw.turn.resume). CALL is a pending call's id, a unique prefix of it, or its position (1 = the first pending call).")
	conn.register(fs, env)
	fs.Var(&approve, "approve", "approve the call: id, unique id prefix or position (repeatable)")
	fs.Var(&deny, "deny", "deny the call: CALL or CALL=reason (repeatable)")
	fs.Var(&editArg, "edit", "run the call with this input: CALL='{\"json\":1}' (repeatable)")
	fs.BoolVar(&approveAll, "approve-all", false, "approve every pending call not otherwise decided")
	id, err := turnArg(flagSet{fs}, args)
	if err != nil {
		return err
	}
	type choice struct {
		ref string
		d   events.Decision
	}
	var choices []choice
	for _, c := range approve {
		choices = append(choices, choice{c, events.Decision{Kind: events.DecisionApprove}})
	}
	for _, c := range deny {
		call, reason, _ := strings.Cut(c, "=")
		choices = append(choices, choice{call, events.Decision{Kind: events.DecisionDeny, Reason: reason}})
	}
	for _, c := range editArg {
		call, in, ok := strings.Cut(c, "=")
		in = strings.TrimSpace(in)
		if !ok || !strings.HasPrefix(in, "{") || !jsonValid(in) {
			return fmt.Errorf("%w: --edit %q: want CALL='{\"field\":...}' with a JSON object", ErrUsage, c)
		}
		choices = append(choices, choice{call, events.Decision{Kind: events.DecisionEdit, Input: []byte(in)}})
	}
	if len(choices) == 0 && !approveAll {
		return fmt.Errorf("%w: nothing to resume with: give --approve, --deny, --edit or --approve-all", ErrUsage)
	}
	seen := map[string]bool{}
	for _, c := range choices {
		if c.ref == "" {
			return fmt.Errorf("%w: empty call reference", ErrUsage)
		}
		if seen[c.ref] {
			return fmt.Errorf("%w: call %s decided twice", ErrUsage, c.ref)
		}
		seen[c.ref] = true
	}
	cl, err := conn.connect("turn resume")
	if err != nil {
		return err
	}
	defer cl.close()
	// The pause says which calls wait: a turn that does not exist or is not
	// paused is reported here, not by a resume that nothing answers.
	pending, source, err := pendingCalls(ctx, cl, conn.subjects(), id)
	if err != nil {
		return err
	}
	decisions := map[string]events.Decision{}
	for _, c := range choices {
		call, err := resolveCall(c.ref, pending)
		if err != nil {
			return fmt.Errorf("%w: turn %s: %v", ErrUsage, id, err)
		}
		if _, dup := decisions[call]; dup {
			return fmt.Errorf("%w: call %s decided twice", ErrUsage, call)
		}
		decisions[call] = c.d
	}
	if approveAll {
		for _, c := range pending {
			if _, ok := decisions[c]; !ok {
				decisions[c] = events.Decision{Kind: events.DecisionApprove}
			}
		}
	}
	req := events.ResumeRequest{TurnID: id, Decisions: decisions}
	if mcp.PausedByGateway(source) {
		// A call paused in `llmworker mcp`: its gateway holds it, not the
		// turn service, and says whether it took the resume.
		if err := mcp.Resume(ctx, cl.nc, conn.prefix, events.Source("llmworker", "cli"), req, 5*time.Second); err != nil {
			return err
		}
	} else if err := cl.tc.Resume(ctx, &req); err != nil {
		return err
	}
	var parts []string
	for c, d := range decisions {
		parts = append(parts, c+"="+string(d.Kind))
	}
	fmt.Fprintf(env.Stdout, "resume sent for turn %s: %s\n", id, strings.Join(sorted(parts), " "))
	return nil
}

// resolveCall finds the pending call ref names: its id, its 1-based
// position among the pending calls, or a prefix of exactly one id. Call ids
// are long (provider ids plus the turn's suffix); nobody types them whole.
func resolveCall(ref string, pending []string) (string, error) {
	if ref == "" {
		return "", errors.New("empty call reference")
	}
	if slices.Contains(pending, ref) {
		return ref, nil
	}
	if n, err := strconv.Atoi(ref); err == nil {
		if n >= 1 && n <= len(pending) {
			return pending[n-1], nil
		}
		return "", fmt.Errorf("call %d: the turn has %d pending call(s)", n, len(pending))
	}
	var match []string
	for _, id := range pending {
		if strings.HasPrefix(id, ref) {
			match = append(match, id)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return "", fmt.Errorf("no pending call is %q or starts with it (pending: %s)", ref, strings.Join(pending, ", "))
	}
	return "", fmt.Errorf("%q starts %d pending calls (%s): give more of the id", ref, len(match), strings.Join(match, ", "))
}

// pendingCalls reads the calls of the turn's last llmw.turn.paused event
// and the event's source (who paused it).
func pendingCalls(ctx context.Context, cl *client, subj events.Subjects, turnID string) (calls []string, source string, err error) {
	st, err := cl.js.Stream(ctx, events.StreamEvents)
	if err != nil {
		return nil, "", fmt.Errorf("%w: stream %s: %v", ErrNotProvisioned, events.StreamEvents, err)
	}
	m, err := st.GetLastMsgForSubject(ctx, subj.Events(events.NoSession, turnID, events.ChannelTurn))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// The turn may have a session: search every session.
		m, err = lastTurnEventAnySession(ctx, cl, subj, turnID)
	}
	if err != nil {
		return nil, "", fmt.Errorf("find the pause of turn %s: %w", turnID, err)
	}
	e, err := events.DecodeEnvelope(m.Header, m.Data)
	if err != nil {
		return nil, "", err
	}
	if e.Type != events.TypeTurnPaused {
		return nil, "", fmt.Errorf("turn %s is not paused (its last turn event is %s)", turnID, e.Type)
	}
	p, err := events.DecodeData[events.TurnPaused](e)
	if err != nil {
		return nil, "", err
	}
	ids := make([]string, 0, len(p.Pending))
	for _, c := range p.Pending {
		ids = append(ids, c.ID)
	}
	return ids, e.Source, nil
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
