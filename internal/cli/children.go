package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/turn"
)

// treeItem is an event of a followed turn or of one of its sub-agents'
// child turns.
type treeItem struct {
	turn.Item
	// Turn is the turn whose events it is; Depth is 0 for the followed
	// turn, 1 for its children, and so on.
	Turn  string
	Depth int
}

// treeFollower follows a turn and each child turn its events name
// (llmw.tool.child), any depth: one turn.Follower per turn, their events
// merged as they arrive.
type treeFollower struct {
	ctx  context.Context
	tc   *turn.Client
	subj events.Subjects
	ch   chan treeItem
	done chan struct{}

	// root is the followed turn's subject filter, or a session's
	// (followSession): the filter of depth 0.
	root string
	// stored, when set, counts the events stored on a filter: a turn
	// with none is caught up as soon as it is followed (CaughtUp).
	stored func(filter string) (uint64, error)
	// changed is signalled when a turn is caught up: after its item was
	// delivered, or when it has no stored events.
	changed chan struct{}

	mu        sync.Mutex
	stopped   bool
	ended     map[string]chan struct{} // closed when the turn's end was delivered; every turn of the tree has one
	following map[string]bool          // turns whose follower started
	caught    map[string]bool          // turns whose stored events were all delivered
	fs        []*turn.Follower
	wg        sync.WaitGroup
}

// childEndWait bounds how long a parent's word that a child ended waits
// for the child's own end to be delivered first: a follower of its own
// may lag behind the parent's.
const childEndWait = 2 * time.Second

// followTree follows turnID from its first stored event, then live.
func followTree(ctx context.Context, tc *turn.Client, subj events.Subjects, turnID string) (*treeFollower, error) {
	return followTreeOf(ctx, tc, subj, subj.EventsOfTurn(turnID), turnID, nil)
}

// followTreeOf follows the events on filter (a turn's, or a session's
// turns') as depth 0, under the key root, and the child turns they
// name; stored, when set, tells when a turn without events is caught up
// (CaughtUp).
func followTreeOf(ctx context.Context, tc *turn.Client, subj events.Subjects, filter, root string, stored func(string) (uint64, error)) (*treeFollower, error) {
	t := &treeFollower{ctx: ctx, tc: tc, subj: subj, root: filter, stored: stored, ch: make(chan treeItem), done: make(chan struct{}),
		changed: make(chan struct{}, 1), ended: map[string]chan struct{}{}, following: map[string]bool{}, caught: map[string]bool{}}
	if err := t.follow(root, 0); err != nil {
		return nil, err
	}
	return t, nil
}

// CaughtUp reports whether every turn of the tree known so far has
// delivered all the events stored when it was followed (a tail that
// does not follow on ends there). Changed signals a change that no
// item delivers.
func (t *treeFollower) CaughtUp() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.ended {
		if !t.caught[id] {
			return false
		}
	}
	return true
}

// Changed is signalled when CaughtUp may have changed since the last
// item was delivered.
func (t *treeFollower) Changed() <-chan struct{} { return t.changed }

// caughtUp records that turnID delivered its stored events.
func (t *treeFollower) caughtUp(turnID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.caught[turnID] {
		t.caught[turnID] = true
		t.signal()
	}
}

// signal wakes a reader of Changed (t.mu held).
func (t *treeFollower) signal() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// reserve makes turnID a turn of the tree before its follower starts,
// so that CaughtUp waits for it.
func (t *treeFollower) reserve(turnID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended[turnID] == nil {
		t.ended[turnID] = make(chan struct{})
	}
}

// C delivers the events of the tree.
func (t *treeFollower) C() <-chan treeItem { return t.ch }

func (t *treeFollower) follow(turnID string, depth int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped || t.following[turnID] {
		return nil
	}
	filter := t.subj.EventsOfTurn(turnID)
	if depth == 0 {
		filter = t.root
	}
	f, err := t.tc.Follow(t.ctx, filter)
	if err != nil {
		return err
	}
	t.following[turnID] = true
	if t.ended[turnID] == nil {
		t.ended[turnID] = make(chan struct{})
	}
	if t.stored != nil {
		if n, err := t.stored(filter); err == nil && n == 0 {
			t.caught[turnID] = true
			t.signal()
		}
	}
	t.fs = append(t.fs, f)
	t.wg.Add(1)
	go t.forward(f, turnID, depth)
	return nil
}

