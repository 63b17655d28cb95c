package turn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// A sub-agent call is a child turn (docs/protocol.md §5, "Sub-agents";
// docs/architecture.md, "Sub-agents"). A turn of an agent whose
// definition lists agents offers each as a tool (subAgentTool); a call
// submits a child turn through P.turn.submit, with an id derived from
// the parent's turn id and the call id, and waits for the child's state
// in LLMW_TURN_STATE to end. The parent's checkpoint lists the child
// (State.Children). A replica that continues the parent runs the call
// again: the submit, the same data under the same id, is a duplicate
// the child's turn answers as its own (actDuplicate), and the wait finds
// the child's state as it stands, ended or not. The call's result is
// read from the child's terminal event.

// ChildRef is a child turn a turn's checkpoint waits for: the sub-agent
// call that runs it.
type ChildRef struct {
	CallID string `json:"call_id"`
	TurnID string `json:"turn_id"`
	// Agent is the sub-agent, NAME@REV.
	Agent string `json:"agent"`
	// Abandon: the child runs on when this turn is cancelled
	// (on_parent_cancel "abandon").
	Abandon bool `json:"abandon,omitempty"`
}

// ChildTurnID is the turn id of the child turn that the call callID of
// turn parentID runs: the same for every run of the call, so that a
// parent continued on another replica submits the child it submitted
// before. It is a subject token of 38 characters.
func ChildTurnID(parentID, callID string) string {
	sum := sha256.Sum256([]byte(parentID + "\x00" + callID))
	return "child-" + hex.EncodeToString(sum[:16])
}

// defaultSubAgentInput is the input of a sub-agent that declares no
// input_schema.
var defaultSubAgentInput = json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string","description":"The task for the agent, with everything it needs to know: it sees nothing else of this conversation."}},"required":["prompt"],"additionalProperties":false}`)

// subAgentTools are the tools of the run's pinned sub-agents
// (State.SubAgents) that no other tool's name takes.
func (t *turnRun) subAgentTools(others []tool.Tool) []tool.Tool {
	if len(t.base.SubAgents) == 0 {
		return others
	}
	taken := map[string]bool{}
	for _, o := range others {
		taken[o.Name()] = true
	}
	out := others
	for _, ref := range t.base.SubAgents {
		name, _, err := events.ParseAgentRef(ref)
		if err != nil || taken[name] {
			continue
		}
		st := &subAgentTool{t: t, ref: ref, name: name, def: events.AgentDefinition{Name: name}}
		switch a, err := t.s.resolvePinned(ref); {
		case err == nil:
			st.def = a.AgentDefinition
		case unavailable(err):
			// Without its definition the tool would have the wrong input
			// schema and description: the run is left to a replica that
			// reads it (its worker starts cancelled and says nothing).
			t.s.log.Warn("turn: a pinned sub-agent cannot be read; the turn is handed off", "turn_id", t.id, "agent", ref, "err", err)
			t.handOff(err)
		default:
			t.s.log.Warn("turn: read a pinned sub-agent", "turn_id", t.id, "agent", ref, "err", err)
		}
		taken[name] = true
		out = append(out, st)
		t.children.mu.Lock()
		if t.children.subAgents == nil {
			t.children.subAgents = map[string]*subAgentTool{}
		}
		t.children.subAgents[name] = st
		t.children.mu.Unlock()
	}
	return out
}

// resolvePinned reads a pinned sub-agent's definition, retried (retrier)
// while the registry's stream cannot answer.
func (s *Service) resolvePinned(ref string) (agents.Agent, error) {
	r := s.retrier()
	for {
		ctx, cancel := kvContext(s.root)
		a, err := s.registry.Resolve(ctx, ref)
		cancel()
		if f, ok := beforeResolvePinned.load(); ok {
			if ferr := f(ref); ferr != nil {
				a, err = agents.Agent{}, ferr
			}
		}
		if err == nil || !unavailable(err) || !r.again(s.root) {
			return a, err
		}
	}
}

// subAgentOf is the sub-agent tool named name, if the run offers one.
func (t *turnRun) subAgentOf(name string) (ref string, abandon, ok bool) {
	t.children.mu.Lock()
	defer t.children.mu.Unlock()
	st := t.children.subAgents[name]
	if st == nil {
		return "", false, false
	}
	return st.ref, st.def.OnParentCancel == events.OnParentCancelAbandon, true
}

