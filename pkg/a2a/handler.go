package a2a

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
)

// handler is a2a-go's RequestHandler for one request to one agent:
// a2asrv's transports (JSON-RPC and REST, 1.0 and 0.3) decode the
// request and call it, and encode what it returns.
type handler struct {
	s     *Server
	agent agents.Agent
	r     *http.Request
}

var _ a2asrv.RequestHandler = (*handler)(nil)

// nuidLen is the length of a nuid, the random tail of a task id.
const nuidLen = 22

// taskPrefix starts the ids of the agent's tasks: a task id is
// "a2a-" + agent + "-" + a nuid, and the turn id of its turn.
func (h *handler) taskPrefix() string { return "a2a-" + h.agent.Name + "-" }

// own reports whether id names a task of this agent (the fixed length of
// the tail tells "a2a-x-" + nuid from "a2a-x-y-" + nuid).
func (h *handler) own(id string) bool {
	rest, ok := strings.CutPrefix(id, h.taskPrefix())
	return ok && len(rest) == nuidLen && !strings.Contains(rest, "-")
}

func (h *handler) authorize(session string, a gateway.Access) error {
	if h.s.cfg.Authorizer == nil {
		return nil
	}
	err := h.s.cfg.Authorizer.Authorize(h.r, session, a)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gateway.ErrUnauthenticated):
		return spec.NewError(spec.ErrUnauthenticated, err.Error())
	case errors.Is(err, gateway.ErrForbidden):
		return spec.NewError(spec.ErrUnauthorized, err.Error())
	}
	return err
}

func invalidParams(format string, args ...any) error {
	return spec.NewError(spec.ErrInvalidParams, fmt.Sprintf(format, args...))
}

func taskNotFound(id spec.TaskID) error {
	return spec.NewError(spec.ErrTaskNotFound, fmt.Sprintf("task %q not found", id))
}

// taskRef is a task as the last event on its turn channel says.
type taskRef struct {
	id, session string
	env         *events.Envelope // the last llmw.turn.* event
}

func (t taskRef) state() spec.TaskState { return StateOf(t.env.Type) }

// lookup finds the agent's task id in LLMW_EVENTS (from the stream's
// leader, as the gateway reads a session's latest turn). A task of
// another agent, or of a session the caller may not access, is not
// found.
func (h *handler) lookup(ctx context.Context, id spec.TaskID, a gateway.Access) (taskRef, error) {
	if !h.own(string(id)) || !events.ValidToken(string(id)) {
		return taskRef{}, taskNotFound(id)
	}
	m, err := jsread.LastMsg(ctx, h.s.js.Conn(), jsread.APIPrefix(h.s.js), events.StreamEvents, h.s.subj.Events("*", string(id), events.ChannelTurn))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return taskRef{}, taskNotFound(id)
	}
	if err != nil {
		return taskRef{}, fmt.Errorf("a2a: task %s: %w", id, err)
	}
	env, err := events.DecodeEnvelope(m.Header, m.Data)
	if err != nil {
		return taskRef{}, fmt.Errorf("a2a: task %s: event %d: %w", id, m.Sequence, err)
	}
	session := sessionOf(h.s.subj.P(), m.Subject)
	if err := h.authorize(session, a); err != nil {
		if errors.Is(err, spec.ErrUnauthorized) {
			return taskRef{}, taskNotFound(id)
		}
		return taskRef{}, err
	}
	return taskRef{id: string(id), session: session, env: env}, nil
}

// sessionOf reads the session of P.events.<session>.<turn>.<ch>.
func sessionOf(p, subject string) string {
	rest := strings.TrimPrefix(subject, p+".events.")
	s, _, _ := strings.Cut(rest, ".")
	return s
}

// lastSeq is the stream sequence of the turn's last stored event.
func (h *handler) lastSeq(ctx context.Context, session, turnID string) (uint64, error) {
	m, err := jsread.LastMsg(ctx, h.s.js.Conn(), jsread.APIPrefix(h.s.js), events.StreamEvents, h.s.subj.Events(session, turnID, "*"))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("a2a: last event of %s: %w", turnID, err)
	}
	return m.Sequence, nil
}

