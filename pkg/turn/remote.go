package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/worker"
)

// A turn of a remote agent (a definition with a2a_url; docs/protocol.md
// §5 "Sub-agents" and §12 "Remote agents") runs the agent's A2A task
// instead of the model loop: it is a turn like any other — a child turn
// of the sub-agent call, with its events, checkpoints, cancel, pause and
// answer — whose steps are the remote task's updates, made through
// Config.RemoteAgents (remoteagent.go; a replica without one fails the
// turn with no_a2a_client). The message that
// starts the task has the turn id as its message id. Once the remote
// accepted it, the task id is written to the turn's state (State.Remote,
// through the run's ordered state writes) before the run follows the
// task, so a replica that continues the turn subscribes to that task
// again and never sends the message a second time. Only a replica that
// stopped between the remote's answer and that write sends it again,
// with the same message id. A remote input-required is a pause with one
// pending call (remoteInputCall) that a resume answers; a cancel of the
// turn cancels the task (CancelTask).

// RemoteRun is the A2A task of a turn of a remote agent (State.Remote).
type RemoteRun struct {
	// Agent is the agent's name; URL its a2a_url.
	Agent string `json:"agent"`
	URL   string `json:"url"`
	// MessageID is the id of the message that starts the task: the turn
	// id.
	MessageID string `json:"message_id"`
	// TaskID and ContextID are the remote task, once the remote accepted
	// the message.
	TaskID    string `json:"task_id,omitempty"`
	ContextID string `json:"context_id,omitempty"`
	// Reply is an answer to the task's input-required that is not known
	// to have reached the remote: a run that continues the turn sends it
	// again, with the same message id.
	Reply *RemoteReply `json:"reply,omitempty"`
	// Pauses counts the task's input-required pauses (the pending calls'
	// ids).
	Pauses int `json:"pauses,omitempty"`
	// Done are the artifacts whose text blocks the turn's events hold
	// whole: a run that subscribes to the task again does not publish
	// them again.
	Done []string `json:"done,omitempty"`
}

// RemoteReply is a message to a remote task that waits for input.
type RemoteReply struct {
	MessageID string `json:"message_id"`
	Text      string `json:"text"`
}

// RemoteInputTool is the name of the pending call of a remote agent's
// turn paused by the task's input-required: its input is {"question":
// the remote's status message, "answer": ""}.
const RemoteInputTool = "remote_input"

// remoteInputCall is the pending call of the n-th input-required pause.
func remoteInputCall(n int, question string) events.ToolCall {
	in, _ := json.Marshal(map[string]string{"question": question, "answer": ""})
	return events.ToolCall{ID: fmt.Sprintf("input-%d", n), Name: RemoteInputTool, Input: in}
}

// remoteOf is the remote task a new turn of agent ag runs, req the
// turn's request as submitted (nil: ag has no a2a_url, or req names a
// model of its own, which runs the definition's other fields as a turn
// of that model).
func remoteOf(ag *events.AgentDefinition, req *events.TurnRequest) *RemoteRun {
	if ag.A2AURL == "" || req.Model != "" {
		return nil
	}
	return &RemoteRun{Agent: ag.Name, URL: ag.A2AURL, MessageID: req.TurnID}
}

// remoteRun is one run of a remote agent's turn.
type remoteRun struct {
	t     *turnRun
	rr    RemoteRun
	cp    *worker.Checkpoint
	agent RemoteAgent
	// open are the artifacts whose text blocks are open, by artifact id;
	// index is the next block's index in the run's step; status the last
	// status message published.
	open   map[string]int
	index  int
	status string
}

func (t *turnRun) newRemoteRun(cp *worker.Checkpoint) *remoteRun {
	r := &remoteRun{t: t, rr: *t.base.Remote, cp: cp.Clone(), open: map[string]int{}}
	r.rr.Done = slices.Clone(r.rr.Done)
	// Each run's blocks are a step of their own: a run that continues
	// the turn opens none at the places of the blocks before.
	r.cp.Step++
	r.cp.Restarts++
	return r
}