// subAgentTool is a sub-agent offered to the parent's model.
type subAgentTool struct {
	t    *turnRun
	ref  string // NAME@REV
	name string
	def  events.AgentDefinition
}

var _ tool.ContentTool = (*subAgentTool)(nil)

func (a *subAgentTool) Name() string { return a.name }

func (a *subAgentTool) Description() string {
	if a.def.Description != "" {
		return a.def.Description
	}
	return "Hands a task to the agent " + a.name + " and returns its answer."
}

func (a *subAgentTool) InputSchema() json.RawMessage {
	if len(a.def.InputSchema) > 0 {
		return a.def.InputSchema
	}
	return defaultSubAgentInput
}

// Execute runs the call as a child turn (turnRun.runChild) and returns
// the text of its answer.
func (a *subAgentTool) Execute(ctx context.Context, input json.RawMessage) (string, error) {
	text, _, err := a.ExecuteContent(ctx, input)
	return text, err
}

// ExecuteContent implements tool.ContentTool: the child's answer with
// the images and files of its last assistant message (a remote agent's
// artifacts), which the executor puts in the call's tool_result as a
// tool's parts.
func (a *subAgentTool) ExecuteContent(ctx context.Context, input json.RawMessage) (string, tool.Content, error) {
	c, ok := tool.CallFrom(ctx)
	if !ok {
		return "", nil, errors.New("a sub-agent runs as a tool call of a turn")
	}
	return a.t.runChild(ctx, a, c, input)
}

// childPrompt is the child turn's first message: the prompt of an input
// {"prompt": …}, else the input as it is (an input_schema's object).
func (a *subAgentTool) childPrompt(input json.RawMessage) (string, error) {
	if len(a.def.InputSchema) > 0 {
		return string(input), nil
	}
	var in struct {
		Prompt string `json:"prompt"`
	}
	if err := json.Unmarshal(input, &in); err != nil || in.Prompt == "" {
		return "", fmt.Errorf(`%w: the input must be {"prompt": "<the task>"} with a prompt that is not empty`, tool.ErrInvalidArgument)
	}
	return in.Prompt, nil
}

// ErrSubAgentLimit is the error of a sub-agent call past Config.MaxDepth
// or Config.MaxChildren: the call's result says so, and no child starts.
var ErrSubAgentLimit = errors.New("sub-agent limit reached")

// runChild submits the child turn of call c and returns its answer (the
// call's result), or an error naming the child's failure. A call past a
// limit starts no child. A cancel of the parent (ctx) cancels the child
// unless its agent says on_parent_cancel "abandon"; a hand-off of the
// parent to another replica leaves it running for the run that
// continues the parent.
func (t *turnRun) runChild(ctx context.Context, a *subAgentTool, c tool.CallInfo, input json.RawMessage) (string, tool.Content, error) {
	s := t.s
	depth, root, maxTokens, maxCost := t.treeOf()
	if depth > s.cfg.MaxDepth {
		return "", nil, fmt.Errorf("%w: agent %s would run at depth %d, deeper than the %d sub-agents may nest; answer without it", ErrSubAgentLimit, a.name, depth, s.cfg.MaxDepth)
	}
	if n := t.childOrdinal(c.CallID); n > s.cfg.MaxChildren {
		return "", nil, fmt.Errorf("%w: this turn made %d sub-agent calls, more than the %d a turn may make; answer without more", ErrSubAgentLimit, n, s.cfg.MaxChildren)
	}
	prompt, err := a.childPrompt(input)
	if err != nil {
		return "", nil, err
	}
	childID := ChildTurnID(t.id, c.CallID)
	req := events.TurnRequest{TurnID: childID, Agent: a.ref, Messages: []events.Message{events.UserText(prompt)},
		Parent: &events.ParentTurn{TurnID: t.id, CallID: c.CallID, RootTurnID: root, Depth: depth, MaxTotalTokens: maxTokens, MaxCost: maxCost}}
	tc := events.ToolChild{CallID: c.CallID, Name: a.name, ChildTurnID: childID, ChildSessionID: "_", Agent: a.ref, Depth: depth}
	if ctx.Err() != nil {
		return "", nil, context.Cause(ctx) // cancelled before the child was submitted: none runs
	}
	if t.continues() {
		// This run continues the turn (a replica's that died or stopped,
		// or a pause's): its child may have ended so long ago that its
		// state expired (Config.FinishedTTL). A submit would then be
		// dropped as a duplicate, and the wait would never end, or start
		// the child again; its events still tell how it ended.
		if end, ok := s.expiredChild(ctx, childID); ok {
			s.log.Info("turn: a sub-agent's child ended and its state expired; its result is read from its events",
				"turn_id", t.id, "child_turn_id", childID, "status", end.Status)
			return t.childEnded(ctx, tc, end)
		}
	}
	tc.Status = events.ChildStarted
	t.publish(tc)
	if f, ok := beforeChildSubmit.load(); ok {
		f(ctx, t.id, childID)
	}
	if err := s.submitChild(ctx, &req); err != nil {
		return "", nil, t.unreachable(ctx, err)
	}
	if ctx.Err() != nil {
		// The cancel came while the submit went out: the child is
		// cancelled in its turn (before it starts, the cancel is kept for
		// its submit).
		t.cancelChild(ctx, childID, a.def.OnParentCancel == events.OnParentCancelAbandon)
	}
	// The wait does not hold one of the replica's turn slots: a parent
	// waiting for children must not keep its children from running.
	if s.sem != nil {
		<-s.sem
		defer func() { s.sem <- struct{}{} }()
	}
	return t.awaitChild(ctx, a, tc)
}