// SendMessage starts a turn (a message without taskId) or answers the
// approvals of an input-required one (a message with its taskId), and
// waits until the task is final or input-required — or, with
// returnImmediately, until the turn started.
func (h *handler) SendMessage(ctx context.Context, req *spec.SendMessageRequest) (spec.SendMessageResult, error) {
	o, stop, err := h.prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	defer stop()
	o.untilStarted = req.Config != nil && req.Config.ReturnImmediately
	m, err := h.run(ctx, o, func(spec.Event) bool { return true })
	if err != nil {
		return nil, err
	}
	return trimHistory(m.Task(nil), req.Config), nil
}

// SendStreamingMessage is SendMessage answered with the task's events as
// they are stored: the task first, then its status and artifact updates.
func (h *handler) SendStreamingMessage(ctx context.Context, req *spec.SendMessageRequest) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		o, stop, err := h.prepare(ctx, req)
		if err != nil {
			yield(nil, err)
			return
		}
		defer stop()
		if _, err := h.run(ctx, o, func(e spec.Event) bool { return yield(e, nil) }); err != nil {
			yield(nil, err)
		}
	}
}

// SubscribeToTask follows a task that is not final: the task as stored
// so far, then its updates, from any replica.
func (h *handler) SubscribeToTask(ctx context.Context, req *spec.SubscribeToTaskRequest) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		ref, err := h.lookup(ctx, req.ID, gateway.Read)
		if err != nil {
			yield(nil, err)
			return
		}
		if s := ref.state(); s.Terminal() {
			yield(nil, spec.NewError(spec.ErrUnsupportedOperation, fmt.Sprintf("task %s is %s: a final task has no updates to subscribe to (GetTask reads it)", req.ID, s)))
			return
		}
		if _, err := h.run(ctx, runOpts{session: ref.session, turnID: ref.id}, func(e spec.Event) bool { return yield(e, nil) }); err != nil {
			yield(nil, err)
		}
	}
}

// GetTask reads the task from its turn's events.
func (h *handler) GetTask(ctx context.Context, req *spec.GetTaskRequest) (*spec.Task, error) {
	ref, err := h.lookup(ctx, req.ID, gateway.Read)
	if err != nil {
		return nil, err
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, invalidParams("historyLength must not be negative, got %d", *req.HistoryLength)
	}
	return h.snapshot(ctx, ref, req.HistoryLength)
}

// snapshot is the task as its stored events make it.
func (h *handler) snapshot(ctx context.Context, ref taskRef, historyLength *int) (*spec.Task, error) {
	var task *spec.Task
	m, err := h.run(ctx, runOpts{session: ref.session, turnID: ref.id}, func(e spec.Event) bool {
		task, _ = e.(*spec.Task)
		return false
	})
	if err != nil {
		return nil, err
	}
	if task == nil {
		task = m.Task(nil)
	}
	if historyLength != nil {
		task.History = task.History[len(task.History)-min(len(task.History), *historyLength):]
	}
	return task, nil
}

func trimHistory(t *spec.Task, cfg *spec.SendMessageConfig) *spec.Task {
	if cfg != nil && cfg.HistoryLength != nil && *cfg.HistoryLength >= 0 {
		n := min(len(t.History), *cfg.HistoryLength)
		t.History = t.History[len(t.History)-n:]
	}
	return t
}