// runRemote runs (fresh) or continues a remote agent's turn from its
// checkpoint and returns the request's answer.
func (t *turnRun) runRemote(cp *worker.Checkpoint, fresh bool) answer {
	r := t.newRemoteRun(cp)
	if fresh {
		t.Observe(worker.Event{TurnID: t.id, SessionID: t.session, Data: events.TurnStarted{TurnID: t.id, SessionID: t.session}})
	}
	return t.finish(r.run(), nil)
}

// resumeRemote continues a remote agent's turn paused by the task's
// input-required with the resume's answer (checkRemoteResume checked
// it): a message to the task, or for a deny its cancel.
func (t *turnRun) resumeRemote(st *State, req *events.ResumeRequest) answer {
	text, deny, _ := remoteAnswer(st, req)
	r := t.newRemoteRun(st.Checkpoint)
	t.Observe(worker.Event{TurnID: t.id, SessionID: t.session, Data: events.TurnResumed{Decisions: req.Decisions}})
	question := ""
	if p := st.Pending(); len(p) > 0 {
		var in struct {
			Question string `json:"question"`
		}
		_ = json.Unmarshal(p[0].Input, &in)
		question = in.Question
	}
	r.cp.Phase, r.cp.Pending, r.cp.Pause = worker.PhaseModel, nil, nil
	if deny {
		return t.finish(r.cancelled(fmt.Errorf("the input the remote agent asked for was denied: %s", text)), nil)
	}
	r.cp.Messages = append(r.cp.Messages, events.AssistantText(question), events.UserText(text))
	r.rr.Reply = &RemoteReply{MessageID: fmt.Sprintf("%s-input-%d", r.rr.MessageID, r.rr.Pauses), Text: text}
	if err := r.save(); err != nil {
		return t.finish(r.lostResult(), nil)
	}
	return t.finish(r.run(), nil)
}

// save writes the run's checkpoint with the task as it stands, behind
// the run's other state writes (checkpoint).
func (r *remoteRun) save() error {
	rr := r.rr
	rr.Done = slices.Clone(r.rr.Done)
	r.t.base.Remote = &rr
	return r.t.checkpoint(r.t.ctx, r.cp.Clone())
}

// run sends the message (or the pending reply) and follows the task
// until it is final or waits for input.
func (r *remoteRun) run() *worker.Result {
	t := r.t
	ctx := t.ctx
	// A stopping replica hands the turn off at once: the replica that
	// continues it subscribes to the task again.
	drained := make(chan struct{})
	defer close(drained)
	go func() {
		select {
		case <-t.s.drained:
			t.handOff(errStopping)
		case <-drained:
		}
	}()
	if ctx.Err() != nil {
		return r.cancelled(context.Cause(ctx))
	}
	a, err := t.s.openRemote(ctx, r.rr)
	if errors.Is(err, ErrNoA2AClient) {
		return r.end(worker.StatusFailed, CodeNoA2AClient, err.Error())
	}
	if err != nil {
		return r.broken(ctx, err)
	}
	r.agent = a
	defer func() { _ = a.Close() }()
	if r.rr.TaskID == "" {
		task, err := a.Send(ctx, r.rr.MessageID, r.prompt())
		if err != nil {
			return r.broken(ctx, err)
		}
		if task.ID == "" { // the agent answered with a message: no task
			return r.ended(task)
		}
		r.rr.TaskID, r.rr.ContextID = task.ID, task.ContextID
		if err := r.save(); err != nil {
			return r.lostResult()
		}
	}
	if rp := r.rr.Reply; rp != nil {
		if _, err := a.Reply(ctx, &RemoteTask{ID: r.rr.TaskID, ContextID: r.rr.ContextID}, rp.MessageID, rp.Text); err != nil {
			return r.broken(ctx, err)
		}
		r.rr.Reply = nil
		if err := r.save(); err != nil {
			return r.lostResult()
		}
	}
	task, err := a.Follow(ctx, r.rr.TaskID, r.update)
	if err != nil {
		return r.broken(ctx, err)
	}
	return r.ended(task)
}