// unreachable hands the run off for a transient error of NATS that
// kept a sub-agent call from submitting, following or reading its child
// (a stream without a leader for longer than Config.RetryTimeout): the
// call is not answered with it, the replica that continues the turn
// runs the call again, the same child. Another error is the call's
// result; a cancelled run gives the cancel's cause.
func (t *turnRun) unreachable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if !unavailable(err) {
		return err // NATS refused the request itself (a submit too large): the call's error
	}
	t.s.log.Warn("turn: a sub-agent call cannot reach its child turn; the turn is handed off", "turn_id", t.id, "err", err)
	t.handOff(err)
	return err
}

// unavailable reports an error of a NATS request worth repeating: a
// failure for want of an answer (transient) or a JetStream that passes
// (jetstreamUnavailable).
func unavailable(err error) bool { return transient(err) || jetstreamUnavailable(err) }

// watchChild starts the KV watch of a child's state, retried (retrier)
// while the bucket's stream cannot answer.
func (s *Service) watchChild(ctx context.Context, childID string) (jetstream.KeyWatcher, error) {
	r := s.retrier()
	for {
		// ctx, not a shorter one: the watch lives as long as its
		// context.
		w, err := s.stateKV.Watch(ctx, kvKey(childID))
		if err == nil {
			if f, ok := afterChildWatch.load(); ok {
				f(childID, w)
			}
		}
		if err == nil || !unavailable(err) || !r.again(ctx) {
			return w, err
		}
	}
}

// submitChild publishes the child's submit, de-duplicated on its turn id
// (Nats-Msg-Id), carrying the call's trace context: the child's spans
// are children of the parent's tool span.
func (s *Service) submitChild(ctx context.Context, req *events.TurnRequest) error {
	env, err := events.NewEnvelope(s.source, events.TypeTurnSubmit, req)
	if err != nil {
		return err
	}
	env.Subject, env.TurnID = req.TurnID, req.TurnID
	telemetry.Inject(ctx, env)
	m := cenats.NewMsg(s.subjects.TurnSubmit(), env)
	m.Header.Set(events.HeaderMsgID, req.TurnID)
	// Retried while LLMW_TURNS has no leader, as the turn's events are
	// (retrier), also for a cancelled call, whose child the parent then
	// cancels; a duplicate of an earlier attempt is dropped.
	r := s.retrier()
	for {
		actx, cancel := kvContext(context.WithoutCancel(ctx))
		_, err = s.js.PublishMsg(actx, m)
		cancel()
		if err == nil || !unavailable(err) || !r.again(context.WithoutCancel(ctx)) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("the child turn %s of the sub-agent call could not be submitted: %w", req.TurnID, err)
	}
	return nil
}

// cancelChild cancels a child turn for its parent's cancel, unless the
// child is abandoned or the parent's run was handed off (its cause a
// detach: the run that continues the parent waits for the child).
func (t *turnRun) cancelChild(ctx context.Context, childID string, abandon bool) bool {
	if abandon || t.life.load().silenced() || errors.Is(context.Cause(ctx), worker.ErrDetached) {
		return false
	}
	if err := t.s.nc.Publish(t.s.subjects.TurnCancel(childID), []byte(`{}`)); err != nil {
		t.s.log.Warn("turn: cancel a child turn", "turn_id", t.id, "child_turn_id", childID, "err", err)
	}
	return true
}