// CancelTask cancels the turn (and, through the turn service, its
// children) and answers with the task once it is canceled — or as it is
// after a few seconds, when the turn has not ended by then.
func (h *handler) CancelTask(ctx context.Context, req *spec.CancelTaskRequest) (*spec.Task, error) {
	ref, err := h.lookup(ctx, req.ID, gateway.Write)
	if err != nil {
		return nil, err
	}
	if s := ref.state(); s.Terminal() {
		return nil, spec.NewError(spec.ErrTaskNotCancelable, fmt.Sprintf("task %s is %s already", req.ID, s))
	}
	after, err := h.lastSeq(ctx, ref.session, ref.id)
	if err != nil {
		return nil, err
	}
	if err := h.s.tc.Cancel(ctx, ref.id); err != nil {
		return nil, err
	}
	wait, cancel := context.WithTimeout(ctx, cancelWait)
	defer cancel()
	m, err := h.run(wait, runOpts{session: ref.session, turnID: ref.id, after: after}, func(spec.Event) bool { return true })
	if err != nil {
		return nil, err
	}
	return m.Task(nil), nil
}

// cancelWait bounds how long CancelTask waits for the turn's end.
const cancelWait = 10 * time.Second

// ListTasks lists the agent's tasks the caller may read, newest first,
// from the last event of each turn.
func (h *handler) ListTasks(ctx context.Context, req *spec.ListTasksRequest) (*spec.ListTasksResponse, error) {
	size := req.PageSize
	switch {
	case size == 0:
		size = 50
	case size < 0 || size > 100:
		return nil, invalidParams("pageSize must be 1 to 100, got %d", size)
	}
	offset := 0
	if req.PageToken != "" {
		n, err := strconv.Atoi(req.PageToken)
		if err != nil || n < 0 {
			return nil, invalidParams("pageToken %q is not one this server gave", req.PageToken)
		}
		offset = n
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, invalidParams("historyLength must not be negative, got %d", *req.HistoryLength)
	}
	session := "*"
	if req.ContextID != "" {
		if !events.ValidToken(req.ContextID) {
			return nil, invalidParams("contextId %q is not a context of this server", req.ContextID)
		}
		session = req.ContextID
	}
	if err := h.authorize(req.ContextID, gateway.Read); err != nil {
		return nil, err
	}
	refs, err := h.lastOfTurns(ctx, h.s.subj.Events(session, "*", events.ChannelTurn))
	if err != nil {
		return nil, err
	}
	var tasks []listed
	for _, r := range refs {
		if !h.own(r.id) || h.authorize(r.session, gateway.Read) != nil {
			continue
		}
		if req.Status != spec.TaskStateUnspecified && r.state() != req.Status {
			continue
		}
		if req.StatusTimestampAfter != nil && !r.at.After(*req.StatusTimestampAfter) {
			continue
		}
		tasks = append(tasks, r)
	}
	slices.SortFunc(tasks, func(a, b listed) int {
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	resp := &spec.ListTasksResponse{TotalSize: len(tasks), PageSize: size, Tasks: []*spec.Task{}}
	if offset < len(tasks) {
		page := tasks[offset:min(len(tasks), offset+size)]
		for _, r := range page {
			var t *spec.Task
			if req.IncludeArtifacts || (req.HistoryLength != nil && *req.HistoryLength > 0) {
				if t, err = h.snapshot(ctx, r.taskRef, req.HistoryLength); err != nil {
					return nil, err
				}
				if !req.IncludeArtifacts {
					t.Artifacts = nil
				}
			} else {
				at := r.at.UTC()
				t = &spec.Task{ID: spec.TaskID(r.id), ContextID: r.session, Status: spec.TaskStatus{State: r.state(), Timestamp: &at}}
			}
			resp.Tasks = append(resp.Tasks, t)
		}
		if offset+size < len(tasks) {
			resp.NextPageToken = strconv.Itoa(offset + size)
		}
	}
	return resp, nil
}

// listed is a task of ListTasks and when its turn's last event was
// stored.
type listed struct {
	taskRef
	at time.Time
}

// lastOfTurns reads the last message of each turn subject of filter.
func (h *handler) lastOfTurns(ctx context.Context, filter string) ([]listed, error) {
	info, err := h.s.events.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("a2a: list tasks: %w", err)
	}
	n := len(info.State.Subjects)
	if n == 0 {
		return nil, nil
	}
	cons, err := h.s.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("a2a: list tasks: %w", err)
	}
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("a2a: list tasks: %w", err)
	}
	var out []listed
	p := h.s.subj.P()
	for msg := range batch.Messages() {
		env, err := events.DecodeEnvelope(msg.Headers(), msg.Data())
		if err != nil {
			continue
		}
		md, err := msg.Metadata()
		if err != nil {
			continue
		}
		parts := strings.Split(strings.TrimPrefix(msg.Subject(), p+".events."), ".")
		if len(parts) < 3 {
			continue
		}
		out = append(out, listed{taskRef: taskRef{id: parts[1], session: parts[0], env: env}, at: md.Timestamp})
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return nil, fmt.Errorf("a2a: list tasks: %w", err)
	}
	return out, nil
}