// prompt is the text of the turn's user messages.
func (r *remoteRun) prompt() string {
	var parts []string
	for _, m := range r.cp.Messages {
		if m.Role == events.RoleUser {
			if s := m.Text(); s != "" {
				parts = append(parts, s)
			}
		}
	}
	return strings.Join(parts, "\n\n")
}

func (r *remoteRun) observe(d events.WorkerEvent) {
	r.t.Observe(worker.Event{TurnID: r.t.id, SessionID: r.t.session, Data: d})
}

// update publishes one update of the task: an artifact's text as a text
// block (its chunks the block's deltas), a working status's message as a
// thinking block.
func (r *remoteRun) update(u RemoteUpdate) error {
	if r.t.life.load().silenced() {
		return ErrOwnershipLost
	}
	step := r.cp.Step
	if a := u.Artifact; a != nil {
		if slices.Contains(r.rr.Done, a.ID) {
			return nil
		}
		i, open := r.open[a.ID]
		if open && !u.Append {
			r.stop(a.ID)
			open = false
		}
		if !open {
			i = r.index
			r.index++
			r.open[a.ID] = i
			r.observe(events.WorkerBlockStart{BlockStart: events.BlockStart{Index: i, BlockType: events.BlockText}, Step: step})
		}
		if a.Text != "" {
			r.observe(events.WorkerBlockDelta{BlockDelta: events.TextDelta(i, a.Text), Step: step})
		}
		if u.Last {
			r.stop(a.ID)
			r.rr.Done = append(r.rr.Done, a.ID)
			return r.save()
		}
		return nil
	}
	if (u.State == RemoteWorking || u.State == RemoteSubmitted) && u.Message != "" && u.Message != r.status {
		r.status = u.Message
		i := r.index
		r.index++
		r.observe(events.WorkerBlockStart{BlockStart: events.BlockStart{Index: i, BlockType: events.BlockThinking}, Step: step})
		r.observe(events.WorkerBlockDelta{BlockDelta: events.ThinkingDelta(i, u.Message), Step: step})
		r.observe(events.WorkerBlockStop{BlockStop: events.BlockStop{Index: i, BlockType: events.BlockThinking, StopReason: events.StopEndTurn}, Step: step})
	}
	return nil
}

// stop closes the text block of artifact id.
func (r *remoteRun) stop(id string) {
	i, ok := r.open[id]
	if !ok {
		return
	}
	delete(r.open, id)
	r.observe(events.WorkerBlockStop{BlockStop: events.BlockStop{Index: i, BlockType: events.BlockText, StopReason: events.StopEndTurn}, Step: r.cp.Step})
}