// childSettle bounds how long a cancelled parent waits for its child's
// end, to name it on its stream (llmw.tool.child aborted).
const childSettle = 5 * time.Second

// childPoll is how often a parent waiting for its child also reads the
// child's state from the leader of LLMW_TURN_STATE's stream. The watch
// delivers through a consumer on one node of the cluster: when that node
// dies or is cut off, nothing comes until nats.go has missed its
// heartbeats and made a new consumer (ten seconds and more), and never
// again when making it fails for good (the watch is then closed, and
// started again). The read finds the child's end whatever became of the
// watch.
const childPoll = 2 * time.Second

// awaitChild follows the child's state in LLMW_TURN_STATE (a KV watch,
// which starts from the state as it stands, and a read every childPoll)
// until it ends, naming each pause and resume on the parent's stream,
// and returns the call's result from the child's terminal event.
func (t *turnRun) awaitChild(ctx context.Context, a *subAgentTool, tc events.ToolChild) (string, tool.Content, error) {
	s := t.s
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	w, err := s.watchChild(wctx, tc.ChildTurnID)
	if err != nil {
		return "", nil, t.unreachable(ctx, fmt.Errorf("the state of child turn %s cannot be followed: %w", tc.ChildTurnID, err))
	}
	defer func() {
		if w != nil {
			_ = w.Stop()
		}
	}()
	poll := time.NewTicker(childPoll)
	defer poll.Stop()
	paused := false
	var seen uint64 // the revision of the child's state acted on last
	done := ctx.Done()
	var settle <-chan time.Time
	for {
		var st *State
		var rev uint64
		select {
		case <-done:
			done = nil
			if !t.cancelChild(ctx, tc.ChildTurnID, a.def.OnParentCancel == events.OnParentCancelAbandon) {
				return "", nil, context.Cause(ctx)
			}
			settle = time.After(childSettle)
			continue
		case <-settle:
			return "", nil, context.Cause(ctx)
		case <-s.drained:
			// The replica stops: the parent goes to another replica, whose
			// run of the call waits for the child from where it is.
			t.handOff(errStopping)
			return "", nil, errStopping
		case e, ok := <-w.Updates():
			if !ok {
				s.log.Warn("turn: the watch of a child turn's state ended; watching it again", "turn_id", t.id, "child_turn_id", tc.ChildTurnID)
				if w, err = s.watchChild(wctx, tc.ChildTurnID); err != nil {
					return "", nil, t.unreachable(ctx, fmt.Errorf("the state of child turn %s cannot be followed: %w", tc.ChildTurnID, err))
				}
				continue
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var v State
			if json.Unmarshal(e.Value(), &v) != nil {
				continue
			}
			st, rev = &v, e.Revision()
		case <-poll.C:
			st, rev, err = t.pollChild(ctx, wctx, tc.ChildTurnID, done == nil)
			if err != nil {
				continue // not submitted yet, or the leader cannot answer now: the watch or the next read
			}
		}
		if rev <= seen {
			continue // a watch behind the read
		}
		seen = rev
		switch {
		case st.Status == StatusPaused && !paused:
			paused = true
			tc.Status, tc.Pending = events.ChildPaused, st.Pending()
			t.publish(tc)
			tc.Pending = nil
		case st.Status == StatusRunning && paused:
			paused = false
			tc.Status = events.ChildResumed
			t.publish(tc)
		case st.Status.Finished():
			return t.childEnded(ctx, tc, st)
		}
	}
}

// pollChild reads the child's state from the leader of LLMW_TURN_STATE's
// stream for awaitChild. One read lasts at most childPoll: a leader that
// cannot answer (a stream electing one, a node cut off) is asked again
// at the next tick. It also ends with the run's context (ctx; wctx while
// a cancelled parent settles) and when the replica starts to drain,
// which hands the parent off at once: an unanswered read never holds up
// Stop.
func (t *turnRun) pollChild(ctx, wctx context.Context, childID string, settling bool) (*State, uint64, error) {
	base := ctx
	if settling {
		base = wctx
	}
	rctx, cancel := context.WithTimeout(base, childPoll)
	defer cancel()
	stop := context.AfterFunc(t.s.drain, cancel)
	defer stop()
	return t.s.leaderState(rctx, childID)
}

// childEnded publishes the child's end on the parent's stream and
// returns the call's result: the child's answer (its output, with a
// response_format), or an error naming its failure.
func (t *turnRun) childEnded(ctx context.Context, tc events.ToolChild, st *State) (string, tool.Content, error) {
	switch st.Status {
	case StatusCompleted:
		tc.Status = events.ChildCompleted
	case StatusAborted:
		tc.Status, tc.Code = events.ChildAborted, st.Code
	default:
		tc.Status, tc.Code = events.ChildFailed, st.Code
	}
	t.publish(tc)
	if st.Status != StatusCompleted {
		return "", nil, fmt.Errorf("sub-agent %s (child turn %s) %s with code %s: %s", tc.Name, tc.ChildTurnID, st.Status, st.Code, st.Reason)
	}
	c, err := t.s.readChildAnswer(ctx, tc.ChildTurnID)
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return "", nil, fmt.Errorf("sub-agent %s (child turn %s) completed, but its answer is not stored any more: %w", tc.Name, tc.ChildTurnID, err)
		}
		return "", nil, t.unreachable(ctx, fmt.Errorf("sub-agent %s (child turn %s) completed, but its answer cannot be read: %w", tc.Name, tc.ChildTurnID, err))
	}
	if len(c.Output) > 0 {
		return string(c.Output), nil, nil
	}
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == events.RoleAssistant {
			text, parts := answerContent(c.Messages[i])
			return text, parts, nil
		}
	}
	return "", nil, nil
}