func (t *treeFollower) forward(f *turn.Follower, turnID string, depth int) {
	defer t.wg.Done()
	send := func(it turn.Item) bool {
		select {
		case t.ch <- treeItem{Item: it, Turn: turnID, Depth: depth}:
			return true
		case <-t.done:
			return false
		}
	}
	for {
		var it turn.Item
		select {
		case it = <-f.C():
		case <-t.done:
			return
		}
		c, named := it.Event.(events.ToolChild)
		named = named && events.ValidToken(c.ChildTurnID)
		end := named && (c.Status == events.ChildCompleted || c.Status == events.ChildFailed || c.Status == events.ChildAborted)
		if end {
			// The child's lines, its end included, come before its
			// parent says it ended.
			if err := t.follow(c.ChildTurnID, depth+1); err != nil && !send(turn.Item{Env: it.Env, Err: err}) {
				return
			}
			if !t.waitEnd(c.ChildTurnID) {
				return
			}
		}
		if named && !end {
			t.reserve(c.ChildTurnID)
		}
		if !send(it) {
			return
		}
		if it.CaughtUp {
			// After the send: a tail that stops once caught up prints
			// this item first.
			t.caughtUp(turnID)
		}
		switch it.Event.(type) {
		case events.TurnCompleted, events.TurnFailed, events.TurnAborted:
			t.mu.Lock()
			if ch := t.ended[turnID]; ch != nil {
				select {
				case <-ch:
				default:
					close(ch)
				}
			}
			t.mu.Unlock()
		}
		if named && !end {
			// After the event that names it: the child's lines follow
			// its parent's.
			if err := t.follow(c.ChildTurnID, depth+1); err != nil && !send(turn.Item{Env: it.Env, Err: err}) {
				return
			}
		}
	}
}

// waitEnd waits until the end of turnID was delivered, at most
// childEndWait; false when the follower stops.
func (t *treeFollower) waitEnd(turnID string) bool {
	t.mu.Lock()
	ch := t.ended[turnID]
	t.mu.Unlock()
	if ch == nil {
		return true
	}
	timer := time.NewTimer(childEndWait)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
	case <-t.done:
		return false
	}
	return true
}

// Stop ends every follower and waits for them.
func (t *treeFollower) Stop() {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	t.stopped = true
	close(t.done)
	fs := t.fs
	t.mu.Unlock()
	t.wg.Wait()
	for _, f := range fs {
		f.Stop()
	}
}

// treeRenderer renders the events of a tree: the followed turn's with
// the renderer it is given, each child turn's with one of its own whose
// lines are indented by its depth ("  │ " each), so that a sub-agent's
// text and calls stand under the call that runs it.
type treeRenderer struct {
	root  *Renderer
	w     io.Writer
	color bool
	turns map[string]*Renderer
	ind   map[string]*indentWriter
}

func newTreeRenderer(root *Renderer, w io.Writer, color bool) *treeRenderer {
	return &treeRenderer{root: root, w: w, color: color, turns: map[string]*Renderer{}, ind: map[string]*indentWriter{}}
}

// render renders one item; ok is false when it was skipped.
func (tr *treeRenderer) render(it treeItem) (Rendered, bool) {
	if it.Depth == 0 {
		return renderItem(tr.root, it.Item)
	}
	r := tr.turns[it.Turn]
	if r == nil {
		iw := &indentWriter{w: tr.w, prefix: strings.Repeat("  │ ", it.Depth)}
		if tr.color {
			iw.prefix = ansiDim + iw.prefix + ansiReset
		}
		r = NewRenderer(iw, tr.color)
		r.MaxResult = tr.root.MaxResult
		tr.turns[it.Turn], tr.ind[it.Turn] = r, iw
	}
	out, ok := renderItem(r, it.Item)
	if out.State.Terminal() {
		tr.ind[it.Turn].flush()
	}
	return out, ok
}

// indentWriter writes whole lines to w, each after prefix: the lines of
// turns that run at once do not mix within a line.
type indentWriter struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func (iw *indentWriter) Write(p []byte) (int, error) {
	iw.buf = append(iw.buf, p...)
	for {
		i := bytes.IndexByte(iw.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := append([]byte(iw.prefix), iw.buf[:i+1]...)
		iw.buf = iw.buf[i+1:]
		if _, err := iw.w.Write(line); err != nil {
			return len(p), err
		}
	}
}

// flush writes a last line that has no newline yet.
func (iw *indentWriter) flush() {
	if len(iw.buf) > 0 {
		_, _ = iw.Write([]byte("\n"))
	}
}