// prepare checks a message and submits the turn it starts, or the resume
// it answers; nothing is sent to the turn service for a message it
// refuses. stop ends the watch for the turn service's refusal.
func (h *handler) prepare(ctx context.Context, req *spec.SendMessageRequest) (runOpts, func(), error) {
	msg := req.Message
	switch {
	case msg == nil:
		return runOpts{}, nil, invalidParams("message: missing")
	case msg.Role != spec.MessageRoleUser:
		return runOpts{}, nil, invalidParams("message.role must be %s, got %q", spec.MessageRoleUser, msg.Role)
	case len(msg.Parts) == 0:
		return runOpts{}, nil, invalidParams("message.parts: empty")
	}
	if msg.TaskID != "" {
		return h.prepareResume(ctx, msg, req.Config)
	}
	session := msg.ContextID
	if session == "" {
		prefix := ""
		if bt, ok := h.s.cfg.Authorizer.(gateway.BearerTokens); ok {
			prefix = bt.SessionPrefix(h.r)
		}
		session = prefix + "a2a-" + nuid.Next()
	} else if !events.ValidToken(session) {
		return runOpts{}, nil, invalidParams("message.contextId: must be 1-256 characters without '.', '*', '>' or spaces, got %q", session)
	}
	if err := h.authorize(session, gateway.Write); err != nil {
		return runOpts{}, nil, err
	}
	content, err := toParts(msg.Parts)
	if err != nil {
		return runOpts{}, nil, err
	}
	tr := &events.TurnRequest{
		TurnID: h.taskPrefix() + nuid.Next(), SessionID: session, Agent: h.agent.Ref(),
		Messages: []events.Message{{Role: events.RoleUser, Content: content}},
		Metadata: map[string]any{"via": "a2a"},
	}
	if err := tr.Validate(); err != nil {
		return runOpts{}, nil, invalidParams("message: %v", err)
	}
	if err := h.s.offload(ctx, tr.Messages[0].Content); err != nil {
		return runOpts{}, nil, err
	}
	if req.Config != nil && req.Config.PushConfig != nil {
		// Set before the turn exists: no event of it is missed.
		if _, err := h.s.savePush(ctx, tr.TurnID, req.Config.PushConfig); err != nil {
			return runOpts{}, nil, err
		}
	}
	rejected, stop, err := h.s.tc.Rejections(tr.TurnID)
	if err != nil {
		return runOpts{}, nil, err
	}
	if err := h.s.tc.Submit(ctx, tr); err != nil {
		stop()
		return runOpts{}, nil, err
	}
	h.s.cfg.Logger.Debug("a2a: turn submitted", "agent", h.agent.Ref(), "session_id", session, "turn_id", tr.TurnID)
	return runOpts{session: session, turnID: tr.TurnID, fresh: true, rejected: rejected}, stop, nil
}