// answerContent is the call's result of a child's last assistant
// message: its text, and, when it holds images or files (a remote
// agent's artifacts), its text, image and file parts in order.
func answerContent(m events.Message) (string, tool.Content) {
	if !slices.ContainsFunc(m.Content, func(p events.Part) bool { return p.IsMedia() }) {
		return m.Text(), nil
	}
	var parts tool.Content
	for _, p := range m.Content {
		if p.Type == events.PartText || p.IsMedia() {
			parts = append(parts, p)
		}
	}
	return events.PartsText(parts), parts
}

// continues reports whether the run continues a turn from its state (a
// recovery or a resume) rather than starting it: only a start has the
// request's input to announce (start.go).
func (t *turnRun) continues() bool { return t.obs.input == nil }

// expiredChild returns the end of a child turn that has no state but
// whose last turn event is its end: a child that ended more than
// Config.FinishedTTL ago. ok is false when its state is there, when
// neither is, and when either cannot be read (the call then submits the
// child and waits as for any).
func (s *Service) expiredChild(ctx context.Context, childID string) (_ *State, ok bool) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kvTimeout)
	defer cancel()
	if _, _, err := s.leaderState(rctx, childID); !errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false
	}
	m, err := jsread.LastMsg(rctx, s.nc, s.pub.APIPrefix(), events.StreamEvents, s.subjects.Events("", childID, events.ChannelTurn))
	if err != nil {
		return nil, false
	}
	env, err := events.DecodeEnvelope(m.Header, m.Data)
	if err != nil {
		return nil, false
	}
	end := &State{Code: CodeInternal}
	switch env.Type {
	case events.TypeTurnCompleted:
		end.Status, end.Code = StatusCompleted, ""
	case events.TypeTurnFailed, events.TypeTurnAborted:
		end.Status = StatusFailed
		if env.Type == events.TypeTurnAborted {
			end.Status = StatusAborted
		}
		if e, err := events.DecodeData[events.TurnEnded](env); err == nil {
			end.Code, end.Reason = e.Code, e.Reason
		}
	default:
		return nil, false
	}
	return end, true
}

// readChildAnswer is childAnswer retried (retrier) while LLMW_EVENTS
// cannot answer (a stream electing its leader answers 503).
func (s *Service) readChildAnswer(ctx context.Context, childID string) (*events.TurnCompleted, error) {
	r := s.retrier()
	for {
		rctx, cancel := kvContext(context.WithoutCancel(ctx))
		c, err := s.childAnswer(rctx, childID)
		cancel()
		if err == nil || !unavailable(err) || !r.again(ctx) {
			return c, err
		}
	}
}

