package cli

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
)

const tailAbout = `
Follows worker events, replaying from the start of what LLMW_EVENTS still
holds, and renders them like chat. --turn and --session show the child
turns of their sub-agents too, any depth, indented under the calls that
run them. --turn stops at the end of that turn; otherwise tail follows
until Ctrl-C (or, with --follow=false, until it has caught up, the
children included).`

func runTail(ctx context.Context, env *Env, args []string) error {
	var (
		conn          connFlags
		session, turn string
		followOn      bool
	)
	fs := newFlags(env, "tail", "tail [--session S | --turn T] [flags]", tailAbout)
	conn.register(fs, env)
	fs.StringVar(&session, "session", "", "follow the turns of this session")
	fs.StringVar(&turn, "turn", "", "follow this turn (stops when it ends)")
	fs.BoolVar(&followOn, "follow", true, "keep following new events (false: exit once caught up)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: tail takes no arguments (use --session or --turn), got %q", ErrUsage, fs.Args())
	}
	if session != "" && turn != "" {
		return fmt.Errorf("%w: give --session or --turn, not both", ErrUsage)
	}
	for _, v := range []struct{ name, val string }{{"session", session}, {"turn", turn}} {
		if v.val != "" && !events.ValidToken(v.val) {
			return fmt.Errorf("%w: --%s %q is not a valid id (no '.', '*', '>' or spaces)", ErrUsage, v.name, v.val)
		}
	}
	subj := conn.subjects()
	filter := subj.EventsAll()
	switch {
	case turn != "":
		filter = subj.EventsOfTurn(turn)
	case session != "":
		filter = subj.EventsOfSession(session)
	}
	cl, err := conn.connect("tail")
	if err != nil {
		return err
	}
	defer cl.close()
	if !followOn {
		// Nothing stored at all: there is nothing to catch up with.
		if n, err := storedCount(ctx, cl, filter); err != nil {
			return err
		} else if n == 0 {
			fmt.Fprintln(env.Stderr, "no events stored for", filter)
			return nil
		}
	}
	switch {
	case turn != "":
		return tailTree(ctx, env, cl, subj, filter, turn, false, followOn)
	case session != "":
		// The session's turns are depth 0; "session:" keeps the key apart
		// from any turn id.
		return tailTree(ctx, env, cl, subj, filter, "session:"+session, true, followOn)
	}
	f, err := cl.tc.Follow(ctx, filter)
	if err != nil {
		return err
	}
	defer f.Stop()
	out := NewRenderer(env.Stdout, env.color())
	out.Headers = turn == ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-env.Interrupt:
			return nil
		case it := <-f.C():
			if r, ok := renderItem(out, it); ok && turn != "" && r.State.Terminal() {
				return nil
			}
			if !followOn && it.CaughtUp {
				return nil
			}
		}
	}
}

// storedCount returns how many stored events match filter.
func storedCount(ctx context.Context, cl *client, filter string) (uint64, error) {
	st, err := cl.js.Stream(ctx, events.StreamEvents)
	if err != nil {
		return 0, fmt.Errorf("%w: stream %s: %v", ErrNotProvisioned, events.StreamEvents, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
}

// tailTree follows the events on filter (a turn's, or a session's turns'
// with headers) and the child turns of their sub-agents, any depth,
// indented under the calls that run them: a turn to its end, a session
// until Ctrl-C; with followOn false, until every turn of the tree has
// caught up.
func tailTree(ctx context.Context, env *Env, cl *client, subj events.Subjects, filter, root string, headers, followOn bool) error {
	var stored func(string) (uint64, error)
	if !followOn {
		stored = func(f string) (uint64, error) { return storedCount(ctx, cl, f) }
	}
	f, err := followTreeOf(ctx, cl.tc, subj, filter, root, stored)
	if err != nil {
		return err
	}
	defer f.Stop()
	top := NewRenderer(env.Stdout, env.color())
	top.Headers = headers
	out := newTreeRenderer(top, env.Stdout, env.color())
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-env.Interrupt:
			return nil
		case <-f.Changed():
		case it := <-f.C():
			if r, ok := out.render(it); ok && !headers && it.Depth == 0 && r.State.Terminal() {
				return nil
			}
		}
		if !followOn && f.CaughtUp() {
			return nil
		}
	}
}