// prepareResume answers an input-required task: the message carries the
// decisions of its pending calls.
func (h *handler) prepareResume(ctx context.Context, msg *spec.Message, cfg *spec.SendMessageConfig) (runOpts, func(), error) {
	ref, err := h.lookup(ctx, msg.TaskID, gateway.Write)
	if err != nil {
		return runOpts{}, nil, err
	}
	if msg.ContextID != "" && msg.ContextID != ref.session {
		return runOpts{}, nil, invalidParams("message.contextId %q: task %s is of context %q", msg.ContextID, ref.id, ref.session)
	}
	switch s := ref.state(); {
	case s.Terminal():
		return runOpts{}, nil, spec.NewError(spec.ErrUnsupportedOperation, fmt.Sprintf("task %s is %s: a final task takes no more messages (send a message without taskId to start another in context %s)", ref.id, s, ref.session))
	case s != spec.TaskStateInputRequired:
		return runOpts{}, nil, spec.NewError(spec.ErrUnsupportedOperation, fmt.Sprintf("task %s is %s: only an input-required task takes a message (its approval decisions)", ref.id, s))
	}
	paused, err := events.DecodeData[events.TurnPaused](ref.env)
	if err != nil {
		return runOpts{}, nil, err
	}
	ds, err := decisionsOf(msg.Parts, paused.Pending)
	if err != nil {
		return runOpts{}, nil, err
	}
	if cfg != nil && cfg.PushConfig != nil {
		if _, err := h.s.savePush(ctx, ref.id, cfg.PushConfig); err != nil {
			return runOpts{}, nil, err
		}
	}
	after, err := h.lastSeq(ctx, ref.session, ref.id)
	if err != nil {
		return runOpts{}, nil, err
	}
	rejected, stop, err := h.s.tc.Rejections(ref.id)
	if err != nil {
		return runOpts{}, nil, err
	}
	if err := h.s.tc.Resume(ctx, &events.ResumeRequest{TurnID: ref.id, Decisions: ds}); err != nil {
		stop()
		return runOpts{}, nil, err
	}
	return runOpts{session: ref.session, turnID: ref.id, after: after, rejected: rejected, resume: true}, stop, nil
}

// GetExtendedAgentCard: the public card is the whole card.
func (h *handler) GetExtendedAgentCard(context.Context, *spec.GetExtendedAgentCardRequest) (*spec.AgentCard, error) {
	return nil, spec.ErrExtendedCardNotConfigured
}

// refusing answers every method with err: the RequestHandler of a
// request whose A2A-Version this server does not speak, so that the
// binding encodes VersionNotSupportedError as the method's answer.
type refusing struct{ err error }

var _ a2asrv.RequestHandler = refusing{}

func (r refusing) GetTask(context.Context, *spec.GetTaskRequest) (*spec.Task, error) {
	return nil, r.err
}

func (r refusing) ListTasks(context.Context, *spec.ListTasksRequest) (*spec.ListTasksResponse, error) {
	return nil, r.err
}

func (r refusing) CancelTask(context.Context, *spec.CancelTaskRequest) (*spec.Task, error) {
	return nil, r.err
}

func (r refusing) SendMessage(context.Context, *spec.SendMessageRequest) (spec.SendMessageResult, error) {
	return nil, r.err
}

func (r refusing) SubscribeToTask(context.Context, *spec.SubscribeToTaskRequest) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) { yield(nil, r.err) }
}

func (r refusing) SendStreamingMessage(context.Context, *spec.SendMessageRequest) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) { yield(nil, r.err) }
}

func (r refusing) GetTaskPushConfig(context.Context, *spec.GetTaskPushConfigRequest) (*spec.PushConfig, error) {
	return nil, r.err
}

func (r refusing) ListTaskPushConfigs(context.Context, *spec.ListTaskPushConfigRequest) (*spec.ListTaskPushConfigResponse, error) {
	return nil, r.err
}

func (r refusing) CreateTaskPushConfig(context.Context, *spec.PushConfig) (*spec.PushConfig, error) {
	return nil, r.err
}

func (r refusing) DeleteTaskPushConfig(context.Context, *spec.DeleteTaskPushConfigRequest) error {
	return r.err
}

func (r refusing) GetExtendedAgentCard(context.Context, *spec.GetExtendedAgentCardRequest) (*spec.AgentCard, error) {
	return nil, r.err
}