// ended ends the run with the task as it stands: final, or waiting for
// input (Follow reported its artifacts whole).
func (r *remoteRun) ended(task *RemoteTask) *worker.Result {
	ids := make([]string, 0, len(r.open))
	for id := range r.open {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r.stop(id)
	}
	what := fmt.Sprintf("the remote agent %s (%s), task %s", r.rr.Agent, r.rr.URL, task.ID)
	switch task.State {
	case RemoteCompleted:
		content, err := r.answer(task)
		if err != nil {
			if unavailable(err) {
				// LLMW_MEDIA cannot answer now: the replica that continues
				// the turn reads the task and stores its files again.
				r.t.s.log.Warn("turn: a remote agent's files cannot be stored; the turn is handed off", "turn_id", r.t.id, "agent", r.rr.Agent, "err", err)
				r.t.handOff(err)
				return r.lostResult()
			}
			return r.end(worker.StatusFailed, CodeInternal, fmt.Sprintf("%s completed, but its answer cannot be kept: %v", what, err))
		}
		msgs := append(slices.Clone(r.cp.Messages), events.Message{Role: events.RoleAssistant, Content: content})
		r.observe(events.TurnCompleted{Messages: msgs, StopReason: events.StopEndTurn})
		return &worker.Result{Status: worker.StatusCompleted, Messages: msgs}
	case RemoteInputRequired, RemoteAuthRequired:
		r.rr.Pauses++
		call := remoteInputCall(r.rr.Pauses, task.Message)
		reason := fmt.Sprintf("%s asks for input (%s): answer with a decision on %s, {\"input\": {\"answer\": \"…\"}}, or approve with messages; deny cancels the task", what, task.State, call.ID)
		r.cp.Phase, r.cp.Pause = worker.PhasePaused, &worker.Pause{Event: events.HookBeforeToolCall, Reason: reason}
		r.cp.Pending = []worker.PendingCall{{Call: call, State: worker.CallPaused, Reason: task.Message}}
		if err := r.save(); err != nil {
			return r.lostResult()
		}
		r.observe(events.TurnPaused{Reason: reason, Pending: []events.ToolCall{call}})
		return &worker.Result{Status: worker.StatusPaused}
	case RemoteCanceled:
		return r.end(worker.StatusAborted, CodeCancelled, fmt.Sprintf("%s was canceled: %s", what, task.Message))
	}
	return r.end(worker.StatusFailed, worker.CodeProviderError, fmt.Sprintf("%s %s: %s", what, task.State, task.Message))
}

// answer is the content of the answer of the completed task
// (remoteContent), its files' bytes stored in LLMW_MEDIA.
func (r *remoteRun) answer(task *RemoteTask) ([]events.Part, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.t.ctx), mediaTimeout)
	defer cancel()
	store := func(ctx context.Context) (mediaPutter, error) { return r.t.s.media.Store(ctx) }
	content, notes, err := remoteContent(ctx, task, r.rr.Agent, store)
	for _, n := range notes {
		r.t.s.log.Warn("turn: a remote agent's file is left out of its answer", "turn_id", r.t.id, "agent", r.rr.Agent, "task_id", task.ID, "note", n)
	}
	if f := afterRemoteFiles.Load(); f != nil && err == nil {
		(*f)(r.t.id)
	}
	return content, err
}

// afterRemoteFiles, set by tests only, runs when a remote agent's turn
// stored the files of its answer, before it publishes the answer.
var afterRemoteFiles atomic.Pointer[func(turnID string)]

// end publishes the turn's failed or aborted event.
func (r *remoteRun) end(status worker.Status, code, reason string) *worker.Result {
	d := events.TurnEnded{Reason: reason, Code: code}
	if status == worker.StatusAborted {
		r.observe(events.TurnAborted(d))
	} else {
		r.observe(events.TurnFailed(d))
	}
	return &worker.Result{Status: status, Code: code, Reason: reason}
}

// broken ends a run whose remote call failed: the turn's cancel or
// hand-off (ctx), or the remote (provider_error).
func (r *remoteRun) broken(ctx context.Context, err error) *worker.Result {
	if ctx.Err() != nil {
		return r.cancelled(context.Cause(ctx))
	}
	return r.end(worker.StatusFailed, worker.CodeProviderError, fmt.Sprintf("the remote agent %s (%s): %v", r.rr.Agent, r.rr.URL, err))
}

// cancelled ends the run for the turn's cancel (cause): the remote task
// is cancelled and the turn aborted. A run handed off (its cause a
// detach) ends without a trace: the run that continues the turn follows
// the task.
func (r *remoteRun) cancelled(cause error) *worker.Result {
	t := r.t
	if t.life.load().silenced() || errors.Is(cause, worker.ErrDetached) {
		return r.lostResult()
	}
	t.s.cancelRemote(r.rr, r.agent)
	reason := "the turn was cancelled"
	if cause != nil && !errors.Is(cause, context.Canceled) {
		reason = cause.Error()
	}
	if r.rr.TaskID != "" {
		reason += fmt.Sprintf("; the remote task %s was cancelled", r.rr.TaskID)
	}
	return r.end(worker.StatusAborted, CodeCancelled, reason)
}