// childAnswer reads a completed child's llmw.turn.completed: the last
// event on its turn channel (a child has no session).
func (s *Service) childAnswer(ctx context.Context, childID string) (*events.TurnCompleted, error) {
	m, err := jsread.LastMsg(ctx, s.nc, s.pub.APIPrefix(), events.StreamEvents, s.subjects.Events("", childID, events.ChannelTurn))
	if err != nil {
		return nil, err
	}
	env, err := events.DecodeEnvelope(m.Header, m.Data)
	if err != nil {
		return nil, err
	}
	if env.Type != events.TypeTurnCompleted {
		return nil, fmt.Errorf("its last turn event is %s, not %s", env.Type, events.TypeTurnCompleted)
	}
	c, err := events.DecodeData[events.TurnCompleted](env)
	return &c, err
}

// childOrdinal is the place of call callID among the turn's sub-agent
// calls, from 1: as the state the run continues numbered them
// (State.SubAgentCalls), then the turn's transcript's order
// (noteChildren), then the order calls not in it yet came.
func (t *turnRun) childOrdinal(callID string) int {
	t.children.mu.Lock()
	defer t.children.mu.Unlock()
	t.initChildCalls()
	if n, ok := t.children.childCalls[callID]; ok {
		return n
	}
	n := len(t.children.childCalls) + 1
	t.children.childCalls[callID] = n
	return n
}

// noteChildren numbers the sub-agent calls of msgs (a checkpoint's
// transcript) in order, and returns the children cp's calls wait for,
// which the checkpoint's state lists (State.Children).
func (t *turnRun) noteChildren(cp *worker.Checkpoint) []ChildRef {
	if len(t.base.SubAgents) == 0 || cp == nil {
		return nil
	}
	t.children.mu.Lock()
	t.initChildCalls()
	for _, m := range cp.Messages {
		if m.Role != events.RoleAssistant {
			continue
		}
		for _, p := range m.ToolUses() {
			if _, ok := t.children.subAgents[p.Name]; !ok {
				continue
			}
			if _, ok := t.children.childCalls[p.ID]; !ok {
				t.children.childCalls[p.ID] = len(t.children.childCalls) + 1
			}
		}
	}
	t.children.mu.Unlock()
	var out []ChildRef
	for _, p := range cp.Pending {
		if p.Output != nil {
			continue
		}
		if ref, abandon, ok := t.subAgentOf(p.Call.Name); ok {
			out = append(out, ChildRef{CallID: p.Call.ID, TurnID: ChildTurnID(t.id, p.Call.ID), Agent: ref, Abandon: abandon})
		}
	}
	return out
}

// initChildCalls starts the numbering of the run's sub-agent calls from
// the state it continues, which counts the calls a compaction took out
// of the transcript (t.children.mu held).
func (t *turnRun) initChildCalls() {
	if t.children.childCalls == nil {
		t.children.childCalls = maps.Clone(t.base.SubAgentCalls)
		if t.children.childCalls == nil {
			t.children.childCalls = map[string]int{}
		}
	}
}

// subAgentCalls is the numbering of the turn's sub-agent calls so far,
// for its checkpoint's state (nil when it made none).
func (t *turnRun) subAgentCalls() map[string]int {
	t.children.mu.Lock()
	defer t.children.mu.Unlock()
	if len(t.children.childCalls) == 0 {
		return nil
	}
	return maps.Clone(t.children.childCalls)
}

// cancelChildren cancels the children a turn's state lists (but those
// abandoned), for a cancel of the turn that its replica does not apply:
// the turn is paused, or its replica died.
func (s *Service) cancelChildren(st *State) {
	for _, c := range st.Children {
		if c.Abandon {
			continue
		}
		if err := s.nc.Publish(s.subjects.TurnCancel(c.TurnID), []byte(`{}`)); err != nil {
			s.log.Warn("turn: cancel a child turn", "child_turn_id", c.TurnID, "err", err)
		}
	}
}

// withParent fills a child turn's llmw.turn.started with its place in
// the tree.
func (t *turnRun) withParent(d events.TurnStarted) events.TurnStarted {
	if t.base.Request == nil || t.base.Request.Parent == nil {
		return d
	}
	p := t.base.Request.Parent
	d.ParentTurnID, d.ParentCallID, d.RootTurnID, d.Depth = p.TurnID, p.CallID, p.RootTurnID, p.Depth
	return d
}