// lostResult is the result of a run that lost the turn or handed it off:
// finish publishes and writes nothing for it.
func (r *remoteRun) lostResult() *worker.Result {
	return &worker.Result{Status: worker.StatusAborted, Code: worker.CodeDetached}
}

// openRemote opens the remote agent of rr with Config.RemoteAgents
// (ErrNoA2AClient without one).
func (s *Service) openRemote(ctx context.Context, rr RemoteRun) (RemoteAgent, error) {
	if s.cfg.RemoteAgents == nil {
		return nil, fmt.Errorf("%w: the remote agent %s (%s) cannot be reached from replica %s", ErrNoA2AClient, rr.Agent, rr.URL, s.cfg.Instance)
	}
	return s.cfg.RemoteAgents.OpenRemote(ctx, rr.Agent, rr.URL)
}

// cancelRemote cancels a remote agent's task (a cancel of its turn), with
// a (nil: opened here).
func (s *Service) cancelRemote(rr RemoteRun, a RemoteAgent) {
	if rr.TaskID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(s.root, kvTimeout)
	defer cancel()
	if a == nil {
		var err error
		if a, err = s.openRemote(ctx, rr); err != nil {
			s.log.Warn("turn: cancel a remote task", "agent", rr.Agent, "task_id", rr.TaskID, "err", err)
			return
		}
		defer func() { _ = a.Close() }()
	}
	if err := a.Cancel(ctx, rr.TaskID); err != nil {
		s.log.Warn("turn: cancel a remote task", "agent", rr.Agent, "task_id", rr.TaskID, "err", err)
	}
}

// cancelRemoteOf cancels the remote task of a paused turn that a cancel
// aborted (abortPaused).
func (s *Service) cancelRemoteOf(st *State) {
	if st.Remote != nil {
		s.cancelRemote(*st.Remote, nil)
	}
}

// remoteAnswer is the answer of a resume of a remote agent's turn paused
// for input: the pending call's decision — {"input": {"answer": …}}
// (an edit), or deny (its reason) — or else, approved or not decided,
// the text of the resume's messages.
func remoteAnswer(st *State, req *events.ResumeRequest) (text string, deny bool, err error) {
	pending := st.Pending()
	if len(pending) != 1 {
		return "", false, fmt.Errorf("the turn of remote agent %s waits for no input", st.Remote.Agent)
	}
	id := pending[0].ID
	for k := range req.Decisions {
		if k != id {
			return "", false, fmt.Errorf("decisions: no call %q waits for a decision (waiting: %s)", k, id)
		}
	}
	d, decided := req.Decisions[id]
	switch {
	case decided && d.Kind == events.DecisionDeny:
		return d.Reason, true, nil
	case decided && d.Kind == events.DecisionEdit:
		var in struct {
			Answer string `json:"answer"`
		}
		if json.Unmarshal(d.Input, &in) != nil || strings.TrimSpace(in.Answer) == "" {
			return "", false, fmt.Errorf(`decisions: %s: an edit answers the remote agent with {"answer": "<text>"}, an answer that is not empty`, id)
		}
		return in.Answer, false, nil
	case decided && d.Kind != events.DecisionApprove:
		return "", false, fmt.Errorf("decisions: call %q: unknown decision %q (approve, deny or edit)", id, d.Kind)
	}
	var parts []string
	for _, m := range req.Messages {
		if s := m.Text(); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "", false, fmt.Errorf(`the remote agent %s asks for input: answer %s with {"input": {"answer": "<text>"}}, or with messages`, st.Remote.Agent, id)
	}
	return strings.Join(parts, "\n\n"), false, nil
}

// checkRemoteResume says why req cannot continue the paused turn of a
// remote agent (checkResume).
func checkRemoteResume(st *State, req *events.ResumeRequest) error {
	_, _, err := remoteAnswer(st, req)
	return err
}
